"""Reading one corpus file: open the stored bytes, decompress them, hand them to its format.

One role per package: fsspec opens the stored bytes on any protocol; smart_open decompresses
that byte stream (``.gz .bz2 .zst .xz``) with its compression registry,
``smart_open.compression.compression_wrapper`` (``smart_open.open`` itself only opens URLs of
its own transports: no ``memory://``, no fsspec file objects, so fsspec opens and smart_open
only decompresses); the format's reader (:mod:`pipelines.input.formats`) makes the records.

Error policy: damaged or unexpected *content* becomes a :class:`Reject` with its reason and
where it was, and the job goes on. A failure of the *storage* itself (network, permissions)
raises :class:`StorageError`, so the runner retries the bundle rather than recording a file
as unreadable because of a passing outage; so does a failure of the worker's own environment
(:func:`fault_kind`: its temp disk full, its memory out), which says nothing of the file.
Every record read comes out as exactly one :class:`SourceRecord` or :class:`Reject`, so
records read = documents + rejects.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any, Literal

import fsspec
from smart_open.compression import compression_wrapper

from pipelines.errors import EnvironmentFault, InputChanged, StorageError, chain
from pipelines.input.context import BUFFER_BYTES, FileContext
from pipelines.input.expand import InputFile
from pipelines.input.formats import read_jsonl, reader_for, split_suffixes
from pipelines.input.split import FilePart
from pipelines.records import FileReport, Reject, SourceRecord
from pipelines.redact import redact_url
from pipelines.settings import InputSettings

FaultKind = Literal["transient", "environment", "data"]

# By error code, never by message: what may pass if tried again (a disk or network hiccup, a signal) ...
_TRANSIENT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "EIO", "EAGAIN", "EINTR", "EBUSY", "ESTALE", "ETIMEDOUT", "ECONNRESET", "ECONNABORTED", "ECONNREFUSED",
        "EPIPE", "ENETDOWN", "ENETUNREACH", "ENETRESET", "EHOSTDOWN", "EHOSTUNREACH", "ENOLINK", "EREMOTEIO",
    )
    if hasattr(errno, name)
)  # fmt: skip
# ... and what the worker lacks (space, quota, a writable disk, memory, file handles, the permission to read:
# a file it may not read is as absent as a folder it may not list, never a reject that says its documents
# were deleted): no file's fault either
_ENVIRONMENT_ERRNOS = _TRANSIENT_ERRNOS | frozenset(
    getattr(errno, name)
    for name in ("ENOSPC", "EDQUOT", "EROFS", "ENOMEM", "ENOBUFS", "EMFILE", "ENFILE", "EACCES", "EPERM")
    if hasattr(errno, name)
)


_DENIED_ERRNOS = frozenset(getattr(errno, name) for name in ("EACCES", "EPERM") if hasattr(errno, name))


def fault_kind(error: BaseException) -> FaultKind:
    """Whose fault an error is, from its class and code and those of the errors it was raised from:
    ``transient`` (may pass if tried again), ``environment`` (the worker's: temp disk full, out of memory, a
    permission denied, locally or by an object store; ``transient`` is one too), or ``data`` (the file's:
    corrupt gzip, a bad Parquet footer, undecodable bytes), the only one a reject may record."""
    kind: FaultKind = "data"
    for err in chain(error):
        if isinstance(err, ConnectionError | TimeoutError) or (
            isinstance(err, OSError) and err.errno in _TRANSIENT_ERRNOS
        ):
            return "transient"
        if isinstance(err, MemoryError | PermissionError) or (
            isinstance(err, OSError) and err.errno in _ENVIRONMENT_ERRNOS
        ):
            kind = "environment"  # by its class too: an object store's denial (s3fs's AccessDenied) has no errno
    return kind


def _raise_if_environment(error: BaseException, url: str) -> None:
    """Raise :class:`EnvironmentFault` for an error that is not ``url``'s own (see :func:`fault_kind`)."""
    kind = fault_kind(error)
    if kind == "data":
        return
    if any(isinstance(err, PermissionError) or getattr(err, "errno", None) in _DENIED_ERRNOS for err in chain(error)):
        why = "permission denied: the worker's user may not read it"  # the file's folder or the store said so
    else:
        why = f"{kind} fault: the worker's temp disk, memory or storage; TMPDIR is {tempfile.gettempdir()}"
    raise EnvironmentFault(
        f"reading {redact_url(url)} failed, not for its content ({why}): {type(error).__name__}: {error}"
    ) from error


class _OverMaxFileBytes(Exception):
    """A compressed file decompressed past ``input.max_file_bytes``: its reader stops there."""


def read_file(file: InputFile, settings: InputSettings) -> Iterator[SourceRecord | Reject | FileReport]:
    """Read one whole corpus file: each record as a SourceRecord or a Reject, then its FileReport last.

    Never raises for bad content. A file that breaks midway (truncated gzip, corrupt zstd or
    Parquet) keeps the records before the damage and adds one ``unreadable_file`` reject at
    the record where it broke; a file that holds no record at all gives one ``empty`` reject.
    A compressed file decompressing past ``input.max_file_bytes`` keeps the records before that
    point and ends with one ``too_large`` reject.
    A file that cannot be opened (gone since listing) is one ``unreadable_file`` reject. Storage failures
    raise (``StorageError``, or the storage's own error opening the file), and so do the environment's
    (``EnvironmentFault``: a full temp disk, a MemoryError, EIO, a permission denied; :func:`fault_kind`).
    ``FileReport.bytes_read`` counts the stored (compressed) bytes fetched: the file size for
    a stream read to its end, a little more for Parquet, which fetches its footer again.
    """
    return read_part(FilePart(file), settings)


def read_part(part: FilePart, settings: InputSettings) -> Iterator[SourceRecord | Reject | FileReport]:
    """Read one part of a file (:mod:`pipelines.input.split`) as :func:`read_file` reads a whole one.

    A part of a split file reports what it read; the parts' reports added up are the file's: a JSONL
    range fetches exactly its own bytes, so they add up to the file size. Only a whole file is an
    ``empty`` reject when it holds no record (a split file always holds one). The parts of a split file are
    read apart, so each checks the file is the one listed, before its read (else an ``unreadable_file``
    reject) and after it (else :class:`InputChanged`, for the runner to read the part again).
    """
    file = part.file
    fmt, compression = split_suffixes(file.url)
    reader = reader_for(fmt, settings)
    byte_range = (part.start, part.stop) if part.stop is not None and reader is read_jsonl else None  # whole lines
    groups = range(part.start, part.stop) if part.stop is not None and byte_range is None else None
    ctx = FileContext(file, settings, compression, part.records_before, part.index == 0, groups)
    special = _not_regular(file.url)
    if special:
        message = f"not a regular file: {special}"
        yield ctx.reject(0, ctx.name, "unreadable_file", message)
        yield FileReport(ctx.source, 0, 1, message)
        return
    if reader is None:
        message = (
            f"not a corpus file type: {fmt or 'no suffix'} (input.formats can map a suffix to a format,"
            " input.default_format names one for every other file)"
        )
        yield ctx.reject(0, ctx.name, "not_text", message)
        yield FileReport(ctx.source, 0, 1)
        return
    try:
        raw = _open(file.url)
    except OSError as err:  # a local error is this file's, but for the environment's; a remote one
        _raise_if_environment(err, file.url)
        if "://" in file.url and not isinstance(err, _FILE_ERRORS):
            raise  # may be the store's: raised, so the runner retries
        reject = ctx.reject(0, ctx.name, "unreadable_file", f"cannot open the file: {type(err).__name__}: {err}")
        yield reject
        yield FileReport(ctx.source, 0, 1, reject.message)
        return
    split = part.parts > 1  # the parts of one file are read apart: each checks it is the file they were cut from
    changed = _changed_since_listed(file) if split else None
    if changed:
        raw.close()
        message = f"the file changed since it was listed ({changed}): part {part.index + 1} of {part.parts} not read"
        yield ctx.reject(part.records_before, ctx.name, "unreadable_file", message)
        yield FileReport(ctx.source, 0, 1, message)
        return
    emitted, error = 0, ""
    with raw:
        stored = _StorageStream(raw, file.url)
        if byte_range is not None:
            stored.seek(byte_range[0])
            stored.remaining = byte_range[1] - byte_range[0]
        try:
            for item in reader(_decompressed(stored, compression, settings.max_file_bytes), ctx):
                emitted += 1
                yield item
        except StorageError:
            raise
        except _OverMaxFileBytes:  # a decompression bomb, or a file too big to read: what came before is kept
            emitted += 1
            limit = settings.max_file_bytes
            message = f"decompresses to over {limit} bytes (input.max_file_bytes): the rest is not read"
            yield ctx.reject(ctx.record, ctx.name, "too_large", message)
        except Exception as err:  # any damage in a file's content: a reject, never a crashed job
            _raise_if_environment(err, file.url)  # but a full temp disk or a MemoryError is no damage
            error = redact_url(f"{type(err).__name__}: {err}")  # a message may quote the URL
            emitted += 1
            yield ctx.reject(ctx.record, ctx.name, "unreadable_file", f"file unreadable: {error}")
    changed = _changed_since_listed(file) if split else None
    if changed:
        raise InputChanged(
            f"input file {redact_url(file.url)} changed while part {part.index + 1} of {part.parts} was read"
            f" ({changed}): its parts would mix two versions; run again"
        )
    if emitted == 0 and part.parts == 1:
        emitted = 1
        yield ctx.reject(0, ctx.name, "empty", "file holds no record")
    yield FileReport(ctx.source, stored.bytes_read, emitted, error)


_FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError)  # a denial is the environment's


def _changed_since_listed(file: InputFile) -> str | None:
    """What differs between ``file`` as listed and as it is now (its stamp, or its size when it was listed with
    none), or None: one metadata request, made by each part of a split file before and after its read."""
    fs = _filesystem(file.url)
    fs.invalidate_cache(file.url)  # a cached listing would say the file is as it was
    try:
        info = fs.info(file.url)
    except FileNotFoundError:
        return "it is gone"
    if file.stamp is not None:
        now = InputFile.listed(file.url, file.relative_path, info).stamp
        return None if now == file.stamp else "its size, time or ETag"
    size = info.get("size")
    return None if size == file.size else f"{file.size} bytes listed, {size} now"


def _open(url: str) -> IO[bytes]:
    """The stored bytes, opened through the file's filesystem with the URL as one path: ``fsspec.open``
    would read a ``::`` in a file name (``notes::v2.jsonl``) as URL chaining and open another file."""
    file: IO[bytes] = _filesystem(url).open(url, "rb")
    return file


def _filesystem(url: str) -> fsspec.AbstractFileSystem:
    """The filesystem of what the URL names (abfs: its account), the URL taken as one path."""
    cls = fsspec.get_filesystem_class(url.split("://", 1)[0] if "://" in url else "file")
    return cls(**cls._get_kwargs_from_urls(url))


def _not_regular(url: str) -> str | None:
    """What a local path is when it is not a regular file (opening a FIFO would wait for ever), else None.

    A missing file is None: opening it fails, an ``unreadable_file`` reject like any file gone since listing.
    """
    if "://" in url:
        return None  # object stores hold only objects
    try:
        mode = os.stat(url).st_mode
    except FileNotFoundError:
        return "a broken symlink" if os.path.islink(url) else None
    except OSError as err:  # a symlink loop (ELOOP), a name too long: nothing to read there
        _raise_if_environment(err, url)
        return f"cannot be examined ({err.strerror or type(err).__name__})"
    if stat.S_ISREG(mode):
        return None
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}
    kinds |= {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device"}
    return next((kind for test, kind in kinds.items() if test(mode)), "a special file")


class _StorageStream(io.RawIOBase):
    """The stored bytes of a file: counts them and marks storage failures as StorageError.

    ``remaining`` (None: no bound) bounds what is read, for a part that is a byte range of the file.
    """

    def __init__(self, raw: IO[bytes], url: str) -> None:
        super().__init__()
        self._raw = raw
        self._url = url
        self.bytes_read = 0
        self.remaining: int | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._guard(self._raw.seek, offset, whence)

    def tell(self) -> int:
        return self._guard(self._raw.tell)

    def readinto(self, buffer: Any) -> int:
        wanted = len(buffer) if self.remaining is None else min(len(buffer), self.remaining)
        data = self._guard(self._raw.read, wanted) if wanted else b""
        buffer[: len(data)] = data
        self.bytes_read += len(data)
        if self.remaining is not None:
            self.remaining -= len(data)
        return len(data)

    def _guard(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as err:
            raise StorageError(f"reading {self._url} failed: {type(err).__name__}: {err}") from err


class _StepwiseStream(io.RawIOBase):
    """A decompressor read one step at a time (``read1``), so damage costs only what follows it.

    A BufferedReader filling its buffer from a decompressor (smart_open's wrapper, or gzip's own
    buffer) calls it several times; when one call fails on damage, what the earlier calls decoded
    is dropped with the error. Through ``read1`` every byte decoded before the damage reaches the
    reader first, so a truncated or corrupt file keeps all its whole records before the damage.
    Past ``limit`` decompressed bytes it raises :class:`_OverMaxFileBytes`: a small file cannot
    make a worker decompress for ever.
    """

    def __init__(self, decompressor: Any, limit: int) -> None:
        super().__init__()
        self._decompressor = decompressor
        self._left = limit
        self._over = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._over:
            raise _OverMaxFileBytes
        data = self._decompressor.read1(min(len(buffer), self._left + 1))
        self._over = len(data) > self._left  # the bytes up to the limit reach the reader first, the next read raises
        data = data[: self._left]
        self._left -= len(data)
        if self._over and not data:
            raise _OverMaxFileBytes
        buffer[: len(data)] = data
        return len(data)


def _decompressed(stored: _StorageStream, compression: str, limit: int) -> io.BufferedReader[Any]:
    """The decompressed bytes, buffered (the readers peek and read lines)."""
    buffered: io.BufferedReader[Any] = io.BufferedReader(stored, buffer_size=BUFFER_BYTES)
    if not compression:
        return buffered
    decompressor: Any = compression_wrapper(buffered, "rb", compression=compression)
    if isinstance(decompressor, io.BufferedReader):  # smart_open's wrapper: read the decompressor itself
        decompressor = decompressor.detach()
    return io.BufferedReader(_StepwiseStream(decompressor, limit), buffer_size=BUFFER_BYTES)
