"""Globs, directories and files to the sorted list of corpus files, on the driver.

fsspec lists the stored files on any protocol (local, ``s3://``, ``gs://``, ``az://``,
``memory://``). Credentials and endpoints come from the ordinary environment
(``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``GOOGLE_APPLICATION_CREDENTIALS``...), never from here.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import glob
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import glob_translate

from pipelines.errors import InputError
from pipelines.output.identity import local_paths_below
from pipelines.output.layout import CHUNK_SUFFIX, PARTITION_COLUMN
from pipelines.records import encodable
from pipelines.redact import bounded, environment_held, redact_url, remember_credentials

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InputFile:
    """A corpus file: where it is, its path relative to the glob root (the base of its ids), its
    size as listed (None when the listing did not say), which decides whether it is split, and its
    stamp (:func:`file_stamp`), by which an incremental run knows it unchanged without reading it."""

    url: str
    relative_path: str
    size: int | None = field(default=None, compare=False)
    stamp: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        """Only ``url`` is opened; the relative path makes ids and the stamp is stored, so neither keeps a
        credential a signed URL's query holds (``a.jsonl?sig=…`` named as it is)."""
        object.__setattr__(self, "relative_path", redact_url(self.relative_path))
        if self.stamp is not None:
            object.__setattr__(self, "stamp", redact_url(self.stamp))

    @classmethod
    def listed(cls, url: str, relative_path: str, info: dict[str, Any]) -> InputFile:
        """The file a listing gives (``info``): its size, and its stamp made from the relative path once that
        is redacted, so the path is redacted once and the stamp needs no redaction of its own."""
        file = cls(url, relative_path, _size(info))
        object.__setattr__(file, "stamp", file_stamp(info, file.relative_path))
        return file

    @functools.cached_property
    def source(self) -> str:
        """:func:`source_name` of its URL, worked out once: the launch asks it of every file several times."""
        return source_name(self.url)


def source_name(url: str) -> str:
    """What chunks, rejects, the index and the manifest say a file is: its URL without credentials."""
    return encodable(redact_url(url))


def sample_corpus_glob() -> str:
    """Where the bundled sample corpus is, from a checkout or an installed package."""
    return str(resources.files("pipelines") / "sample_corpus")


def expand_inputs(patterns: Sequence[str], output: str | None = None) -> list[InputFile]:
    """Expand globs and directories to files on the driver: sorted by URL, each file once.

    A directory (given, or matched by a glob) stands for every file below it. Below the glob
    root, names starting with ``.`` or ``_`` are skipped, as Spark and Hive do, so that
    ``.DS_Store`` or a previous output's ``_manifest.json`` is never read as a document; a
    file named explicitly is always taken. A file reached by several paths (``d/a.jsonl``,
    ``d/../d/a.jsonl``, ``d//a.jsonl``, a symlink, two overlapping globs) is read once, under a
    path the order of the patterns cannot change (:func:`preferred`): local files are compared
    by their real path, others by URL (on an object store ``d//a`` and ``d/../a`` name other
    keys). What is not a regular file
    (FIFO, socket, device, directory behind a symlink) is kept, and the reader rejects it as
    ``unreadable_file``, so the manifest accounts for it. Raises :class:`InputError` for a
    pattern that matches no file, or for an ``output`` whose chunks the patterns would read.
    """
    for url in [*patterns, output or ""]:
        remember_credentials(url)  # libraries may echo them in shapes no URL rule catches
    if output is not None:
        for pattern in patterns:
            refuse_output_inside(pattern, output)
    found: dict[str, InputFile] = {}
    real_folders: dict[str, str] = {}  # a folder's real path, resolved once for all its files
    listed, skipped = 0, []
    for pattern in patterns:
        files, hidden = match_pattern(pattern)
        if not files:
            raise InputError(f"input {bounded(redact_url(pattern))!r} matches no file")
        listed += len(files)
        skipped += hidden
        for file in files:
            key = file_identity(file.url, real_folders)
            if key not in found or preferred(file) < preferred(found[key]):
                found[key] = file
    say_listed_again(listed - len(found))
    say_skipped(skipped)
    return sorted(found.values(), key=lambda f: f.url)


def match_pattern(pattern: str) -> tuple[list[InputFile], list[str]]:
    """One pattern's files and the names it skipped (:func:`_expand`); what cannot be listed is an InputError."""
    with listing_errors(pattern), environment_held():  # each file's path is redacted: the environment read once
        return _expand(pattern)


@contextlib.contextmanager
def listing_errors(pattern: str) -> Iterator[None]:
    """Within, what the listing of ``pattern`` raises is an InputError naming it (an invalid bucket name: a usage
    error, before anything is written)."""
    try:
        yield
    except InputError:
        raise
    except Exception as err:
        raise InputError(
            f"input {bounded(redact_url(pattern))!r} cannot be listed: {type(err).__name__}: {bounded(str(err))}"
        ) from err


def say_listed_again(again: int) -> None:
    if again > 0:
        log.info("%d path(s) reach a file listed already: each file is read once", again)


def say_skipped(skipped: Sequence[str]) -> None:
    if skipped:
        shown = ", ".join(bounded(redact_url(name), 80) for name in sorted(skipped)[:3])
        log.info("skipped %d file(s) named with a leading '.' or '_' below an input root: %s", len(skipped), shown)


def preferred(file: InputFile) -> tuple[int, str, str]:
    """Which of a file's paths is kept, whatever the order of the inputs: the one from the broadest root
    (the relative path of most parts, so its ids say the most), then the first URL in sort order."""
    return -file.relative_path.count("/"), file.url, file.relative_path


def file_identity(url: str, real_folders: dict[str, str]) -> str:
    """What makes two paths the same file: the real path of a local file, else the URL. A file that is no
    symlink has its folder's real path and its own name: the folder is resolved once (``real_folders``), not
    every part of the path again for each of its files."""
    if "://" in url:
        return url
    folder, name = os.path.split(url)
    if name in ("", ".", "..") or os.path.islink(url):
        return os.path.realpath(url)
    if folder not in real_folders:
        real_folders[folder] = os.path.realpath(folder or os.curdir)
    return os.path.join(real_folders[folder], name)


def refuse_output_inside(pattern: str, output: str) -> None:
    """Raise InputError if ``pattern`` would read what a job writes into ``output`` (its chunk files).

    A rerun would read its previous chunks back as corpus and double them. The check asks whether
    a chunk file's path, or a folder above it (a matched folder stands for all below), matches the
    pattern, with the same rules as the expansion: fsspec's glob syntax, ``.``/``_`` names skipped.
    A local output is asked under each name it has below the input's root (a bind mount, a symlink:
    :func:`pipelines.output.identity.local_paths_below`); an object store's under its canonical URL.
    """
    try:
        fs_in, path_in = url_to_fs(pattern)
        fs_out, path_out = url_to_fs(output)
    except (ValueError, ImportError):  # an unknown protocol: the expansion or the output check says so
        return
    if fs_in.protocol != fs_out.protocol:
        return
    has_magic = glob.has_magic(path_in) and not fs_in.exists(path_in)  # an existing path is read as named
    root = glob_root(path_in) if has_magic else path_in
    outputs = [path_out]
    if isinstance(fs_in, LocalFileSystem):
        real_root = os.path.realpath(root or "/")
        path_in, root = real_root + path_in[len(root) :], real_root
        outputs = local_paths_below(real_root, path_out)
    if any(_reads_output(path_in, root, has_magic, path) for path in outputs):
        raise InputError(
            f"output {bounded(redact_url(output))!r} is inside input {bounded(redact_url(pattern))!r}:"
            " a rerun would read its own chunks back as corpus; write the output elsewhere"
        )


def _reads_output(path_in: str, root: str, has_magic: bool, path_out: str) -> bool:
    """Whether the pattern ``path_in`` (its folder ``root``) matches a chunk file of ``path_out`` or a folder above."""
    chunk_file = f"{path_out.rstrip('/')}/{PARTITION_COLUMN}=0/part-0{CHUNK_SUFFIX}"
    if not chunk_file.startswith(root.rstrip("/") + "/"):
        return False
    parts = chunk_file[len(root.rstrip("/")) + 1 :].split("/")
    if any(part.startswith((".", "_")) for part in parts):
        return False
    if not has_magic:
        return True
    matches = re.compile(glob_translate(path_in)).match
    prefixes = ["/".join([root.rstrip("/"), *parts[: i + 1]]) for i in range(len(parts))]
    return any(matches(prefix) for prefix in prefixes)


def _expand(pattern: str) -> tuple[list[InputFile], list[str]]:
    """A pattern's files, and the relative paths it skipped (a ``.`` or ``_`` name below its root); a path
    that exists is taken as named, even with glob characters (``glob[1]*?.txt``)."""
    fs, path = url_to_fs(pattern)
    exists = local_exists(pattern, path) if isinstance(fs, LocalFileSystem) else fs.exists(path)
    if glob.has_magic(path) and not exists:
        root = glob_root(path)
        matches = _strict(fs, pattern, root, path).glob(path, detail=True)
    elif exists and fs.isdir(path):
        root, matches = path, {path: {"type": "directory"}}
    elif exists:
        try:
            info = fs.info(path)
        except OSError:  # a broken symlink: the reader says so
            info = {}
        relative = path.rsplit("/", 1)[-1]
        return [InputFile.listed(_url(fs, path), relative, info)], []
    else:
        return [], []
    files, skipped = [], []
    for match, info in matches.items():
        found = _strict(fs, pattern, root).find(match, detail=True) if info["type"] == "directory" else {match: info}
        for file, detail in found.items():
            relative = file[len(root) :].lstrip("/")
            if any(part.startswith((".", "_")) for part in relative.split("/")):
                skipped.append(relative)
            else:
                files.append(InputFile.listed(_url(fs, file), relative, detail))
    return files, skipped


def _strict(fs: fsspec.AbstractFileSystem, pattern: str, root: str, glob_path: str = "") -> Any:
    """``fs``, but a folder below ``root`` that cannot be listed stops the job (exit 2) before anything is
    written: left out, its files would count as deleted (``_changes`` removals, on to a vector store).

    fsspec's generic walk (local files, ``memory://``, sftp...) takes ``on_error`` but drops it when it goes
    down a level, so a sub-folder it cannot list is left out in silence; :class:`_StrictWalk` hands it on.
    Stores whose own ``find`` lists flat (s3fs, gcsfs, adlfs) raise their listing errors already. A folder
    gone since it was seen is no error (its files are gone), nor is one with a ``.`` or ``_`` name below
    ``root``, or one that ``glob_path`` cannot reach (``2024-*/`` and a folder ``lost+found``): neither is read.
    """
    generic = (fsspec.AbstractFileSystem.find, AsyncFileSystem._find)
    if getattr(type(fs), "_find" if isinstance(fs, AsyncFileSystem) else "find", None) not in generic:
        return fs
    return _StrictWalk(fs, listing_failed(pattern, root, glob_path))


def listing_failed(pattern: str, root: str, glob_path: str = "") -> Callable[[OSError], None]:
    """What a walk below ``root`` does with a folder it cannot list (see :func:`_strict`): raise InputError,
    unless the folder is gone, hidden (a ``.`` or ``_`` name) or out of reach of ``glob_path``."""

    def on_error(err: OSError) -> None:
        if isinstance(err, FileNotFoundError):
            return
        folder = str(err.filename) if getattr(err, "filename", None) else root
        below = folder[len(root) :] if folder.startswith(root) else ""
        parts = [part for part in below.split("/") if part]
        if any(part.startswith((".", "_")) for part in parts) or not may_hold_matches(glob_path, root, parts):
            return
        raise _unlisted(pattern, folder, err) from err

    return on_error


def _unlisted(pattern: str, folder: str, err: OSError) -> InputError:
    reason = bounded(err.strerror or f"{type(err).__name__}: {err}")
    return InputError(
        f"input {bounded(redact_url(pattern))!r}: folder {bounded(redact_url(folder))!r} cannot be listed"
        f" ({reason}); stopped before writing anything, lest its files count as deleted"
    )


def local_exists(pattern: str, path: str) -> bool:
    """Whether a local path exists, a broken symlink too. ``os.path.exists`` says False for a path in a folder
    that cannot be searched, and the input would "match no file": that folder is named instead."""
    try:
        os.lstat(path)
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP):  # no such path
            return False
        raise _unlisted(pattern, os.path.dirname(path), err) from err
    return True


def may_hold_matches(glob_path: str, root: str, parts: list[str]) -> bool:
    """Whether a folder (its ``parts`` below ``root``) may hold files that ``glob_path`` matches: each part
    matches the pattern's part at its depth, up to a ``**``. Every folder may, when there is no pattern."""
    wanted = [part for part in glob_path[len(root) :].split("/") if part] if glob_path else []
    for part, pattern in zip(parts, wanted, strict=False):  # a folder deeper than the pattern: under a match
        if "**" in pattern:
            return True
        if not re.match(glob_translate(pattern), part):
            return False
    return True


class _StrictWalk:
    """A filesystem whose ``find`` and ``glob`` (fsspec's generic ones) call ``on_error`` at every level."""

    def __init__(self, fs: fsspec.AbstractFileSystem, on_error: Callable[[OSError], None]) -> None:
        self._fs = fs
        self._on_error = on_error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def walk(self, path: str, maxdepth: int | None = None, topdown: bool = True, **kwargs: Any) -> Any:
        kwargs.pop("on_error", None)
        return fsspec.AbstractFileSystem.walk(self, path, maxdepth, topdown, self._on_error, **kwargs)

    find = fsspec.AbstractFileSystem.find
    glob = fsspec.AbstractFileSystem.glob


# What a listing says of a file's bytes: an object store's content hash, which alone names them (an upload of
# the same bytes keeps it), else what changes whenever they do: a local file's times, inode and mode (a
# rewrite, a replacement, a chmod), a store's generation or modification time.
_CONTENT_KEYS = ("ETag", "etag", "md5Hash", "content_md5")
_CHANGE_KEYS = ("mtime", "created", "ino", "mode", "generation", "LastModified", "last_modified")


def file_stamp(info: dict[str, Any], relative_path: str) -> str | None:
    """A file's identity as listed: its path below the glob root (its ids hang on it), its size and what the
    listing says of its bytes (``_CONTENT_KEYS``, else ``_CHANGE_KEYS``); None when it says nothing of them,
    or for what is not a plain file. Equal stamps are taken for equal bytes, as rsync and make take equal
    sizes and modification times."""
    size = _size(info)
    for keys in (_CONTENT_KEYS, _CHANGE_KEYS):
        found = {key: str(info[key]) for key in keys if info.get(key) not in (None, "")}
        if size is None or not found or (keys is _CHANGE_KEYS and _settling(info)):
            continue
        return json.dumps({"path": relative_path, "size": size, **found}, sort_keys=True, ensure_ascii=True)
    return None


_SETTLE_SECONDS = 3.0


def _settling(info: dict[str, Any]) -> bool:
    """Modified so recently that a write of the same size could still come in the same clock tick and leave
    the times as they are (git's "racily clean" files): such a file gets no stamp, so it is read next time."""
    modified = info.get("mtime", info.get("LastModified"))
    if isinstance(modified, datetime):
        modified = modified.timestamp()
    return not isinstance(modified, int | float) or time.time() - modified < _SETTLE_SECONDS


def _size(info: dict[str, Any]) -> int | None:
    """A listed file's size in bytes; None for what is not a plain file (or a listing without sizes)."""
    size = info.get("size")
    return size if info.get("type") == "file" and isinstance(size, int) else None


def glob_root(path: str) -> str:
    """The folder above the first path part with a wildcard: ids are relative to it."""
    parts = path.split("/")
    first_magic = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return "/".join(parts[:first_magic])


def _url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """Local files keep a plain path; others keep their protocol (``s3://bucket/key``)."""
    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)
