"""ReadCorpus: the Beam transform that reads the expanded corpus files on the workers.

The files are expanded on the driver (:mod:`pipelines.input.expand`). On the workers each file is
planned into parts (:mod:`pipelines.input.split`: one for a small file, byte ranges or row groups for
a large splittable one), the parts are spread, and each is read (:func:`pipelines.input.source.read_part`)
into records, rejects and a report; the reports of a file's parts are added up into its one report.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import PBegin, TaggedOutput
from apache_beam.typehints.decorators import no_annotations

from pipelines.input.expand import InputFile
from pipelines.input.listing import Listed
from pipelines.input.source import read_part
from pipelines.input.split import FilePart, plan_parts, spread_whole
from pipelines.names import FILES, METRICS_NAMESPACE, RECORDS, REJECTS
from pipelines.records import REJECT_REASONS, FileReport, Reject, RejectLimit, SourceRecord
from pipelines.settings import InputSettings

SPREAD = "spread"  # _ReadPartFn: batches of the records of a large unsplittable file
_SPREAD_BATCH_CHARS = 4 << 20  # text a batch of spread records holds: few elements, each worth a shuffle


class ReadCorpus(beam.PTransform):
    """Expanded corpus files -> SourceRecords (``records``, the main output), Rejects
    (``rejects``) and one FileReport per file (``files``). With ``listing`` (a folder the workers can read)
    the files reach the workers through files written there (:class:`~pipelines.input.listing.Listed`), not
    inside the job graph.

    One element per file, then a Reshuffle: without it the runner fuses the read with the
    ``Create`` and reads every file on one worker. The parts of the files are spread by a second
    Reshuffle; the records of a large compressed file, read by one worker, by a third, in batches.
    That third branch joins the others in a Flatten, which the DirectRunner materialises (every
    record copied between stages instead of fused with chunking): it is built only when the listing
    holds such a file.
    """

    def __init__(
        self, files: Sequence[InputFile], settings: InputSettings, label: str | None = None, listing: str | None = None
    ) -> None:
        super().__init__(label)
        self._files = list(files)
        self._settings = settings
        self._listing = listing

    @no_annotations
    def expand(self, pbegin: PBegin) -> CorpusRead:
        if self._listing is None:
            listed = pbegin | "ListFiles" >> beam.Create(self._files, reshuffle=False)  # spread once, by the next step
        else:
            listed = pbegin | "ListFiles" >> Listed(self._files, self._listing, _encoded, _decoded)
        read = (
            listed
            | "SpreadFiles" >> beam.Reshuffle()
            | "PlanParts" >> beam.FlatMap(plan_parts, self._settings)
            | "SpreadParts" >> beam.Reshuffle()
            | "ReadParts" >> beam.ParDo(_ReadPartFn(self._settings)).with_outputs(REJECTS, FILES, SPREAD, main=RECORDS)
        )
        records = read[RECORDS]
        if any(spread_whole(file, self._settings) for file in self._files):  # else no Flatten: see the class doc
            spread = read[SPREAD] | "SpreadRecords" >> beam.Reshuffle() | "Unbatch" >> beam.FlatMap(lambda b: b)
            records = (records, spread) | "AllRecords" >> beam.Flatten()
        reports = read[FILES] | "PartReports" >> beam.GroupByKey() | "FileReports" >> beam.Map(_file_report)
        return CorpusRead(records, read[REJECTS], reports)


def _encoded(file: InputFile) -> list[Any]:
    return [file.url, file.relative_path, file.size, file.stamp]


def _decoded(fields: list[Any]) -> InputFile:
    return InputFile(*fields)


class CorpusRead(NamedTuple):
    """What :class:`ReadCorpus` gives: records, rejects and one report a file."""

    records: beam.PCollection
    rejects: beam.PCollection
    files: beam.PCollection


class _ReadPartFn(beam.DoFn):
    """Reads one file part per element; counts records, files, bytes and rejects by reason.

    Reports come out keyed by source (the URL made encodable), with the part's index, for ``_file_report``.
    """

    def __init__(self, settings: InputSettings) -> None:
        self._input = settings

    def setup(self) -> None:
        self._records_read = Metrics.counter(METRICS_NAMESPACE, "records_read")
        self._files_read = Metrics.counter(METRICS_NAMESPACE, "files_read")
        self._bytes_read = Metrics.counter(METRICS_NAMESPACE, "bytes_read")
        self._rejects = {reason: Metrics.counter(METRICS_NAMESPACE, f"rejects_{reason}") for reason in REJECT_REASONS}

    def process(self, part: FilePart) -> Iterator[Any]:  # SourceRecords, and TaggedOutputs of the other outputs
        batch: list[SourceRecord] = []
        chars = 0
        limit = RejectLimit(self._input.max_reject_rows)  # per part: a flood of bad lines costs a counter
        for item in read_part(part, self._input):
            if isinstance(item, FileReport):
                if part.index == 0:  # a file's first part counts it
                    self._files_read.inc()
                self._bytes_read.inc(item.bytes_read)
                stamped = replace(item, stamp=part.file.stamp or "")
                yield TaggedOutput(FILES, (item.source, (part.index, stamped)))  # a source Beam can encode
                continue
            self._records_read.inc()
            if isinstance(item, Reject):
                self._rejects[item.reason].inc()
                if limit.admit(item):
                    yield TaggedOutput(REJECTS, item)
            elif not part.spread:
                yield item
            else:
                batch.append(item)
                chars += len(item.text)
                if chars >= _SPREAD_BATCH_CHARS:
                    yield TaggedOutput(SPREAD, batch)
                    batch, chars = [], 0
        if batch:
            yield TaggedOutput(SPREAD, batch)
        for summary in limit.summaries():
            yield TaggedOutput(REJECTS, summary)


def _file_report(keyed: tuple[str, Iterable[tuple[int, FileReport]]]) -> FileReport:
    """One file's report from its parts': bytes and records added up, the first part's error kept."""
    reports = [report for _, report in sorted(keyed[1], key=lambda indexed: indexed[0])]
    error = next((report.error for report in reports if report.error), "")
    first = reports[0]
    return FileReport(
        first.source, sum(r.bytes_read for r in reports), sum(r.records for r in reports), error, first.stamp
    )
