"""``zerda-report OUTPUT [--html FILE]``: the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import fsspec

import zerda_core
from pipelines.errors import OutputError
from pipelines.redact import bounded, install, redact_url, remember_credentials
from pipelines.report.page import render_html
from pipelines.report.scan import load_report
from pipelines.report.text import render_text
from pipelines.terminal_table import write_stdout

EXIT_REFUSED = 2
EXIT_NOT_PRINTED = 1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="zerda-report", description="Summarise a finished zerda output: buckets, sizes, languages, rejects."
    )
    parser.add_argument("output", help="the pipeline's OUTPUT: a local path or fsspec URL (s3://, gs://, ...)")
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page (path or fsspec URL)")
    parser.add_argument("--version", action="version", version=f"zerda-report {zerda_core.__version__}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report (and write the page); exit code 2 when there is no finished output, 1 when stdout
    fails (a full disk)."""
    install()  # the command's process, not an import of zerda: a library caller's hooks stay theirs
    args = parse_args(argv)
    for url in (args.output, args.html or ""):
        remember_credentials(url)  # a storage library may echo them in an error, as a bucket name
    try:
        report = load_report(args.output)
    except OutputError as err:
        return _refused(str(err))
    if args.html:  # written before anything is printed: a page that cannot be written is one error line
        try:
            with fsspec.open(args.html, "w", encoding="utf-8") as f:
                f.write(render_html(report))
        except Exception as err:  # a folder, a denied path, an unknown protocol, a storage library's own error
            return _refused(f"cannot write --html {args.html}: {type(err).__name__}: {err}")
    if not write_stdout(render_text(report)):  # the report is the command's output: not printed is a failure
        print("zerda-report: the report could not be written to stdout", file=sys.stderr)
        return EXIT_NOT_PRINTED
    if args.html:
        print(f"wrote {redact_url(args.html)}", file=sys.stderr)
    return 0


def _refused(message: str) -> int:
    """One ``zerda-report:`` line on stderr, credentials removed; the exit code for "nothing to report"."""
    line = " ".join(redact_url(message).split())
    print(f"zerda-report: {bounded(line, 600)}", file=sys.stderr)
    return EXIT_REFUSED
