"""The run's manifest: what was read, written, skipped and why, counted from the data itself.

Wiring (the rechunk entry point)::

    manifest = {"summaries": summaries, "rejects": rejects, "reports": reports} | "Manifest" >> BuildManifest(
        settings=settings.to_dict(), fingerprint=settings.fingerprint, output=output, started=started
    )

gives a PCollection of ONE dict; ``pipelines.output.commit.CommitOutput`` takes it as a side input, adds the
table of the files written and the finish time (``finish_manifest``) and stores it as ``OUTPUT/_manifest.json``
(``Manifest.dumps``). The input files read are not in it: ``input_rows`` makes their rows, which the job
writes like any output file (``_manifest/inputs/``), so no worker gathers the list.

Every reader of a written manifest goes through ``pipelines.output.manifest.Manifest``.

The inputs:

- ``summaries``: one ``(doc_id, {bucket: [chunks, characters, text characters, overlap characters]})``
  per chunked document (see ``pipelines.chunking.summarise``), from
  ``ChunkDocuments`` (one small element a document, not a pass over every chunk row).
- ``totals`` (optional): ``(documents, {bucket: [...]})``, many documents at once: an incremental run's
  input file not read, summed from its previous index slice (``pipelines.incremental``).
- ``duplicates`` (optional): ``(ids held by two documents or more, up to DUPLICATE_EXAMPLES of them)`` per
  part of the ids, when the caller counts ids itself (an incremental run's ``_ids/``); without it the ids
  of ``summaries`` meet in a ``CombinePerKey``.
- ``rejects``: ``Reject`` records; each counts as ``count`` records of its reason (a flood's summary row
  stands for many), and ``reject_rows`` counts the rows, which the commit checks against the files.
- ``reports``: ``FileReport`` per input file; ``files_read`` counts them and ``records_read`` is the sum of
  their ``records``, so the reader counts every record it emits, as a document or as a reject (a file-level
  reject included).

Counts come from one combine over these elements (a single shuffle; its accumulators are numbers, merged
in a tree), not from Beam Metrics: the outputs of a failed or
retried bundle are discarded with it, so the numbers are exact, where metrics may count attempts
twice or not be queryable on every runner. ``check_accounting`` checks records read = documents
chunked + rejects. The manifest holds the reviewed settings, never pipeline options or environment
values, and URLs lose any ``user:password@`` part.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.typehints.decorators import no_annotations

import zerda_core
from pipelines.errors import AccountingError
from pipelines.output.manifest import MANIFEST_FORMAT
from pipelines.records import REJECT_REASONS, FileReport
from pipelines.redact import redact_url

DUPLICATE_EXAMPLES = 5


def versions() -> dict[str, str]:
    """Versions of what produced the output, as found on the worker that builds the manifest."""
    return {
        "zerda": zerda_core.__version__,
        "apache-beam": beam.__version__,
        "pyarrow": pa.__version__,
        "python": platform.python_version(),
    }


def input_rows(report: FileReport) -> list[dict[str, Any]]:
    """An input file's row of the manifest's inputs table (as the one-row list the staging step takes)."""
    source = redact_url(report.source)
    return [
        {
            "source": source,
            "bytes": report.bytes_read,
            "records": report.records,
            "error": report.error,
            "stamp": report.stamp,
        }
    ]


def build_manifest(
    *, settings: Mapping[str, Any], fingerprint: str, output: str, started: datetime, counts: Mapping[str, Any]
) -> dict[str, Any]:
    """The manifest before commit: ``timings.finished`` is filled by ``finish_manifest``, and ``output`` by the
    commit (the table of the files it committed)."""
    return {
        "format": MANIFEST_FORMAT,
        "fingerprint": fingerprint,
        "settings": dict(settings),
        "counts": dict(counts),
        "timings": {"started": started.isoformat(), "finished": None, "seconds": None},
        "versions": versions(),
        "output": {"root": redact_url(output)},
    }


def finish_manifest(manifest: Mapping[str, Any], *, finished: datetime) -> dict[str, Any]:
    """A copy of ``manifest`` with the finish time."""
    started = datetime.fromisoformat(manifest["timings"]["started"])
    return {
        **manifest,
        "timings": {
            "started": manifest["timings"]["started"],
            "finished": finished.isoformat(),
            "seconds": round((finished - started).total_seconds(), 3),
        },
    }


def check_accounting(manifest: Mapping[str, Any]) -> None:
    """Raise ``AccountingError`` unless records read = documents chunked + rejects."""
    counts = manifest["counts"]
    rejected = sum(counts["rejects"].values())
    if counts["records_read"] != counts["documents_chunked"] + rejected:
        raise AccountingError(
            f"records read ({counts['records_read']}) != documents chunked ({counts['documents_chunked']})"
            f" + rejects ({rejected})"
        )


def _by_bucket(totals: Mapping[int, int]) -> dict[str, int]:
    """Bucket totals keyed as JSON will store them, in bucket order."""
    return {str(bucket): totals[bucket] for bucket in sorted(totals)}


def _counts(
    *,
    files_read: int,
    records_read: int,
    documents_chunked: int,
    rejects: Mapping[str, int],
    reject_rows: int,
    chunks_by_bucket: Mapping[int, int],
    chars_by_bucket: Mapping[int, int],
    text_chars: int,
    overlap_chars: int,
    duplicate_doc_ids: int,
    duplicate_examples: list[str],
) -> dict[str, Any]:
    return {
        "files_read": files_read,
        "records_read": records_read,
        "documents_chunked": documents_chunked,
        "rejects": {reason: rejects.get(reason, 0) for reason in REJECT_REASONS},
        "reject_rows": reject_rows,
        "chunks": sum(chunks_by_bucket.values()),
        "chunks_by_bucket": _by_bucket(chunks_by_bucket),
        "chars_by_bucket": _by_bucket(chars_by_bucket),
        "text_chars": text_chars,
        "overlap_chars": overlap_chars,
        "duplicate_doc_ids": duplicate_doc_ids,
        "duplicate_doc_id_examples": duplicate_examples,
    }


class BuildManifest(beam.PTransform):
    """``{"chunks", "rejects", "reports"}`` PCollections -> a PCollection of one manifest dict."""

    def __init__(self, *, settings: Mapping[str, Any], fingerprint: str, output: str, started: datetime) -> None:
        super().__init__()
        json.dumps(settings)  # a TypeError now, at construction, rather than at commit after the whole run
        self._static: dict[str, Any] = {
            "settings": dict(settings),
            "fingerprint": fingerprint,
            "output": output,
            "started": started,
        }

    @no_annotations
    def expand(self, pcolls: Mapping[str, beam.PCollection]) -> beam.PCollection:
        summaries, rejects, reports = pcolls["summaries"], pcolls["rejects"], pcolls["reports"]
        duplicates = pcolls.get("duplicates")
        if duplicates is None:
            duplicates = (
                summaries
                | "DocId" >> beam.Map(lambda summary: (summary[0], 1))
                | "CountDocIds" >> beam.CombinePerKey(sum)
                | "SeenTwice" >> beam.FlatMap(lambda id_count: [(1, [id_count[0]])] if id_count[1] > 1 else [])
            )
        kinds = [
            summaries | "DocumentFacts" >> beam.Map(lambda summary: ("documents", (1, summary[1]))),
            rejects | "RejectFacts" >> beam.Map(lambda reject: ("reject", (reject.reason, reject.count))),
            reports | "FileFacts" >> beam.Map(lambda report: ("file", report)),
            duplicates | "DuplicateFacts" >> beam.Map(lambda found: ("duplicates", found)),
        ]
        if "totals" in pcolls:
            kinds.append(pcolls["totals"] | "TotalFacts" >> beam.Map(lambda totals: ("documents", totals)))
        facts = tuple(kinds) | "AllFacts" >> beam.Flatten()
        return facts | "Count" >> beam.CombineGlobally(_ManifestCounts()) | "Assemble" >> beam.Map(self._assemble)

    def _assemble(self, acc: dict[str, Any]) -> dict[str, Any]:
        counts = _counts(
            files_read=acc["files"],
            records_read=acc["records"],
            documents_chunked=acc["documents"],
            rejects=acc["rejects"],
            reject_rows=acc["reject_rows"],
            chunks_by_bucket={b: t[0] for b, t in acc["buckets"].items()},
            chars_by_bucket={b: t[1] for b, t in acc["buckets"].items()},
            text_chars=sum(t[2] for t in acc["buckets"].values()),
            overlap_chars=sum(t[3] for t in acc["buckets"].values()),
            duplicate_doc_ids=acc["duplicates"],
            duplicate_examples=acc["examples"],
        )
        return build_manifest(**self._static, counts=counts)


def add_buckets(totals: dict[int, list[int]], more: Mapping[int, list[int]]) -> None:
    """Add ``{bucket: [chunks, characters, text characters, overlap characters]}`` into ``totals``."""
    for bucket, numbers in more.items():
        total = totals.setdefault(bucket, [0] * len(numbers))
        for i, number in enumerate(numbers):
            total[i] += number


class _ManifestCounts(beam.CombineFn):
    """Every count of the manifest in one combine: one shuffle instead of one per count. Its accumulators are
    numbers and bounded maps (reasons, buckets, a few example ids), so they merge in a tree whatever the input."""

    def create_accumulator(self) -> dict[str, Any]:
        return {
            "documents": 0,
            "rejects": {},
            "reject_rows": 0,
            "buckets": {},
            "duplicates": 0,
            "examples": [],
            "files": 0,
            "records": 0,
        }

    def add_input(self, acc: dict[str, Any], fact: Any) -> dict[str, Any]:
        kind, value = fact
        if kind == "documents":
            documents, buckets = value
            acc["documents"] += documents
            add_buckets(acc["buckets"], buckets)
        elif kind == "reject":
            reason, count = value
            acc["rejects"][reason] = acc["rejects"].get(reason, 0) + count
            acc["reject_rows"] += 1
        elif kind == "file":
            acc["files"] += 1
            acc["records"] += value.records
        else:
            duplicates, examples = value
            acc["duplicates"] += duplicates
            acc["examples"] = sorted([*acc["examples"], *examples])[:DUPLICATE_EXAMPLES]
        return acc

    def merge_accumulators(self, accs: Any) -> dict[str, Any]:
        merged = self.create_accumulator()
        for acc in accs:
            merged["documents"] += acc["documents"]
            for reason, n in acc["rejects"].items():
                merged["rejects"][reason] = merged["rejects"].get(reason, 0) + n
            merged["reject_rows"] += acc["reject_rows"]
            add_buckets(merged["buckets"], acc["buckets"])
            merged["duplicates"] += acc["duplicates"]
            merged["examples"] = sorted([*merged["examples"], *acc["examples"]])[:DUPLICATE_EXAMPLES]
            merged["files"] += acc["files"]
            merged["records"] += acc["records"]
        return merged

    def extract_output(self, acc: dict[str, Any]) -> dict[str, Any]:
        return acc
