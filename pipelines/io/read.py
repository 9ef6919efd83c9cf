"""Reading corpora: expand globs on the driver, then read each file into records and rejects.

One role per package:

- fsspec lists and opens the stored bytes on any protocol (local, ``s3://``, ``gs://``,
  ``az://``, ``memory://``). Credentials and endpoints come from the ordinary environment
  (``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``GOOGLE_APPLICATION_CREDENTIALS``...), never from here.
- smart_open decompresses that byte stream (``.gz .bz2 .zst .xz``) with its compression
  registry, ``smart_open.compression.compression_wrapper``: ``smart_open.open`` itself only
  opens URLs of its own transports (no ``memory://``, no fsspec file objects), so fsspec opens
  and smart_open only decompresses.
- pyarrow reads Parquet by record batch.

Error policy: damaged or unexpected *content* becomes a :class:`Reject` with its reason and
where it was, and the job goes on. A failure of the *storage* itself (network, permissions)
raises :class:`StorageError`, so the runner retries the bundle rather than recording a file
as unreadable because of a passing outage.

Record numbers: the 1-based line of a JSONL file (blank lines are not records but keep their
number, so a reject points at the real line), the 1-based row of a Parquet file, 0 for a
whole-file document or for the file itself. Every record read comes out as exactly one
:class:`SourceRecord` or :class:`Reject`, so records read = documents + rejects.
"""

from __future__ import annotations

import glob
import io
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import IO, Any

import apache_beam as beam
import fsspec
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics
from apache_beam.pvalue import PBegin, TaggedOutput
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from smart_open.compression import compression_wrapper

from pipelines.manifest import redact_url
from pipelines.records import EXCERPT_CHARS, REJECT_REASONS, FileReport, Reject, SourceRecord, excerpt
from pipelines.settings import InputSettings

COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".xz")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
TEXT_SUFFIXES = (".txt", ".md", ".rst")
PARQUET_SUFFIXES = (".parquet",)

RECORDS_TAG = "records"
REJECTS_TAG = "rejects"
FILES_TAG = "files"
METRICS_NAMESPACE = "zerda"

_BUFFER_BYTES = 1 << 20
_SNIFF_BYTES = 8192
_SPOOL_BYTES = 64 << 20
_PARQUET_BATCH_ROWS = 256
_UTF8_BOM = b"\xef\xbb\xbf"
_MISSING = object()


class InputError(ValueError):
    """An input pattern that matches no file; the CLI exits with code 2."""


class StorageError(OSError):
    """The storage failed while a file was read (not its content): the runner retries."""


@dataclass(frozen=True)
class InputFile:
    """A corpus file: where it is, and its path relative to the glob root (the base of its ids)."""

    url: str
    relative_path: str


def sample_corpus_glob() -> str:
    """Where the bundled sample corpus is, from a checkout or an installed package."""
    return str(resources.files("pipelines") / "sample_corpus")


def expand_inputs(patterns: Sequence[str]) -> list[InputFile]:
    """Expand globs and directories to files on the driver: sorted by URL, each file once.

    A directory (given, or matched by a glob) stands for every file below it. Below the glob
    root, names starting with ``.`` or ``_`` are skipped, as Spark and Hive do, so that
    ``.DS_Store`` or a previous output's ``_manifest.json`` is never read as a document; a
    file named explicitly is always taken. Raises :class:`InputError` for a pattern that
    matches no file.
    """
    found: dict[str, InputFile] = {}
    for pattern in patterns:
        files = _expand(pattern)
        if not files:
            raise InputError(f"input {pattern!r} matches no file")
        for file in files:
            found.setdefault(file.url, file)
    return sorted(found.values(), key=lambda f: f.url)


def _expand(pattern: str) -> list[InputFile]:
    fs, path = url_to_fs(pattern)
    if glob.has_magic(path):
        root, matches = _glob_root(path), fs.glob(path, detail=True)
    elif fs.isdir(path):
        root, matches = path, {path: {"type": "directory"}}
    elif fs.isfile(path):
        return [InputFile(_url(fs, path), path.rsplit("/", 1)[-1])]
    else:
        return []
    files = []
    for match, info in matches.items():
        for file in fs.find(match) if info["type"] == "directory" else [match]:
            relative = file[len(root) :].lstrip("/")
            if not any(part.startswith((".", "_")) for part in relative.split("/")):
                files.append(InputFile(_url(fs, file), relative))
    return files


def _glob_root(path: str) -> str:
    """The folder above the first path part with a wildcard: ids are relative to it."""
    parts = path.split("/")
    first_magic = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return "/".join(parts[:first_magic])


def _url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """Local files keep a plain path; others keep their protocol (``s3://bucket/key``)."""
    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)


def split_suffixes(url: str) -> tuple[str, str]:
    """(format suffix, compression suffix or ""), lower-cased: ``a.JSONL.gz`` -> (".jsonl", ".gz")."""
    name = url.rsplit("/", 1)[-1].lower()
    compression = next((s for s in COMPRESSION_SUFFIXES if name.endswith(s)), "")
    stem = name[: len(name) - len(compression)]
    dot = stem.rfind(".")
    return (stem[dot:] if dot > 0 else ""), compression


# --- reading one file -------------------------------------------------------------------


class _StorageStream(io.RawIOBase):
    """The stored bytes of a file: counts them and marks storage failures as StorageError."""

    def __init__(self, raw: IO[bytes], url: str) -> None:
        super().__init__()
        self._raw = raw
        self._url = url
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._guard(self._raw.seek, offset, whence)

    def tell(self) -> int:
        return self._guard(self._raw.tell)

    def readinto(self, buffer: Any) -> int:
        data = self._guard(self._raw.read, len(buffer))
        buffer[: len(data)] = data
        self.bytes_read += len(data)
        return len(data)

    def _guard(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as err:
            raise StorageError(f"reading {self._url} failed: {type(err).__name__}: {err}") from err


@dataclass
class _FileContext:
    """One file being read: turns values into SourceRecords or Rejects, and knows where it is."""

    file: InputFile
    settings: InputSettings
    compression: str
    record: int = 0  # the record being read now: where an unreadable file broke

    def __post_init__(self) -> None:
        self.source = redact_url(self.file.url)  # what chunks, rejects and the manifest say: no password

    def reject(self, record: int, doc_id: str, reason: str, message: str, bad_input: object = "") -> Reject:
        return Reject(self.source, record, doc_id, reason, redact_url(message), excerpt(bad_input))

    def default_id(self, record: int) -> str:
        """Stable id of a record without one: ``relative/path.jsonl/17``."""
        return f"{self.file.relative_path}/{record}"

    def decode(self, data: bytes, record: int, doc_id: str) -> str | Reject:
        """UTF-8 (a leading BOM dropped); invalid bytes rejected or replaced, as configured."""
        try:
            return data.decode("utf-8-sig", self.settings.encoding_errors)
        except UnicodeDecodeError as err:
            around = data[max(0, err.start - 60) : err.end + 60].decode("utf-8", "backslashreplace")
            return self.reject(
                record, doc_id, "invalid_utf8", f"invalid UTF-8 at byte {err.start}: {err.reason}", around
            )

    def document(self, record: int, doc_id: str, text: str) -> SourceRecord | Reject:
        """The text as it is (line ends untouched: chunks are exact slices), or why it is refused."""
        if not text.strip():
            return self.reject(record, doc_id, "empty", "document is empty or whitespace only", text)
        if len(text) > self.settings.max_document_chars:
            limit = self.settings.max_document_chars
            return self.reject(record, doc_id, "too_large", f"{len(text)} characters, over {limit}", text)
        if "\x00" in text:
            return self.reject(record, doc_id, "not_text", f"NUL character at {text.index(chr(0))}", text)
        return SourceRecord(self.source, record, doc_id, text)

    def from_fields(self, record: int, raw_id: object, text: object, bad_input: object) -> SourceRecord | Reject:
        """A JSONL object's or Parquet row's id and text; ids may be strings or integers."""
        has_id = (isinstance(raw_id, str) and raw_id != "") or (
            isinstance(raw_id, int) and not isinstance(raw_id, bool)
        )
        doc_id = str(raw_id) if has_id else self.default_id(record)
        if isinstance(text, bytes):
            text = self.decode(text, record, doc_id)
            if isinstance(text, Reject):
                return text
        if not isinstance(text, str):
            field = self.settings.text_field
            what = f"has no field {field!r}" if text is _MISSING else f"has {field!r} = {_kind(text)}, not a string"
            return self.reject(record, doc_id, "missing_text", f"record {what}", bad_input)
        return self.document(record, doc_id, text)

    def binary_sniffed(self, stream: io.BufferedReader) -> Reject | None:
        """A NUL byte at the start means a binary file matched by the glob, not text."""
        if b"\x00" in stream.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]:
            return self.reject(0, self.file.relative_path, "not_text", "binary content (NUL bytes) in a text file")
        return None


def _kind(value: object) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def read_file(file: InputFile, settings: InputSettings) -> Iterator[SourceRecord | Reject | FileReport]:
    """Read one corpus file: each record as a SourceRecord or a Reject, then its FileReport last.

    Never raises for bad content. A file that breaks midway (truncated gzip, corrupt zstd or
    Parquet) keeps the records before the damage and adds one ``unreadable_file`` reject at
    the record where it broke; a file that holds no record at all gives one ``empty`` reject.
    Storage failures raise (``StorageError``, or the error opening the file).
    ``FileReport.bytes_read`` counts the stored (compressed) bytes fetched: the file size for
    a stream read to its end, a little more for Parquet, which fetches its footer again.
    """
    fmt, compression = split_suffixes(file.url)
    ctx = _FileContext(file, settings, compression)
    named = {suffix.lower(): name for suffix, name in settings.formats.items()}.get(fmt)
    reader = _FORMATS[named] if named else _READERS.get(fmt)
    if reader is None:
        message = f"not a corpus file type: {fmt or 'no suffix'} (input.formats can map a suffix to a format)"
        yield ctx.reject(0, file.relative_path, "not_text", message)
        yield FileReport(ctx.source, 0, 1)
        return
    emitted, error = 0, ""
    with fsspec.open(file.url, "rb") as raw:
        stored = _StorageStream(raw, file.url)
        try:
            for item in reader(_decompressed(stored, compression), ctx):
                emitted += 1
                yield item
        except StorageError:
            raise
        except Exception as err:  # any damage in a file's content: a reject, never a crashed job
            error = redact_url(f"{type(err).__name__}: {err}")  # a message may quote the URL
            emitted += 1
            yield ctx.reject(ctx.record, file.relative_path, "unreadable_file", f"file unreadable: {error}")
    if emitted == 0:
        emitted = 1
        yield ctx.reject(0, file.relative_path, "empty", "file holds no record")
    yield FileReport(ctx.source, stored.bytes_read, emitted, error)


class _StepwiseStream(io.RawIOBase):
    """A decompressor read one step at a time (``read1``), so damage costs only what follows it.

    A BufferedReader filling its buffer from a decompressor (smart_open's wrapper, or gzip's own
    buffer) calls it several times; when one call fails on damage, what the earlier calls decoded
    is dropped with the error. Through ``read1`` every byte decoded before the damage reaches the
    reader first, so a truncated or corrupt file keeps all its whole records before the damage.
    """

    def __init__(self, decompressor: Any) -> None:
        super().__init__()
        self._decompressor = decompressor

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._decompressor.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _decompressed(stored: _StorageStream, compression: str) -> io.BufferedReader[Any]:
    """The decompressed bytes, buffered (the readers peek and read lines)."""
    buffered: io.BufferedReader[Any] = io.BufferedReader(stored, buffer_size=_BUFFER_BYTES)
    if not compression:
        return buffered
    decompressor: Any = compression_wrapper(buffered, "rb", compression=compression)
    if isinstance(decompressor, io.BufferedReader):  # smart_open's wrapper: read the decompressor itself
        decompressor = decompressor.detach()
    return io.BufferedReader(_StepwiseStream(decompressor), buffer_size=_BUFFER_BYTES)


def _read_jsonl(stream: io.BufferedReader, ctx: _FileContext) -> Iterator[SourceRecord | Reject]:
    """One JSON object a line, streamed; a line that is valid JSON but not an object is ``invalid_json``."""
    binary = ctx.binary_sniffed(stream)
    if binary:
        yield binary
        return
    limit = _line_limit(ctx.settings.max_document_chars)
    for number, line in _lines(stream, ctx, limit):
        if line.isspace():
            continue
        default_id = ctx.default_id(number)
        if len(line) > limit:
            shown = line[:1000].decode("utf-8", "replace")  # text, not the repr of bytes
            yield ctx.reject(number, default_id, "too_large", f"line longer than {limit} bytes", shown)
            continue
        text = ctx.decode(line, number, default_id)
        yield text if isinstance(text, Reject) else _json_record(ctx, number, text)


def _line_limit(max_chars: int) -> int:
    """Bytes a JSONL line may have: a JSON string spends at most 12 bytes on a character
    (an escaped surrogate pair), plus room for the other fields."""
    return 12 * max_chars + _BUFFER_BYTES


def _lines(stream: io.BufferedReader, ctx: _FileContext, limit: int) -> Iterator[tuple[int, bytes]]:
    """Numbered lines; a line over ``limit`` bytes comes cut to ``limit + 1`` and the rest is skipped."""
    while True:
        ctx.record += 1
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := stream.readline(_BUFFER_BYTES)) and not rest.endswith(b"\n"):
                pass
        yield ctx.record, line


def _json_record(ctx: _FileContext, number: int, line: str) -> SourceRecord | Reject:
    shown = line[: EXCERPT_CHARS + 2].rstrip("\r\n")  # what a reject shows, without copying a long line
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as err:
        return ctx.reject(number, ctx.default_id(number), "invalid_json", f"invalid JSON: {err}", shown)
    if not isinstance(obj, dict):
        message = f"a JSON {type(obj).__name__} where an object was expected"
        return ctx.reject(number, ctx.default_id(number), "invalid_json", message, shown)
    settings = ctx.settings
    return ctx.from_fields(number, obj.get(settings.id_field), obj.get(settings.text_field, _MISSING), shown)


def _read_text(stream: io.BufferedReader, ctx: _FileContext) -> Iterator[SourceRecord | Reject]:
    """A whole file is one document, read up to what ``max_document_chars`` allows and no further."""
    binary = ctx.binary_sniffed(stream)
    if binary:
        yield binary
        return
    doc_id = ctx.file.relative_path
    limit = 4 * ctx.settings.max_document_chars + len(_UTF8_BOM)  # UTF-8 spends at most 4 bytes a character
    data = stream.read(limit + 1)
    if not data:
        return
    if len(data) > limit:
        message = f"over {limit} bytes, so over {ctx.settings.max_document_chars} characters"
        yield ctx.reject(0, doc_id, "too_large", message, data[:1000].decode("utf-8", "replace"))
        return
    text = ctx.decode(data, 0, doc_id)
    del data  # else the raw bytes stay alive, in this suspended generator, while the document is chunked
    yield text if isinstance(text, Reject) else ctx.document(0, doc_id, text)


def _read_parquet(stream: io.BufferedReader, ctx: _FileContext) -> Iterator[SourceRecord | Reject]:
    """Rows by record batch; only the text and id columns are read."""
    settings = ctx.settings
    with _seekable(stream, ctx.compression) as source:
        parquet = pq.ParquetFile(source)
        names = parquet.schema_arrow.names
        if settings.text_field not in names:
            message = f"no column {settings.text_field!r} (columns: {', '.join(names)})"
            yield ctx.reject(0, ctx.file.relative_path, "missing_text", message)
            return
        columns = [settings.text_field] + ([settings.id_field] if settings.id_field in names else [])
        row = 0
        ctx.record = 1
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=columns):
            texts = batch.column(settings.text_field).to_pylist()
            ids = batch.column(settings.id_field).to_pylist() if len(columns) > 1 else [None] * len(texts)
            for text, raw_id in zip(texts, ids, strict=True):
                row += 1
                yield ctx.from_fields(row, raw_id, text, text)
            ctx.record = row + 1


@contextmanager
def _seekable(stream: io.BufferedReader, compression: str) -> Iterator[IO[bytes]]:
    """Parquet seeks to its footer: a decompressed stream is spooled first (to disk past 64 MiB)."""
    if not compression:
        yield stream
        return
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
        shutil.copyfileobj(stream, spool, _BUFFER_BYTES)
        spool.seek(0)
        yield spool


_Reader = Callable[[io.BufferedReader, _FileContext], Iterator[SourceRecord | Reject]]
_FORMATS: Mapping[str, _Reader] = {"jsonl": _read_jsonl, "text": _read_text, "parquet": _read_parquet}
_READERS: Mapping[str, _Reader] = {
    **dict.fromkeys(JSONL_SUFFIXES, _read_jsonl),
    **dict.fromkeys(TEXT_SUFFIXES, _read_text),
    **dict.fromkeys(PARQUET_SUFFIXES, _read_parquet),
}


# --- the Beam transform -----------------------------------------------------------------


class ReadCorpus(beam.PTransform):
    """Expanded corpus files -> SourceRecords (``records``, the main output), Rejects
    (``rejects``) and one FileReport per file (``files``).

    One element per file, then a Reshuffle: without it the runner fuses the read with the
    ``Create`` and reads every file on one worker.
    """

    def __init__(self, files: Sequence[InputFile], settings: InputSettings, label: str | None = None) -> None:
        super().__init__(label)
        self._files = list(files)
        self._settings = settings

    def expand(self, pbegin: PBegin) -> Any:
        return (
            pbegin
            | "ListFiles" >> beam.Create(self._files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles"
            >> beam.ParDo(_ReadFileFn(self._settings)).with_outputs(REJECTS_TAG, FILES_TAG, main=RECORDS_TAG)
        )


class _ReadFileFn(beam.DoFn):
    """Reads one file per element; counts records, files, bytes and rejects by reason."""

    def __init__(self, settings: InputSettings) -> None:
        self._input = settings

    def setup(self) -> None:
        self._records_read = Metrics.counter(METRICS_NAMESPACE, "records_read")
        self._files_read = Metrics.counter(METRICS_NAMESPACE, "files_read")
        self._bytes_read = Metrics.counter(METRICS_NAMESPACE, "bytes_read")
        self._rejects = {reason: Metrics.counter(METRICS_NAMESPACE, f"rejects_{reason}") for reason in REJECT_REASONS}

    def process(self, file: InputFile) -> Iterator[SourceRecord | TaggedOutput]:
        for item in read_file(file, self._input):
            if isinstance(item, FileReport):
                self._files_read.inc()
                self._bytes_read.inc(item.bytes_read)
                yield TaggedOutput(FILES_TAG, item)
                continue
            self._records_read.inc()
            if isinstance(item, Reject):
                self._rejects[item.reason].inc()
                yield TaggedOutput(REJECTS_TAG, item)
            else:
                yield item
