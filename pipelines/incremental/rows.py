"""This run's index rows on their way to the comparison: staged as Parquet part files, one per index partition and
bundle of the step that writes the chunk files, so that the shuffle to the comparison (``ByPartition``) carries
each file's path, never the rows: a runner holds a shuffle's data (the DirectRunner in memory, encoded and decoded
in several copies), and the rows grow with the documents chunked.

The files lie in the run's staging (``_staging/<run_id>/index_rows/<partition>/part-<uuid>.pq``) and go with
it at the commit. A retried bundle writes new files under new names and the runner drops the failed attempt's
outputs, so the comparison reads only the files of attempts that succeeded; the others are deleted with the
staging, unread.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.transforms.window import GlobalWindows
from fsspec.core import url_to_fs

import zerda_core
from pipelines.chunking import summarise
from pipelines.incremental.index import partition_of
from pipelines.output.layout import INDEX_ROWS_DIR, PARTITION_COLUMN, REJECT_SUFFIX, STAGING_DIR
from pipelines.output.schema import INDEX_SCHEMA
from pipelines.output.write import _staging_writes, begin_file

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
_GROUP_ROWS = 2048  # a partition's buffered rows written out as one row group
_BUFFERED_ROWS = 4096  # rows a bundle holds in all: past this, its largest buffer is written out


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
    written a row group at a time into its file, open until the bundle ends.
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

    def process(self, element: tuple[int, tuple[Any, ...]]) -> None:
        partition, values = element
        part = self._open.get(partition)
        if part is None:
            part = self._open[partition] = _Part(self._new_path(partition))
        part.rows.append(values)
        self._buffered += 1
        if len(part.rows) >= _GROUP_ROWS:
            self._flush(part)
        elif self._buffered >= _BUFFERED_ROWS:
            self._flush(max(self._open.values(), key=lambda held: len(held.rows)))

    def finish_bundle(self) -> Iterator[Any]:
        for partition, part in sorted(self._open.items()):
            if part.rows:
                self._flush(part)
            with _staging_writes(self._output):
                part.close()
            yield GlobalWindows.windowed_value_at_end_of_window((partition, part.relative))
        self._open = {}

    def teardown(self) -> None:
        for part in getattr(self, "_open", {}).values():  # a failed bundle: its files are never read
            with contextlib.suppress(Exception):
                part.close()

    def _new_path(self, partition: int) -> str:
        return f"{STAGING_DIR}/{self._run_id}/{INDEX_ROWS_DIR}/{partition:05d}/part-{uuid.uuid4().hex}{REJECT_SUFFIX}"

    def _flush(self, part: _Part) -> None:
        """Write ``part``'s buffered rows as one row group; its file is opened on the first one."""
        columns = zip(*part.rows, strict=True)
        arrays = [pa.array(column, field.type) for column, field in zip(columns, _STAGED_SCHEMA, strict=True)]
        table = pa.table(arrays, schema=_STAGED_SCHEMA)
        self._buffered -= len(part.rows)
        part.rows = []
        with _staging_writes(self._output):
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
