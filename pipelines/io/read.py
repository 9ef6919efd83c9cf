"""ReadCorpus: the Beam transform that reads the expanded corpus files on the workers.

The files are expanded on the driver (:mod:`pipelines.io.expand`); each worker reads whole
files (:func:`pipelines.io.source.read_file`) into records, rejects and one report a file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import PBegin, TaggedOutput

from pipelines.io.expand import InputFile
from pipelines.io.source import read_file
from pipelines.records import REJECT_REASONS, FileReport, Reject, SourceRecord
from pipelines.settings import InputSettings

RECORDS_TAG = "records"
REJECTS_TAG = "rejects"
FILES_TAG = "files"
METRICS_NAMESPACE = "zerda"


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
