"""``zerda-report OUTPUT [--html FILE]``: what a finished run wrote, read back from the output itself.

Prints chunks, characters and documents per density bucket, chunk-size percentiles, languages, rejects by
reason, a density histogram, counts per source file, the rejects by file with their reasons and a few
sample chunks of each bucket; ``--html`` also writes a self-contained page (inline CSS and SVG, nothing
fetched). OUTPUT is a local path or any fsspec URL (``s3://``, ``gs://``, ``memory://``).

Only finished outputs are reported: without ``_SUCCESS`` the numbers could describe half a run, so the
report refuses with exit code 2. Chunks are aggregated by Arrow while they stream from the Parquet files,
reading small columns and never ``text``, so a large output reports with little memory; the samples read
``text`` from the first rows of one file a bucket only.
"""

from pipelines.errors import OutputError
from pipelines.report.cli import main
from pipelines.report.model import Report, percentile
from pipelines.report.page import render_html, render_svg_histogram
from pipelines.report.scan import load_report
from pipelines.report.text import render_text

__all__ = [
    "OutputError",
    "Report",
    "load_report",
    "main",
    "percentile",
    "render_html",
    "render_svg_histogram",
    "render_text",
]
