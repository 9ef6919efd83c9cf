"""The end-of-run summary: what was read, chunked and rejected, and where the output is."""

from __future__ import annotations

from pipelines.output.manifest import Manifest
from pipelines.terminal_table import render_histogram, render_table


def render_summary(manifest: Manifest, where: list[str] | None = None) -> str:
    """What the launcher prints once the run is committed, from the manifest it committed; ``where``: the last
    lines, saying where the output is and how to read it (default: those of a Parquet directory)."""
    counts = manifest.counts
    width = manifest.bucket_width
    output = manifest.root
    seconds = manifest.timings.get("seconds") or 0.0
    text_chars = counts.get("text_chars", 0)
    megabytes = text_chars / 1e6  # text read and chunked (characters), not the compressed bytes on disk
    lines = [
        "",
        render_table(
            ["records read", "documents chunked", "rejected", "chunks", "seconds", "text MB/s"],
            [
                [
                    counts["records_read"],
                    counts["documents_chunked"],
                    sum(counts["rejects"].values()),
                    counts["chunks"],
                    round(seconds, 1),
                    round(megabytes / seconds, 2) if seconds else None,
                ]
            ],
        ),
    ]
    rejects = [[reason, n] for reason, n in counts["rejects"].items() if n]
    if rejects:
        lines += ["", render_table(["reject reason", "records"], rejects)]
    buckets = sorted(counts["chunks_by_bucket"], key=int)
    lines += [
        "",
        render_table(
            ["density bucket", "chunks", "characters"],
            [[b, counts["chunks_by_bucket"][b], counts["chars_by_bucket"].get(b, 0)] for b in buckets],
        ),
        "",
        render_histogram(counts["chunks_by_bucket"], width=40, bucket_width=width),
        "",
        _overlap_line(text_chars, sum(counts["chars_by_bucket"].values()), counts.get("overlap_chars", 0)),
        "",
    ]
    changes = manifest.changes
    if changes and changes.get("incremental"):  # counted on the workers, which matched and judged the files
        unchanged = changes.get("files_unchanged", 0)
        lines += [
            f"files:   {counts['files_read']:,}, {unchanged:,} of them unchanged since the previous output: not read",
            "",
        ]
    lines += where or [
        f"output:  {output}",
        f"report:  zerda-report {output}",
        "query:   SELECT density_bucket, count(*) AS chunks FROM read_parquet("
        f"'{output.rstrip('/')}/**/*.parquet', hive_partitioning=true) GROUP BY 1 ORDER BY 1",
    ]
    return "\n".join(lines)


def _overlap_line(text_chars: int, chunk_chars: int, overlap_chars: int) -> str:
    """How much of what the chunks hold is text read, and how much is overlap repeated from the chunk before."""
    share = f" ({overlap_chars / chunk_chars:.1%})" if chunk_chars else ""
    return (
        f"text:    {text_chars:,} characters chunked into chunks holding {chunk_chars:,};"
        f" {overlap_chars:,}{share} of those are overlap"
    )
