"""The previous rows that stay: unchanged files' totals and rejects; chunk files rewritten without the rows
that leave them, or kept untouched."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.pvalue import TaggedOutput
from fsspec.core import url_to_fs

from pipelines.errors import PreviousUnreadable
from pipelines.incremental.index import _COUNTED_COLUMNS, document_keys
from pipelines.incremental.previous import (
    UNREADABLE,
    UNREADABLE_INDEX,
    FooterChanged,
    Previous,
    _read_table,
    _why,
    read_index,
)
from pipelines.incremental.rows import read_leaving
from pipelines.incremental.tags import _TOTALS
from pipelines.names import REJECTS
from pipelines.output.layout import (
    CHUNK_SUFFIX,
    PARTITION_COLUMN,
)
from pipelines.output.manifest import footer_digest
from pipelines.output.ownership import STAGED_KEY
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

    def process(self, reports: Iterable[FileReport]) -> Iterator[Any]:
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


def _encoded_batch(batch: tuple[FileReport, ...]) -> list[list[Any]]:
    """A batch as JSON lists of the reports' fields (not ``asdict``, which copies each value deeply)."""
    return [[r.source, r.bytes_read, r.records, r.error, r.stamp] for r in batch]


def _decoded_batch(reports: list[list[Any]]) -> tuple[FileReport, ...]:
    return tuple(FileReport(*report) for report in reports)


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


class _CarryChunkFile(beam.DoFn):
    """(a previous chunk file's path, ``{"file": [(path, rows, footer digest)], "leaving": [staged file]}``: the
    staged files naming the documents that leave it, :func:`~pipelines.incremental.rows.read_leaving`) -> the file
    kept where it is when no document leaves it (only its footer is read); else written again without the rows of
    the documents leaving it, staged to replace it under its own name, so the index rows pointing at
    it stay right (nothing when no row is left). Only the files that hold a changed or removed document are read.

    Either way the file's footer must be the one the previous run committed (its digest is in the manifest's
    table of files): a file put in its place, of the same size and rows (another run's, a restore), is the
    previous output changed by hand, and the launcher runs again in full (:func:`unreadable_carry`)."""

    def __init__(self, root: str, output: str, run_id: str, compression: str) -> None:
        self._root = root
        self._output = output
        self._run_id = run_id
        self._compression = compression

    def process(self, element: tuple[str, Mapping[str, Iterable[Any]]]) -> Iterator[StagedFile]:
        path, grouped = element
        naming, files = list(grouped["leaving"]), list(grouped["file"])
        if not files:  # the index names a chunk file the manifest does not list: it is not this output's index
            raise PreviousUnreadable(f"{UNREADABLE_INDEX}: it names chunk file {path}, not in the manifest")
        ((_, rows, footer),) = files
        url = f"{self._root}/{path}"
        if not naming:
            written_as = _kept_footer(url, path, footer)
            yield StagedFile(posixpath.dirname(path), path, rows, written_as=written_as, kept=True, footer=footer)
            return
        table = rows_staying(url, path, read_leaving(self._output, naming, path), CHUNK_SCHEMA, footer)
        if table.num_rows:
            staged = stage_table(
                self._output, self._run_id, posixpath.dirname(path), table, CHUNK_SUFFIX, self._compression
            )
            yield replace(staged, final=path)


def _kept_footer(url: str, path: str, footer: str) -> str:
    """The staged path the footer of a previous chunk file kept untouched names, after checking the footer is the
    one committed (``footer``, its digest; "" for an output from before it was recorded)."""
    try:
        source_fs, source = url_to_fs(url)
        with source_fs.open(source, "rb") as f:
            if footer and footer_digest(f) != footer:
                raise FooterChanged("its footer is not the one committed: another file put in its place")
            f.seek(0)
            metadata = pq.read_metadata(f).metadata or {}
    except (OSError, pa.ArrowException, FooterChanged) as err:
        raise PreviousUnreadable(f"{UNREADABLE}: {path} ({_why(err)})") from err
    return metadata.get(STAGED_KEY, b"").decode() or path


def rows_staying(
    url: str, path: str, leaving: Iterable[tuple[str, int]], schema: pa.Schema, footer: str = ""
) -> pa.Table:
    """The rows of the previous chunk file at ``url`` (``path`` in the output) but those of the documents
    ``leaving`` it, ``(document key, rows)`` each, as ``schema``. A file that cannot be read, whose footer is not
    ``footer`` (its digest, when recorded), or that does not hold the rows the index says it does (changed by
    hand) fails the run for the launcher to run again in full (:func:`unreadable_carry`)."""
    dropped = dict(leaving)
    try:
        table = _read_table(url, footer=footer)
        stay = pc.invert(pc.is_in(document_keys(table), value_set=pa.array(list(dropped))))
        table = table.select(schema.names).cast(schema).filter(stay)
    except (OSError, pa.ArrowException, FooterChanged) as err:  # pyarrow's decoding errors are OSErrors too
        raise PreviousUnreadable(f"{UNREADABLE}: {path} ({_why(err)})") from err
    gone = len(stay) - table.num_rows
    if gone != sum(dropped.values()):
        raise PreviousUnreadable(
            f"{UNREADABLE}: {path} (it holds {gone} rows of changed or removed documents, the index says"
            f" {sum(dropped.values())}: changed since its run)"
        )
    return table
