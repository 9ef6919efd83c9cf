"""The previous run's reports of its input files, read on the workers: an incremental run judges each file it
matches against its source's report (``pipelines.input.match.JudgeInputs``) without the launcher holding them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import apache_beam as beam
from apache_beam.pvalue import PBegin

from pipelines.incremental.previous import Previous, previous_reports
from pipelines.input.listing import Listed
from pipelines.records import FileReport


class PreviousReports(beam.PTransform):
    """-> ``(source, FileReport)`` of each file the previous run read whole and stamped: each part of its
    manifest's inputs table read by one worker, or the entries a format 1 manifest held in its JSON (read with
    it at launch), handed to the workers as files in ``folder`` (:class:`~pipelines.input.listing.Listed`)."""

    def __init__(self, previous: Previous, folder: str) -> None:
        super().__init__()
        self._previous = previous
        self._folder = folder

    def expand(self, pbegin: PBegin) -> beam.PCollection:
        previous = self._previous
        if previous.input_parts:
            light = replace(previous, inputs={}, chunk_files=())  # what a worker needs of it: no file list
            reports = (
                pbegin
                | "InputsParts" >> beam.Create(list(previous.input_parts), reshuffle=False)
                | "SpreadInputsParts" >> beam.Reshuffle()
                | "ReadInputsPart" >> beam.FlatMap(lambda part, known: previous_reports(known, part), light)
            )
        else:
            reports = pbegin | "ListedReports" >> Listed(
                list(previous.inputs.values()), self._folder, _encoded, _decoded
            )
        return reports | "BySource" >> beam.Map(lambda report: (report.source, report))


def _encoded(report: FileReport) -> list[Any]:
    return [report.source, report.bytes_read, report.records, report.error, report.stamp]


def _decoded(fields: list[Any]) -> FileReport:
    return FileReport(*fields)
