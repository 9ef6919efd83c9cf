"""The previous rows that stay: unchanged files' totals and rejects; chunk files rewritten without the rows
that leave them, or kept untouched."""

from __future__ import annotations

import posixpath
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import asdict, replace
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.pvalue import TaggedOutput
from fsspec.core import url_to_fs

from pipelines.incremental.index import _COUNTED_COLUMNS, document_keys
from pipelines.incremental.previous import UNREADABLE, Previous, _read_table, _why, read_index
from pipelines.incremental.tags import _TOTALS
from pipelines.names import REJECTS
from pipelines.output.layout import (
    CHUNK_SUFFIX,
    PARTITION_COLUMN,
)
from pipelines.output.ownership import staged_as
from pipelines.output.schema import CHUNK_SCHEMA, REJECT_SCHEMA
from pipelines.output.write import (
    StagedFile,
    stage_table,
)
from pipelines.records import FileReport, Reject


class _CarryFiles(beam.DoFn):
    """A batch of previous reports of input files unchanged since (not read) -> those reports, their previous
    rejects, and each file's totals for the manifest, ``(documents, {bucket: [chunks, characters, text,
    overlap]})``, summed from its index slice: one element a file, not one a document. Nothing of a file that
    did not change can change. Their index rows are carried by the comparison (:class:`_ComparePartition`),
    which counts them unchanged; their ids are counted in the previous id counts (:class:`_CountIds`).

    Each worker holds the previous rejects, loaded on the first batch, and a batch's index rows.
    """

    def __init__(self, previous: Previous) -> None:
        self._previous = previous

    def setup(self) -> None:
        self._rejects: dict[str, list[Reject]] | None = None

    def _load(self) -> dict[str, list[Reject]]:
        rejects: dict[str, list[Reject]] = {}
        for url in self._previous.reject_files:
            for reject in _read_table(url, REJECT_SCHEMA.names).to_pylist():
                rejects.setdefault(reject["source"], []).append(Reject(**reject))
        return rejects

    def process(self, reports: Sequence[FileReport]) -> Iterator[Any]:
        if self._rejects is None:
            self._rejects = self._load()
        columns = ["source", PARTITION_COLUMN, *_COUNTED_COLUMNS]
        index = read_index(self._previous, [r.source for r in reports], columns).sort_by("source")
        slices, start = {}, 0
        for run in pc.value_counts(index.column("source")).to_pylist():  # in order of first appearance: sorted
            slices[run["values"]] = (start, run["counts"])
            start += run["counts"]
        for report in reports:
            rows = index.slice(*slices.get(report.source, (0, 0)))
            if rows.num_rows:
                yield TaggedOutput(_TOTALS, (rows.num_rows, _bucket_totals(rows)))
            rejects = self._rejects.get(report.source, [])
            for reject in rejects:
                yield TaggedOutput(REJECTS, reject)
            yield replace(report, records=rows.num_rows + len(rejects))  # each record a document or a reject


def _bucket_totals(rows: pa.Table) -> dict[int, list[int]]:
    """Index rows summed by bucket, as the manifest adds documents: ``{bucket: [chunks, characters, text,
    overlap]}``."""
    sums = rows.group_by(PARTITION_COLUMN).aggregate([(name, "sum") for name in _COUNTED_COLUMNS])
    columns = [sums.column(f"{name}_sum").to_pylist() for name in _COUNTED_COLUMNS]
    buckets = sums.column(PARTITION_COLUMN).to_pylist()
    return {bucket: list(numbers) for bucket, *numbers in zip(buckets, *columns, strict=True)}


def _encoded_batch(batch: tuple[FileReport, ...]) -> list[dict[str, Any]]:
    return [asdict(report) for report in batch]


def _decoded_batch(reports: list[dict[str, Any]]) -> tuple[FileReport, ...]:
    return tuple(FileReport(**report) for report in reports)


def _batches(reports: Sequence[FileReport], max_rows: int) -> list[tuple[FileReport, ...]]:
    """The reports in batches of at most ``max_rows`` records (or one file): a batch's index rows are read at once."""
    batches: list[tuple[FileReport, ...]] = []
    batch: list[FileReport] = []
    rows = 0
    for report in reports:
        if batch and rows + report.records > max_rows:
            batches.append(tuple(batch))
            batch, rows = [], 0
        batch.append(report)
        rows += report.records
    return [*batches, tuple(batch)] if batch else batches


class _CarryRows(beam.DoFn):
    """(previous chunk file, the documents whose rows leave it) -> the file without those rows, staged to replace
    it under its own name, so the index rows pointing at it stay right; nothing when no row is left. Only the
    files that hold a changed or removed document are read: the others stay as they are (:class:`_KeepUntouched`)."""

    def __init__(self, root: str, output: str, run_id: str, compression: str) -> None:
        self._root = root
        self._output = output
        self._run_id = run_id
        self._compression = compression

    def process(self, element: tuple[str, Iterable[tuple[str, int]]]) -> Iterator[StagedFile]:
        path, leaving = element
        table = rows_staying(f"{self._root}/{path}", path, leaving, CHUNK_SCHEMA)
        if table.num_rows:
            directory = posixpath.dirname(path)
            staged = stage_table(self._output, self._run_id, directory, table, CHUNK_SUFFIX, self._compression)
            yield replace(staged, final=path)


def rows_staying(url: str, path: str, leaving: Iterable[tuple[str, int]], schema: pa.Schema) -> pa.Table:
    """The rows of the previous chunk file at ``url`` (``path`` in the output) but those of the documents
    ``leaving`` it, ``(document key, rows)`` each, as ``schema``. A file that cannot be read fails the run for
    the launcher to run again in full (:func:`unreadable_carry`); one that does not hold the rows the index
    says it does fails it outright."""
    dropped = dict(leaving)
    try:
        table = _read_table(url)
        stay = pc.invert(pc.is_in(document_keys(table), value_set=pa.array(list(dropped))))
        table = table.select(schema.names).cast(schema).filter(stay)
    except (OSError, pa.ArrowException) as err:  # pyarrow's decoding errors are OSErrors too
        raise RuntimeError(f"{UNREADABLE}: {path} ({_why(err)})") from err
    gone = len(stay) - table.num_rows
    if gone != sum(dropped.values()):
        raise RuntimeError(
            f"previous output changed under the run: {gone} rows of changed or removed documents in {path},"
            f" the index says {sum(dropped.values())}"
        )
    return table


class _KeepUntouched(beam.DoFn):
    """(path, rows) of a previous chunk file -> the file kept where it is, unless a changed or removed document
    has rows in it (``touched``: :class:`_CarryRows` replaces it). Nothing is read but its footer."""

    def __init__(self, root: str) -> None:
        self._root = root

    def process(self, entry: tuple[str, int], touched: Container[str]) -> Iterator[StagedFile]:
        path, rows = entry
        if path not in touched:
            source_fs, source = url_to_fs(f"{self._root}/{path}")
            written_as = staged_as(source_fs, source)  # the path the previous run staged it as, in its footer
            yield StagedFile(posixpath.dirname(path), path, rows, written_as=written_as or path, kept=True)
