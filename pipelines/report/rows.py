"""The rows and headings the text and HTML renderings share."""

from __future__ import annotations

from pipelines.report.model import Report, Sample
from pipelines.terminal_table import bucket_label

SIZE_HEADERS = ("p5", "p50", "p95", "max")
MAX_LISTED = 20  # sources and rejected files listed; the rest are summed up in one line

BUCKET_HEADERS = ("bucket", "density", "documents", "chunks", "characters", *SIZE_HEADERS)
LANGUAGE_HEADERS = ("language", "documents", "chunks", "% of chunks")
REJECT_HEADERS = ("reason", "records")


def bucket_rows(report: Report) -> list[list[object]]:
    """One row per non-empty bucket, then the ``all`` row with the overall percentiles."""
    rows: list[list[object]] = []
    for bucket in report.buckets():
        s = report.stats(bucket=bucket)
        rows.append([bucket, bucket_label(bucket, report.bucket_width), s.documents, s.chunks, s.characters, *s.sizes])
    total = report.stats()
    rows.append(["all", "", total.documents, total.chunks, total.characters, *total.sizes])
    return rows


def language_rows(report: Report) -> list[list[object]]:
    chunks = report.stats().chunks
    return [[name, s.documents, s.chunks, 100 * s.chunks / chunks] for name, s in report.languages()]


def reject_rows(report: Report) -> list[list[object]]:
    return [[reason, n] for reason, n in report.rejects.items()]


SOURCE_HEADERS = ("source", "documents", "chunks", "characters", "rejects")
REJECTED_FILE_HEADERS = ("source", "rejects", "reasons", "first message")


def source_rows(report: Report) -> list[list[object]]:
    """The ``MAX_LISTED`` sources with the most chunks, then one row summing the others."""
    rows: list[list[object]] = [list(s) for s in report.sources[:MAX_LISTED]]
    rest = report.sources[MAX_LISTED:]
    if rest:
        totals = [sum(getattr(s, name) for s in rest) for name in SOURCE_HEADERS[1:]]
        rows.append([f"… {len(rest):,} more sources", *totals])
    return rows


def rejected_file_rows(report: Report) -> list[list[object]]:
    """The ``MAX_LISTED`` files with the most rejects, then one row summing the others."""
    rows: list[list[object]] = [
        [f.source, f.rejects, ", ".join(f"{reason} {n:,}" for reason, n in f.reasons.items()), f.message]
        for f in report.rejected_files[:MAX_LISTED]
    ]
    rest = report.rejected_files[MAX_LISTED:]
    if rest:
        rows.append([f"… {len(rest):,} more files", sum(f.rejects for f in rest), "", ""])
    return rows


def sample_heading(sample: Sample, bucket_width: float) -> str:
    return (
        f"bucket {sample.bucket} ({bucket_label(sample.bucket, bucket_width)}) · {sample.source}"
        f"{f' · record {sample.record}' if sample.record else ''} · chunk {sample.chunk_index}"
        f" · {sample.language} · {sample.char_count:,} characters"
    )


def headline(report: Report) -> list[tuple[str, object]]:
    """The run at a glance: counts from the manifest where the data cannot tell (records read)."""
    counts = report.manifest.counts
    total = report.stats()
    return [
        ("records read", counts.get("records_read")),
        ("documents chunked", total.documents),
        ("rejected", sum(report.rejects.values())),
        ("chunks", total.chunks),
        ("characters", total.characters),
    ]


def provenance(report: Report) -> str:
    """Fingerprint, finish time and version: which settings and code produced the output."""
    manifest = report.manifest
    timings = manifest.timings
    parts = [
        f"fingerprint {manifest.fingerprint}" if manifest.fingerprint else "",
        f"finished {timings['finished']}" if timings.get("finished") else "",
        f"took {timings['seconds']:,} s" if timings.get("seconds") is not None else "",
        f"zerda {manifest.zerda_version}" if manifest.zerda_version else "",
    ]
    return " · ".join(part for part in parts if part)
