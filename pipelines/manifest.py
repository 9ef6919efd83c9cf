"""The run's manifest: what was read, written, skipped and why, counted from the data itself.

Wiring (the rechunk entry point)::

    manifest = {"chunks": chunk_rows, "rejects": rejects, "reports": file_reports} | "Manifest" >> BuildManifest(
        settings=settings.to_dict(), fingerprint=settings.fingerprint, output=output, started=started
    )

gives a PCollection of ONE dict; ``pipelines.io.write.CommitOutput`` takes it as a side input, adds the
files written and the finish time (``finish_manifest``) and stores it as ``OUTPUT/_manifest.json``.

The inputs:

- ``chunks``: chunk row dicts (``CHUNK_SCHEMA`` names + ``density_bucket``); the row with
  ``chunk_index == 0`` stands for the document it came from.
- ``rejects``: ``Reject`` records.
- ``reports``: ``FileReport`` per input file; ``records_read`` is the sum of their ``records``, so the
  reader counts every record it emits, as a document or as a reject (a file-level reject included).

Counts come from combiners over the elements, not from Beam Metrics: the outputs of a failed or
retried bundle are discarded with it, so the numbers are exact, where metrics may count attempts
twice or not be queryable on every runner. ``check_accounting`` checks records read = documents
chunked + rejects. The manifest holds the reviewed settings, never pipeline options or environment
values, and URLs lose any ``user:password@`` part.
"""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.transforms import combiners

import zerda_core
from pipelines.records import REJECT_REASONS, FileReport
from pipelines.schema import PARTITION_COLUMN

MANIFEST_FORMAT = 1
DUPLICATE_EXAMPLES = 5


class AccountingError(RuntimeError):
    """Records read do not add up to documents chunked plus rejects: something was lost or doubled."""


def redact_url(text: str) -> str:
    """The URL, or every URL in a message, without credentials (``scheme://user:secret@host/...``).

    ``scheme:///user:secret@`` too: fsspec's error messages spell some URLs that way.
    """
    return re.sub(r"([A-Za-z][A-Za-z0-9+.-]*://+)[^/@\s]*@", r"\1", text)


def versions() -> dict[str, str]:
    """Versions of what produced the output, as found on the worker that builds the manifest."""
    return {
        "zerda": zerda_core.__version__,
        "apache-beam": beam.__version__,
        "pyarrow": pa.__version__,
        "python": platform.python_version(),
    }


def build_manifest(
    *,
    settings: Mapping[str, Any],
    fingerprint: str,
    output: str,
    started: datetime,
    reports: Iterable[FileReport],
    counts: Mapping[str, Any],
) -> dict[str, Any]:
    """The manifest before commit: ``timings.finished`` and ``output.files`` are filled by ``finish_manifest``."""
    inputs = sorted(
        (
            {"source": redact_url(r.source), "bytes": r.bytes_read, "records": r.records, "error": r.error}
            for r in reports
        ),
        key=lambda entry: str(entry["source"]),
    )
    return {
        "format": MANIFEST_FORMAT,
        "fingerprint": fingerprint,
        "settings": dict(settings),
        "inputs": inputs,
        "counts": {
            "files_read": len(inputs),
            "records_read": sum(entry["records"] for entry in inputs),
            **counts,
        },
        "timings": {"started": started.isoformat(), "finished": None, "seconds": None},
        "versions": versions(),
        "output": {"root": redact_url(output), "files": []},
    }


def finish_manifest(manifest: Mapping[str, Any], *, files: list[dict[str, Any]], finished: datetime) -> dict[str, Any]:
    """A copy of ``manifest`` with the files written (paths relative to OUTPUT) and the finish time."""
    started = datetime.fromisoformat(manifest["timings"]["started"])
    return {
        **manifest,
        "timings": {
            "started": manifest["timings"]["started"],
            "finished": finished.isoformat(),
            "seconds": round((finished - started).total_seconds(), 3),
        },
        "output": {**manifest["output"], "files": files},
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
    documents_chunked: int,
    rejects: Mapping[str, int],
    chunks_by_bucket: Mapping[int, int],
    chars_by_bucket: Mapping[int, int],
    duplicate_doc_ids: int,
    duplicate_examples: list[str],
) -> dict[str, Any]:
    return {
        "documents_chunked": documents_chunked,
        "rejects": {reason: rejects.get(reason, 0) for reason in REJECT_REASONS},
        "chunks": sum(chunks_by_bucket.values()),
        "chunks_by_bucket": _by_bucket(chunks_by_bucket),
        "chars_by_bucket": _by_bucket(chars_by_bucket),
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

    def expand(self, pcolls: Mapping[str, beam.PCollection]) -> beam.PCollection:
        chunks, rejects, reports = pcolls["chunks"], pcolls["rejects"], pcolls["reports"]
        firsts = chunks | "FirstChunkOfEachDocument" >> beam.Filter(lambda row: row["chunk_index"] == 0)
        duplicates = (
            firsts
            | "DocId" >> beam.Map(lambda row: row["doc_id"])
            | "CountDocIds" >> combiners.Count.PerElement()
            | "SeenTwice" >> beam.Filter(lambda id_count: id_count[1] > 1)
            | "DuplicateIds" >> beam.Keys()
        )
        counts = {
            "documents_chunked": firsts | "CountDocuments" >> combiners.Count.Globally(),
            "rejects": (
                rejects
                | "Reason" >> beam.Map(lambda reject: reject.reason)
                | "CountReasons" >> combiners.Count.PerElement()
                | "ReasonCounts" >> combiners.ToDict()
            ),
            "chunks_by_bucket": (
                chunks
                | "Bucket" >> beam.Map(lambda row: row[PARTITION_COLUMN])
                | "CountChunks" >> combiners.Count.PerElement()
                | "ChunkCounts" >> combiners.ToDict()
            ),
            "chars_by_bucket": (
                chunks
                | "BucketChars" >> beam.Map(lambda row: (row[PARTITION_COLUMN], row["char_count"]))
                | "SumChars" >> beam.CombinePerKey(sum)
                | "CharCounts" >> combiners.ToDict()
            ),
            "duplicate_doc_ids": duplicates | "CountDuplicates" >> combiners.Count.Globally(),
            "duplicate_examples": duplicates | "Examples" >> combiners.Top.Smallest(DUPLICATE_EXAMPLES),
        }
        sides: dict[str, beam.pvalue.AsSideInput] = {
            name: beam.pvalue.AsSingleton(pcoll) for name, pcoll in counts.items()
        }
        sides["reports"] = beam.pvalue.AsList(reports)
        return chunks.pipeline | "Once" >> beam.Create([None]) | "Assemble" >> beam.Map(self._assemble, **sides)

    def _assemble(self, _: None, *, reports: list[FileReport], **counts: Any) -> dict[str, Any]:
        return build_manifest(**self._static, reports=reports, counts=_counts(**counts))
