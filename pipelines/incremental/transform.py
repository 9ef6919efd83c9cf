"""ChunkIncrementally: the incremental steps wired around ChunkDocuments."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import NamedTuple

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations

from pipelines.chunking import ChunkDocuments
from pipelines.incremental.carry import (
    _batches,
    _CarryChunkFile,
    _CarryFiles,
)
from pipelines.incremental.classify import _Classify
from pipelines.incremental.compare import _add_changes, _ComparePartition, _CountIds
from pipelines.incremental.index import partition_of
from pipelines.incremental.previous import Previous
from pipelines.incremental.rows import StageIndexRows, index_row
from pipelines.incremental.tags import _CHANGES, _DROPPED, _DUPLICATES, _FACTS, _HASH, _IDS, _TO_CHUNK, _TOTALS
from pipelines.input.listing import Listed, listing_folder
from pipelines.names import REJECTS
from pipelines.output.layout import (
    CHANGES_DIR,
)
from pipelines.output.schema import CHANGES_SCHEMA
from pipelines.output.write import (
    DOCUMENTS,
    Describe,
    EmptyFileIfNone,
    WriteDescribedChunks,
    WriteRows,
    absolute_url,
)
from pipelines.records import FileReport
from pipelines.settings import OutputSettings


class IncrementalChunks(NamedTuple):
    """What :class:`ChunkIncrementally` gives the job."""

    chunk_files: beam.PCollection  # StagedFiles: of the chunked documents, the rewritten and the kept previous files
    rejects: beam.PCollection  # of the chunked documents and of the files not read
    reports: beam.PCollection | None  # FileReports of the files not read (unchanged), from the previous manifest
    summaries: beam.PCollection  # of every document chunked
    totals: beam.PCollection  # (documents, bucket totals): of a bundle's unchanged documents, of each file not read
    duplicates: beam.PCollection  # (duplicated ids, examples) of each id partition that has some
    index_files: beam.PCollection  # StagedFiles of the index: one a partition that holds documents
    id_files: beam.PCollection  # StagedFiles of the id counts: one an id partition that holds documents
    change_files: beam.PCollection
    facts: beam.PCollection  # one Counter of the change counts, for :meth:`ChunkIncrementally.annotate`


class ChunkIncrementally(beam.PTransform):
    """SourceRecords -> :class:`IncrementalChunks`: ``ChunkDocuments`` on what changed, written; the rest kept."""

    def __init__(
        self,
        chunk_documents: ChunkDocuments,
        previous: Previous,
        unchanged: beam.PCollection | None = None,
        *,
        output: str,
        run_id: str,
        settings: OutputSettings,
        fingerprint: str,
        partitions: int = 1,
    ) -> None:
        super().__init__()
        self._partitions = partitions
        self._chunk_documents = chunk_documents
        self._previous = previous
        self._unchanged = unchanged  # FileReports of the files not read, judged on the workers
        self._output = output
        self._run_id = run_id
        self._settings = settings
        self._fingerprint = fingerprint

    @no_annotations
    def expand(self, records: beam.PCollection) -> IncrementalChunks:
        output = absolute_url(self._output)
        compression, max_rows = self._settings.compression, self._settings.max_rows_per_file
        partitions = self._partitions
        previous = replace(self._previous, inputs={}, chunk_files=())  # what the workers need of it: no file list
        split = records | "Classify" >> beam.ParDo(_Classify(previous, partitions)).with_outputs(
            _TOTALS, _HASH, main=_TO_CHUNK
        )
        chunked = split[_TO_CHUNK] | "ChunkDocuments" >> self._chunk_documents
        describe = functools.partial(index_row, partitions=partitions)
        written = chunked.chunks | "WriteChunks" >> self._write_chunks(describe)
        staged_rows = written[DOCUMENTS] | "StageIndexRows" >> beam.ParDo(
            StageIndexRows(output, self._run_id, compression)
        )  # fused with the writer: the rows cross no shuffle, only their files' paths do
        rejects, reports, totals = chunked.rejects, None, split[_TOTALS]
        unchanged = self._unchanged
        if unchanged is not None:  # files not read: their totals and rejects join those of the records read
            files = (
                unchanged
                | "UnchangedByPartition" >> beam.Map(lambda r: (partition_of(r.source, partitions), r))
                | "UnchangedGroups" >> beam.GroupByKey()
                | "UnchangedBatches" >> beam.FlatMap(lambda kv: _batches(sorted(kv[1], key=_by_source), max_rows))
                | "SpreadUnchanged" >> beam.Reshuffle()
                | "CarryFiles" >> beam.ParDo(_CarryFiles(previous)).with_outputs(_TOTALS, REJECTS, main="reports")
            )
            totals = (totals, files[_TOTALS]) | "AllTotals" >> beam.Flatten()
            rejects = (rejects, files[REJECTS]) | "AllCarriedRejects" >> beam.Flatten()
            reports = files.reports
        if unchanged is None:
            unread = records.pipeline | "UnreadSources" >> beam.Create([])
        else:
            unread = unchanged | "UnreadSources" >> beam.Map(lambda r: (partition_of(r.source, partitions), r.source))
        every_partition = records.pipeline | "IndexPartitions" >> beam.Create([(n, None) for n in range(partitions)])
        compared = (
            {
                "partition": every_partition,
                "unread": unread,
                "hash": split[_HASH],
                "rows": staged_rows,
            }
            | "ByPartition" >> beam.CoGroupByKey()
            | "Compare"
            >> beam.ParDo(
                _ComparePartition(previous, partitions, output, self._run_id, compression, self._fingerprint)
            ).with_outputs(_CHANGES, _FACTS, _DROPPED, _IDS, main="index")
        )
        counted = (
            {"partition": every_partition, "change": compared[_IDS]}
            | "ById" >> beam.CoGroupByKey()
            | "CountIds"
            >> beam.ParDo(_CountIds(previous, partitions, output, self._run_id, compression)).with_outputs(
                _DUPLICATES, main="files"
            )
        )
        chunk_files = written.files
        if previous.carry:
            chunk_files = self._carry(compared[_DROPPED], written.files, output)
        facts = compared[_FACTS] | "CountChanges" >> beam.CombineGlobally(_sum_counters)
        run_id, folder = self._run_id, self._changes_folder()
        change_files = (  # an empty _changes file when nothing changed: read_parquet('OUTPUT/_changes/*.pq') works
            compared[_CHANGES]
            | "WriteChanges" >> WriteRows(output, run_id, CHANGES_SCHEMA, CHANGES_DIR, compression, max_rows, folder)
            | "NoChanges" >> EmptyFileIfNone(output, run_id, CHANGES_SCHEMA, CHANGES_DIR, compression, folder)
        )
        return IncrementalChunks(
            chunk_files,
            rejects,
            reports,
            chunked.summaries,
            totals,
            counted[_DUPLICATES],
            compared.index,
            counted.files,
            change_files,
            facts,
        )

    def _write_chunks(self, describe: Describe) -> beam.PTransform:
        """Chunk row lists -> the files (``files``) and each document's index row (``documents``): staged in
        OUTPUT, for its commit to move."""
        settings = self._settings
        return WriteDescribedChunks(
            self._output, self._run_id, settings.compression, settings.max_rows_per_file, describe
        )

    def _changes_folder(self) -> str | None:
        """Where in OUTPUT the change files are written: None, the run's staging, for its commit to move."""
        return None

    def _listing(self, name: str) -> str:
        """Where a list the launcher knows is written for the workers (:class:`Listed`)."""
        return listing_folder(self._output, self._run_id, name)

    def _carry(self, dropped: beam.PCollection, written: beam.PCollection, output: str) -> beam.PCollection:
        """The chunk files of the run: ``written``, and each previous file kept, unread, or rewritten without the
        rows of the changed and removed documents in it (one task per file: a file and the documents leaving it
        meet by its path)."""
        previous, compression = self._previous, self._settings.compression
        files = (
            written.pipeline
            | "PreviousChunkFiles" >> Listed(previous.chunk_files, self._listing("previous"), list, tuple)
            | "ByPath" >> beam.Map(lambda entry: (entry[0], tuple(entry)))
        )
        carried = {"leaving": dropped, "file": files} | "ChunkFileAndLeaving" >> beam.CoGroupByKey()
        carry = _CarryChunkFile(previous.root, output, self._run_id, compression)
        return (written, carried | "CarryChunkFiles" >> beam.ParDo(carry)) | "AllChunkFiles" >> beam.Flatten()

    def annotate(self, manifest: beam.PCollection, facts: beam.PCollection) -> beam.PCollection:
        """The manifest PCollection with the run's change counts added (``changes``)."""
        previous = replace(self._previous, inputs={}, chunk_files=())  # its mode and reason: no file list
        if self._unchanged is None:
            files = manifest.pipeline | "NoFileUnchanged" >> beam.Create([0])
        else:
            files = self._unchanged | "CountUnchanged" >> beam.combiners.Count.Globally()
        return manifest | "AddChanges" >> beam.Map(
            _add_changes, beam.pvalue.AsSingleton(facts), previous, beam.pvalue.AsSingleton(files)
        )


def _by_source(report: FileReport) -> str:
    return report.source


def _sum_counters(counters: Iterable[Counter]) -> Counter:
    total: Counter = Counter()
    for counter in counters:
        total.update(counter)
    return total
