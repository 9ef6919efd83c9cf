"""What grows with the documents of a run and would cross a shuffle, staged in Parquet part files instead, so that
the shuffle carries the files' paths: a runner holds a shuffle's data (the DirectRunner in memory, encoded and
decoded in several copies).

- This run's index rows on their way to the comparison (``ByPartition``): one file per index partition and bundle of
  the step that writes the chunk files (``_staging/<run_id>/index_rows/<partition>/part-<uuid>.pq``).
- The previous rows a comparison takes out of their chunk files (changed and removed documents), on their way to
  the carry of those files: one file per comparing task, sorted by chunk file
  (``_staging/<run_id>/leaving/<partition>/part-<uuid>.pq``); the carry of a chunk file is sent the paths of the
  files that name it, and reads only its rows (by the row groups' statistics).

The files lie in the run's staging and go with it at the commit. A retried bundle or task writes new files under
new names and the runner drops the failed attempt's outputs, so only the files of attempts that succeeded are
read; the others are deleted with the staging, unread.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.transforms.window import GlobalWindows
from fsspec.core import url_to_fs

import zerda_core
from pipelines.chunking import summarise
from pipelines.incremental.index import partition_of
from pipelines.output.layout import INDEX_ROWS_DIR, LEAVING_DIR, PARTITION_COLUMN, REJECT_SUFFIX, STAGING_DIR
from pipelines.output.schema import INDEX_SCHEMA
from pipelines.output.write import begin_file, staging_writes

# What a chunked document's index row is staged as: the values of these columns of the index, in this order. No
# value every row of the run shares (the settings fingerprint, zerda's version), nor the hash of the text, added
# where the hashes meet: the comparison adds them (:func:`read_rows`).
_STAGED_COLUMNS = (
    "source",
    "record",
    "doc_id",
    "chunk_count",
    PARTITION_COLUMN,
    "chars",
    "text_chars",
    "overlap_chars",
    "chunk_ids",
    "chunk_file",
)
_STAGED_SCHEMA = pa.schema([INDEX_SCHEMA.field(name) for name in _STAGED_COLUMNS])
_LEAVING_SCHEMA = pa.schema(
    [
        pa.field("chunk_file", pa.string(), nullable=False),
        pa.field("document", pa.string(), nullable=False),  # its key: pipelines.incremental.index.document_key
        pa.field("rows", pa.int64(), nullable=False),
    ]
)
_LEAVING_GROUP = 1024  # rows of a row group of a leaving file: a carry task reads the groups naming its chunk file
_GROUP_ROWS = 2048  # a partition's buffered rows written out as one row group
_BUFFERED_ROWS = 4096  # rows a bundle holds in all: past this, its largest buffer is written out
_OPEN_FILES = 32  # files a bundle writes at once (an object store's writer buffers a block each): then the one
# written least recently is closed (documents come by source, and a source's are in one partition)


def index_row(rows: list[dict[str, Any]], chunk_file: str, partitions: int) -> tuple[int, tuple[Any, ...]]:
    """A chunked document's index row from its chunk rows and the file holding them: (its index partition, the
    values of ``_STAGED_COLUMNS``)."""
    first = rows[0]
    _, totals = summarise(rows)
    bucket = first[PARTITION_COLUMN]
    chunks, chars, text_chars, overlap = totals[bucket]
    chunk_ids = [row["chunk_id"] for row in sorted(rows, key=lambda row: row["chunk_index"])]
    values = (first["source"], first["record"], first["doc_id"], chunks, bucket, chars, text_chars, overlap)
    return partition_of(first["source"], partitions), (*values, chunk_ids, chunk_file)


class _Part:
    """A partition's staged file being written: rows wait in ``rows`` until a row group is written."""

    def __init__(self, relative: str) -> None:
        self.relative = relative
        self.rows: list[tuple[Any, ...]] = []
        self.writer: pq.ParquetWriter | None = None
        self.handle: Any = None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.handle is not None:
            self.handle.close()


class StageIndexRows(beam.DoFn):
    """(index partition, row values: :func:`index_row`) -> (partition, its staged file's path relative to OUTPUT),
    one per partition a bundle has rows of, at the bundle's end.

    Fused with the step that writes the chunk files (it takes that step's output directly), so a row never crosses
    a shuffle. A bundle holds at most about ``_BUFFERED_ROWS`` rows, whatever its size: a partition's rows are
    written a row group at a time into its file, open until the bundle ends, or until ``_OPEN_FILES`` others were
    written to since (then the partition's next rows go to a new file).
    """

    def __init__(self, output: str, run_id: str, compression: str) -> None:
        self._output = output
        self._run_id = run_id
        self._compression = compression

    def setup(self) -> None:
        fs, root = url_to_fs(self._output)
        self._fs, self._root = fs, posixpath.normpath(root)

    def start_bundle(self) -> None:
        self._open: dict[int, _Part] = {}
        self._buffered = 0

    def process(self, element: tuple[int, tuple[Any, ...]]) -> Iterator[tuple[int, str]]:
        partition, values = element
        part = self._open.pop(partition, None)
        if part is None:
            if len(self._open) >= _OPEN_FILES:
                yield self._close(next(iter(self._open)))
            part = _Part(self._new_path(partition))
        self._open[partition] = part  # the last written to
        part.rows.append(values)
        self._buffered += 1
        if len(part.rows) >= _GROUP_ROWS:
            self._flush(part)
        elif self._buffered >= _BUFFERED_ROWS:
            self._flush(max(self._open.values(), key=lambda held: len(held.rows)))

    def finish_bundle(self) -> Iterator[Any]:
        for partition in sorted(self._open):
            yield GlobalWindows.windowed_value_at_end_of_window(self._close(partition))

    def _close(self, partition: int) -> tuple[int, str]:
        part = self._open.pop(partition)
        if part.rows:
            self._flush(part)
        with staging_writes(self._output):
            part.close()
        return partition, part.relative

    def teardown(self) -> None:
        for part in getattr(self, "_open", {}).values():  # a failed bundle: its files are never read
            with contextlib.suppress(Exception):
                part.close()

    def _new_path(self, partition: int) -> str:
        return _staged_path(self._run_id, INDEX_ROWS_DIR, partition)

    def _flush(self, part: _Part) -> None:
        """Write ``part``'s buffered rows as one row group; its file is opened on the first one."""
        columns = zip(*part.rows, strict=True)
        arrays = [pa.array(column, field.type) for column, field in zip(columns, _STAGED_SCHEMA, strict=True)]
        table = pa.table(arrays, schema=_STAGED_SCHEMA)
        self._buffered -= len(part.rows)
        part.rows = []
        with staging_writes(self._output):
            if part.writer is None:
                begin_file(self._run_id)
                path = f"{self._root}/{part.relative}"
                self._fs.makedirs(posixpath.dirname(path), exist_ok=True)
                part.handle = self._fs.open(path, "wb")
                part.writer = pq.ParquetWriter(part.handle, _STAGED_SCHEMA, compression=self._compression)
            part.writer.write_table(table)


def read_rows(output: str, paths: list[str], fingerprint: str) -> Iterator[dict[str, Any]]:
    """The index rows staged in ``paths`` (relative to ``output``), whole but for the hash of the text (added where
    the hashes meet), a row group at a time."""
    fs, root = url_to_fs(output)
    root = posixpath.normpath(root)
    shared = {"content_hash": "", "config_fingerprint": fingerprint, "zerda_version": zerda_core.__version__}
    for path in sorted(paths):
        with fs.open(f"{root}/{path}", "rb") as f:
            for batch in pq.ParquetFile(f).iter_batches():
                for row in batch.to_pylist():
                    yield {**row, **shared}


def stage_leaving(
    output: str, run_id: str, partition: int, leaving: Iterable[tuple[str, str, int]], compression: str
) -> Iterator[tuple[str, str]]:
    """The previous rows a partition's comparison takes out of their chunk files, ``(chunk file, document key,
    rows)`` each, staged as one file sorted by chunk file -> ``(chunk file, the staged file's path)`` for each chunk
    file it names: what the carry of that chunk file is sent (:func:`read_leaving`)."""
    rows = sorted(leaving)
    if not rows:
        return
    table = pa.table([list(column) for column in zip(*rows, strict=True)], schema=_LEAVING_SCHEMA)
    fs, root = url_to_fs(output)
    relative = _staged_path(run_id, LEAVING_DIR, partition)
    path = f"{posixpath.normpath(root)}/{relative}"
    with staging_writes(output):
        begin_file(run_id)
        fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with fs.open(path, "wb") as f:
            pq.write_table(table, f, row_group_size=_LEAVING_GROUP, compression=compression)
    for chunk_file in sorted(set(table.column("chunk_file").to_pylist())):
        yield chunk_file, relative


def read_leaving(output: str, paths: Iterable[str], chunk_file: str) -> list[tuple[str, int]]:
    """The documents leaving ``chunk_file``, ``(document key, rows)`` each, from the files :func:`stage_leaving`
    wrote at ``paths`` (relative to ``output``): only the row groups whose statistics may hold ``chunk_file``."""
    fs, root = url_to_fs(output)
    root = posixpath.normpath(root)
    leaving: list[tuple[str, int]] = []
    for path in sorted(paths):
        with fs.open(f"{root}/{path}", "rb") as f:
            parquet = pq.ParquetFile(f)
            for group in range(parquet.num_row_groups):
                stats = parquet.metadata.row_group(group).column(0).statistics
                if stats is not None and stats.has_min_max and not stats.min <= chunk_file <= stats.max:
                    continue
                table = parquet.read_row_group(group)
                table = table.filter(pc.equal(table.column("chunk_file"), chunk_file))
                leaving.extend(zip(table.column("document").to_pylist(), table.column("rows").to_pylist(), strict=True))
    return leaving


def _staged_path(run_id: str, folder: str, partition: int) -> str:
    """A new file's path relative to OUTPUT, in the run's staging: ``_staging/<run_id>/<folder>/<partition>/...``."""
    return f"{STAGING_DIR}/{run_id}/{folder}/{partition:05d}/part-{uuid.uuid4().hex}{REJECT_SUFFIX}"
