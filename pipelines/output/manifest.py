"""A written ``OUTPUT/_manifest.json``, read back: the one type every reader of it uses.

The report, ``--verify``, the run summary, incremental runs, the ownership of OUTPUT's files and the
launcher all read the manifest through :class:`Manifest`: one parse, one shape check and one format check,
so a manifest a newer zerda wrote is refused everywhere alike rather than misread. The commit writes it with
:meth:`Manifest.dumps`. Building one during a run is ``pipelines.output.build_manifest``'s (no Beam is imported here:
``zerda-report`` reads manifests without it).

Format 2 keeps ``_manifest.json`` small whatever the number of files: the per-file lists are Parquet tables
beside it. ``_manifest/files.pq`` lists every committed file (path, rows, bytes; the JSON records its own rows
and bytes under ``output.files_table``), and ``_manifest/inputs/part-*.pq``, files it lists, every input file
read. Format 1 held both lists in the JSON (``inputs``, ``output.files``); :attr:`Manifest.files` and
:attr:`Manifest.inputs` read either.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from pipelines.errors import ManifestError, NewerManifestError
from pipelines.output.layout import (
    BUCKET_WIDTHS,
    FILES_TABLE,
    IDS_DIR,
    INDEX_DIR,
    INPUTS_DIR,
    MANIFEST_FILE,
    PARTITION_COLUMN,
    REJECTS_DIR,
    is_bucket_width,
)
from pipelines.output.schema import FILES_SCHEMA, INPUTS_SCHEMA
from pipelines.redact import bounded
from pipelines.settings import OutputSettings

MANIFEST_FORMAT = 2  # raised when a key changes meaning, so that an older zerda refuses rather than misreads
FOOTER_THREADS = 16  # footer reads at once: on an object store each is a few round trips
_LISTS = 2  # the first format whose per-file lists are tables beside the JSON
_MAPPINGS = ("settings", "counts", "timings", "versions", "output")
_JSON_KINDS = {"list": "an array", "str": "a string", "bool": "a boolean", "NoneType": "null"}


class Manifest(Mapping[str, Any]):
    """A written ``_manifest.json``, checked: its JSON object (read as a mapping, keys as on disk) and typed
    accessors for what readers use. :meth:`loads` refuses a manifest that is not zerda's
    (:class:`ManifestError`) or of a newer format (:class:`NewerManifestError`); a manifest without
    ``format`` reads as format 1, the first. A part an older zerda did not write reads as empty or None.

    ``fs`` and ``root`` say where its output is: the tables of a format 2 manifest are read from there when
    :attr:`files` or :attr:`inputs` is first asked for (a table gone, resized or broken: :class:`ManifestError`)."""

    def __init__(
        self, data: Mapping[str, Any], fs: AbstractFileSystem | None = None, root: str = "", where: str = MANIFEST_FILE
    ) -> None:
        self._data = dict(data)
        self._fs, self._root, self._where = fs, root, where

    @classmethod
    def loads(
        cls, text: str | bytes, where: str = MANIFEST_FILE, fs: AbstractFileSystem | None = None, root: str = ""
    ) -> Manifest:
        """Parse and check a manifest's text; ``where`` names it in a refusal; ``fs`` and ``root``: its output."""
        try:
            data = json.loads(text)
        except ValueError as err:  # not JSON, not UTF-8: edited by hand, cut short, or another tool's file
            raise ManifestError(where, f"not zerda's JSON ({bounded(str(err))})") from err
        if not isinstance(data, dict):
            found = _JSON_KINDS.get(type(data).__name__, "a number")
            raise ManifestError(where, f"not zerda's: its JSON is {found}, not an object")
        _check_format(data.get("format", 1), where)
        _check_shape(data, where)
        return cls(data, fs, root, where)

    @classmethod
    def load(cls, fs: AbstractFileSystem, root: str) -> Manifest:
        """The manifest of the output at ``root``, named by its path in a refusal (an ``OSError`` from the
        storage is the caller's to word)."""
        path = posixpath.join(root, MANIFEST_FILE)
        with fs.open(path, "rb") as f:
            return cls.loads(f.read(), path, fs, root)

    @classmethod
    def load_url(cls, output: str) -> Manifest:
        """The manifest of the output at the URL ``output``."""
        fs, root = url_to_fs(output)
        return cls.load(fs, root.rstrip("/") or root)

    def dumps(self) -> str:
        """The text the commit writes: the keys as given, indented, non-ASCII kept."""
        return json.dumps(self._data, indent=2, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object as written (in format 2 without the per-file lists: see :meth:`with_lists`)."""
        return dict(self._data)

    def with_lists(self) -> dict[str, Any]:
        """The manifest as one object with its per-file lists, ``inputs`` and ``output.files``, as format 1 held
        them (read from its tables: the size of this grows with the number of files)."""
        return {**self._data, "inputs": self.inputs, "output": {**self._data.get("output", {}), "files": self.files}}

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Manifest({self._data!r})"

    @property
    def format(self) -> int:
        return int(self._data.get("format", 1))

    @property
    def fingerprint(self) -> str | None:
        return _text(self._data.get("fingerprint"))

    @property
    def settings(self) -> Mapping[str, Any]:
        return self._data.get("settings", {})

    @property
    def bucket_width(self) -> float:
        return float(self.settings.get("output", {}).get("bucket_width", OutputSettings().bucket_width))

    @property
    def counts(self) -> Mapping[str, Any]:
        return self._data.get("counts", {})

    @property
    def timings(self) -> Mapping[str, Any]:
        return self._data.get("timings", {})

    @property
    def started(self) -> str | None:
        return _text(self.timings.get("started"))

    @property
    def zerda_version(self) -> str | None:
        """The zerda that wrote the output: an incremental run reuses rows only from its own version."""
        return _text(self._data.get("versions", {}).get("zerda"))

    @property
    def root(self) -> str:
        return str(self._data.get("output", {}).get("root", ""))

    @functools.cached_property
    def inputs(self) -> list[Mapping[str, Any]]:
        """The input files read (source, bytes, records, error, stamp), by source. In format 1 the entries of the
        JSON that are objects (an entry edited into anything else is no input)."""
        if self.format < _LISTS:
            inputs = self._data.get("inputs")
            return [entry for entry in inputs if isinstance(entry, Mapping)] if isinstance(inputs, list) else []
        rows = [row for entry in self.input_parts for row in self._table(entry, INPUTS_SCHEMA).to_pylist()]
        return sorted(rows, key=lambda row: row["source"])

    @functools.cached_property
    def files(self) -> list[Mapping[str, Any]] | None:
        """The committed files' entries (path relative to OUTPUT, rows, bytes); None for an output of a zerda
        from before it listed them."""
        if self.format < _LISTS:
            return self._data.get("output", {}).get("files")
        table = self._table(self._data["output"]["files_table"], FILES_SCHEMA)
        listed: list[Mapping[str, Any]] = [
            {key: value for key, value in entry.items() if value is not None} for entry in table.to_pylist()
        ]
        if not all(_is_entry(entry) for entry in listed):
            raise ManifestError(self._where, f"not zerda's: {FILES_TABLE} lists a file outside the output")
        return listed

    def _table(self, entry: Mapping[str, Any], schema: pa.Schema) -> pa.Table:
        """One of the manifest's tables (:func:`read_manifest_table`)."""
        if self._fs is None:
            raise ManifestError(self._where, f"its table {entry['path']} is read only with its output")
        return read_manifest_table(self._fs, self._root, entry, schema, self._where)

    @property
    def input_parts(self) -> list[Mapping[str, Any]]:
        """The files-table entries of the inputs table's parts (format 2; none in format 1), for a reader that
        reads them one by one (:func:`read_manifest_table`), on workers, rather than all at once (:attr:`inputs`)."""
        if self.format < _LISTS:
            return []
        return [entry for entry in self.files or () if entry["path"].startswith(f"{INPUTS_DIR}/")]

    @property
    def changes(self) -> Mapping[str, Any] | None:
        return self._data.get("changes")


def _with_optional_columns(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with each nullable column of ``schema`` it lacks added as nulls: a table written before the
    column was recorded."""
    for name in schema.names:
        if name not in table.column_names and schema.field(name).nullable:
            table = table.append_column(schema.field(name), pa.nulls(table.num_rows, schema.field(name).type))
    return table


def read_by_slices(path: str) -> bool:
    """Whether a committed file (its path relative to OUTPUT) is read by slices, row groups skipped on their
    statistics: the index and the id counts. The manifest records their footers' digests."""
    return path.split("/", 1)[0] in (INDEX_DIR, IDS_DIR)


def footer_digest(f: BinaryIO) -> str:
    """The digest of an open Parquet file's footer (its metadata, their length and the magic bytes): the part of
    the file no page CRC covers. A byte changed there can keep the file readable while it changes its column
    statistics, which a read by slices trusts to skip row groups; the manifest records this digest of each
    committed file, and a read of one checks it first."""
    end = f.seek(0, io.SEEK_END)
    f.seek(max(0, end - 8))
    length = int.from_bytes(f.read(4), "little")
    f.seek(max(0, end - 8 - length))
    return _digest(f.read(length))


def written_footer_digest(metadata: Any) -> str:
    """:func:`footer_digest` of a Parquet file as its writer closed it, from the writer's footer
    (``pyarrow.parquet.FileMetaData``, whose serialized form is the file's footer): no read of the file."""
    serialized = metadata.__reduce__()[1][0]
    return _digest(serialized.to_pybytes() if hasattr(serialized, "to_pybytes") else bytes(serialized))


def _digest(footer: bytes) -> str:
    """The one hash of a footer, read back or as written: the two must agree, or every run would be a full run."""
    return hashlib.blake2b(footer + len(footer).to_bytes(4, "little") + b"PAR1", digest_size=16).hexdigest()


def write_files_table(fs: AbstractFileSystem, root: str, files: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Write ``_manifest/files.pq``, the committed files' entries (path, rows, bytes, footer) by path, with page
    checksums. Returns its own entry, which the manifest records as ``output.files_table``."""
    entries = sorted(files, key=lambda entry: entry["path"])
    table = pa.Table.from_pylist(entries, schema=FILES_SCHEMA)
    data = io.BytesIO()
    pq.write_table(table, data, compression="zstd", write_page_checksum=True)
    fs.pipe_file(posixpath.join(root, FILES_TABLE), data.getvalue())
    return {"path": FILES_TABLE, "rows": table.num_rows, "bytes": len(data.getvalue())}


def folder_rows(counts: Mapping[str, Any]) -> dict[str, int]:
    """The rows the manifest's ``counts`` say each dataset folder holds: each bucket's chunks, and the reject
    rows (a bounded flood's summary row stands for many rejects; an output from before the bound holds one row
    a reject). Folders of no rows are left out. The commit and ``--verify`` check the files against this."""
    expected = {f"{PARTITION_COLUMN}={bucket}": n for bucket, n in counts.get("chunks_by_bucket", {}).items() if n}
    reject_rows = counts.get("reject_rows", sum(counts.get("rejects", {}).values()))
    if reject_rows:
        expected[REJECTS_DIR] = reject_rows
    return expected


def _text(value: object) -> str | None:
    """A string part of the manifest; anything else (edited by hand) reads as missing."""
    return value if isinstance(value, str) else None


def _check_format(version: object, where: str) -> None:
    if type(version) is not int or version < 1:
        raise ManifestError(where, f"not zerda's: format {bounded(repr(version))} is not a format number")
    if version > MANIFEST_FORMAT:
        raise NewerManifestError(
            f"{where} was written by a newer zerda (format {version}; this zerda reads {MANIFEST_FORMAT}):"
            " read it with that zerda or a newer one"
        )


def _check_shape(data: Mapping[str, Any], where: str) -> None:
    """The parts readers rely on have the types they read them as (a missing part is allowed: older outputs)."""
    for key in _MAPPINGS:
        if not isinstance(data.get(key, {}), dict):
            raise ManifestError(where, f"not zerda's: {key!r} is not an object")
    if not isinstance(data.get("settings", {}).get("output", {}), dict):
        raise ManifestError(where, "not zerda's: 'settings.output' is not an object")
    width = data.get("settings", {}).get("output", {}).get("bucket_width", OutputSettings().bucket_width)
    if not is_bucket_width(width):
        raise ManifestError(where, f"not zerda's: bucket_width {bounded(repr(width))} is not {BUCKET_WIDTHS}")
    seconds = data.get("timings", {}).get("seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
        raise ManifestError(where, "not zerda's: timings.seconds is not a number")
    files = data.get("output", {}).get("files")
    if files is not None and (not isinstance(files, list) or not all(_is_entry(entry) for entry in files)):
        raise ManifestError(where, "not zerda's: output.files is not a list of files in the output")
    table = data.get("output", {}).get("files_table")
    if data.get("format", 1) >= _LISTS and not (_is_entry(table) and _counts(table, ("rows", "bytes"))):
        raise ManifestError(where, "not zerda's: output.files_table is not the table of its files")
    changes = data.get("changes")
    if changes is not None and not isinstance(changes, dict):
        raise ManifestError(where, "not zerda's: 'changes' is not an object")


def _counts(entry: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    return all(isinstance(entry.get(key), int) and not isinstance(entry.get(key), bool) for key in keys)


def _is_entry(entry: object) -> bool:
    """A file entry of the manifest: a relative path inside the output, no ``..``, with an integer size."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return False
    path, size = entry["path"], entry.get("bytes")
    inside = path == posixpath.normpath(path) and not path.startswith(("/", "..")) and "://" not in path
    return inside and (size is None or (isinstance(size, int) and not isinstance(size, bool)))


def read_manifest_table(
    fs: AbstractFileSystem, root: str, entry: Mapping[str, Any], schema: pa.Schema, where: str = MANIFEST_FILE
) -> pa.Table:
    """One of the tables of the manifest at ``where`` (its output at ``root``), checked against its files-table
    ``entry`` (size and rows) and its page checksums: a :class:`ManifestError` when it is not the one committed."""
    path = entry["path"]
    full = posixpath.join(root, path)
    fs.invalidate_cache(posixpath.dirname(full))  # a listing cached before a commit rewrote the tables
    try:  # any other OSError is the storage's, for the caller to word
        data = fs.cat_file(full)
    except FileNotFoundError as err:
        raise ManifestError(where, f"its table {path} is gone") from err
    if len(data) != entry["bytes"]:
        raise ManifestError(where, f"its table {path} is of another size than committed")
    try:  # read from memory: an OSError here is pyarrow's decoding error. On the calling thread: Arrow's pool
        # threads of a small read left running into interpreter exit abort the process (apache/arrow#50482)
        table = pq.read_table(pa.BufferReader(data), page_checksum_verification=True, use_threads=False)
        table = _with_optional_columns(table, schema).select(schema.names).cast(schema)
    except (OSError, pa.ArrowException, KeyError) as err:  # a column gone, a page that fails its checksum
        raise ManifestError(where, f"its table {path} is unreadable ({bounded(str(err))})") from err
    if table.num_rows != entry["rows"]:
        raise ManifestError(where, f"its table {path} holds {table.num_rows} rows, not {entry['rows']}")
    return table
