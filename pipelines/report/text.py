"""The terminal rendering of a report."""

from __future__ import annotations

from pipelines.report.model import Report
from pipelines.report.rows import (
    BUCKET_HEADERS,
    LANGUAGE_HEADERS,
    REJECT_HEADERS,
    REJECTED_FILE_HEADERS,
    SOURCE_HEADERS,
    bucket_rows,
    headline,
    language_rows,
    provenance,
    reject_rows,
    rejected_file_rows,
    sample_heading,
    source_rows,
)
from pipelines.terminal_table import format_cell, render_histogram, render_table

HISTOGRAM_WIDTH = 40


def _section(title: str, body: str) -> str:
    return f"{title}\n{body}"


def render_text(report: Report) -> str:
    """The terminal report."""
    glance = " · ".join(f"{name} {format_cell(value)}" for name, value in headline(report))
    title = [f"zerda report · {report.output}", provenance(report), glance]
    sections = [
        "\n".join(line for line in title if line),
        _section("Chunks by density bucket (sizes in characters)", render_table(BUCKET_HEADERS, bucket_rows(report))),
        _section(
            "Density histogram (chunks per bucket)",
            render_histogram(report.chunks_by_bucket(), HISTOGRAM_WIDTH, bucket_width=report.bucket_width),
        ),
        _section("Languages", render_table(LANGUAGE_HEADERS, language_rows(report)) if report.groups else "(none)"),
        _section(
            "Rejects by reason", render_table(REJECT_HEADERS, reject_rows(report)) if report.rejects else "(none)"
        ),
        _section("Sources", render_table(SOURCE_HEADERS, source_rows(report)) if report.sources else "(none)"),
        _section(
            "Rejects by file",
            render_table(REJECTED_FILE_HEADERS, rejected_file_rows(report)) if report.rejected_files else "(none)",
        ),
        _section("Sample chunks", _text_samples(report) or "(none)"),
    ]
    return "\n\n".join(sections) + "\n"


def _text_samples(report: Report) -> str:
    return "\n".join(
        f"{sample_heading(sample, report.bucket_width)}\n    {' ⏎ '.join(filter(str.strip, sample.text.splitlines()))}"
        for sample in report.samples
    )
