"""``zerda-report OUTPUT [--html FILE]``: the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import fsspec

from pipelines.errors import OutputError
from pipelines.report.page import render_html
from pipelines.report.scan import load_report
from pipelines.report.text import render_text
from pipelines.terminal_table import write_stdout

EXIT_REFUSED = 2


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="zerda-report", description="Summarise a finished zerda output: buckets, sizes, languages, rejects."
    )
    parser.add_argument("output", help="the pipeline's OUTPUT: a local path or fsspec URL (s3://, gs://, ...)")
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page (path or fsspec URL)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report (and write the page); exit code 2 when there is no finished output."""
    args = parse_args(argv)
    try:
        report = load_report(args.output)
    except OutputError as err:
        print(f"zerda-report: {err}", file=sys.stderr)
        return EXIT_REFUSED
    write_stdout(render_text(report))
    if args.html:
        with fsspec.open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html(report))
        print(f"wrote {args.html}", file=sys.stderr)
    return 0
