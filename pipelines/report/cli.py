"""``zerda-report OUTPUT [--html FILE [--force]]`` and ``zerda-report --verify OUTPUT``: the command line.

OUTPUT may be a table, ``iceberg://NAMESPACE.TABLE`` (``--config`` names its catalog, ``--snapshot`` an
earlier snapshot; ``--orphans [--remove]`` lists or deletes the files no snapshot names): ``pipelines.report.table``.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import sys
from collections.abc import Sequence

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

import zerda_core
from pipelines.cli.process_exit import command
from pipelines.errors import OutputError
from pipelines.output.identity import local_paths_below, relative_to
from pipelines.output.layout import ORPHAN_HOURS
from pipelines.redact import bounded, install, redact_url, remember_credentials
from pipelines.report.page import GENERATOR, render_html
from pipelines.report.scan import load_report
from pipelines.report.table import is_table, load_table_report, orphans_text
from pipelines.report.text import render_text
from pipelines.report.verify import render_verification, verify_output
from pipelines.terminal_table import visible_line, write_stdout

EXIT_REFUSED = 2
EXIT_DAMAGED = 1
EXIT_NOT_PRINTED = 1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="zerda-report", description="Summarise a finished zerda output: buckets, sizes, languages, rejects."
    )
    parser.add_argument(
        "output",
        help="the pipeline's OUTPUT: a local path or fsspec URL (s3://, gs://, ...), or iceberg://NAMESPACE.TABLE",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page (path or fsspec URL)")
    parser.add_argument(
        "--force", action="store_true", help="let --html overwrite an existing file that is not a zerda report"
    )
    action.add_argument(
        "--verify",
        action="store_true",
        help="instead of the report, read every chunk and reject file whole, checking each page's checksum, the"
        " files' sizes and rows and the manifest's counts: exit 0 when all match, 1 naming each damaged file",
    )
    table = parser.add_argument_group("an Iceberg table (iceberg://NAMESPACE.TABLE; docs/iceberg.md)")
    table.add_argument("--config", metavar="YAML", help="the run settings whose output.catalog names the catalog")
    table.add_argument("--snapshot", metavar="ID", type=int, help="report this snapshot, not the current one")
    action.add_argument(
        "--orphans",
        action="store_true",
        help="instead of the report, list the files runs wrote into the table's folders that no snapshot names "
        "(a killed run's, an expired snapshot's)",
    )
    table.add_argument("--remove", action="store_true", help="with --orphans: delete them")
    table.add_argument(
        "--older-than",
        metavar="HOURS",
        type=float,
        default=ORPHAN_HOURS,
        help="with --orphans: only the files of runs started more than HOURS ago (default %(default)g: a younger "
        "run may be writing still)",
    )
    parser.add_argument("--version", action="version", version=f"zerda-report {zerda_core.__version__}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report (and write the page); exit code 2 when there is no finished output, 1 when stdout
    fails (a full disk)."""
    install()  # the command's process, not an import of zerda: a library caller's hooks stay theirs
    args = parse_args(argv)
    for url in (args.output, args.html or ""):
        remember_credentials(url)  # a storage library may echo them in an error, as a bucket name
    table = is_table(args.output)
    if not table and (args.config or args.snapshot is not None or args.orphans):
        return _refused("--config, --snapshot and --orphans are for a table, iceberg://NAMESPACE.TABLE")
    if args.remove and not args.orphans:
        return _refused("--remove goes with --orphans")
    if args.verify:
        return _verify(args.output) if not table else _refused("--verify reads a directory output, not a table")
    if args.orphans:
        return _orphans(args)
    try:
        report = load_table_report(args.output, args.config, args.snapshot) if table else load_report(args.output)
    except OutputError as err:
        return _refused(str(err))
    if args.html:  # written before anything is printed: a page that cannot be written is one error line
        why = _refuse_html_target(args.html, args.output, args.force)
        if why is not None:
            return _refused(why)
        try:
            with fsspec.open(args.html, "w", encoding="utf-8") as f:
                f.write(render_html(report))
        except Exception as err:  # a folder, a denied path, an unknown protocol, a storage library's own error
            return _refused(f"cannot write --html {args.html}: {type(err).__name__}: {err}")
    if not write_stdout(render_text(report)):  # the report is the command's output: not printed is a failure
        print("zerda-report: the report could not be written to stdout", file=sys.stderr)
        return EXIT_NOT_PRINTED
    if args.html:
        print(f"wrote {visible_line(redact_url(args.html))}", file=sys.stderr)
    return 0


def _verify(output: str) -> int:
    """``--verify``: the verdict on stdout; exit 0 verified, 1 damaged, 2 no output to verify."""
    try:
        result = verify_output(output)
    except OutputError as err:
        return _refused(str(err))
    if not write_stdout(render_verification(redact_url(output), result)):  # the verdict unprinted is no verdict
        print("zerda-report: the verdict could not be written to stdout", file=sys.stderr)
        return EXIT_NOT_PRINTED
    return EXIT_DAMAGED if result.problems else 0


def _orphans(args: argparse.Namespace) -> int:
    """``--orphans [--remove]``: the list on stdout; exit 0, or 2 when the table cannot be read."""
    try:
        text = orphans_text(args.output, args.config, args.older_than, args.remove)
    except OutputError as err:
        return _refused(str(err))
    if not write_stdout(text):
        print("zerda-report: the list could not be written to stdout", file=sys.stderr)
        return EXIT_NOT_PRINTED
    return 0


def _refused(message: str) -> int:
    """One ``zerda-report:`` line on stderr, credentials removed; the exit code for "nothing to report"."""
    line = " ".join(redact_url(message).split())
    print(f"zerda-report: {visible_line(bounded(line, 600))}", file=sys.stderr)
    return EXIT_REFUSED


_SNIFF_BYTES = 4096  # a page's head, where its generator is named


def _refuse_html_target(html: str, output: str, force: bool) -> str | None:
    """Why ``--html`` must not be written, or None: a path inside OUTPUT (by any name: the page would replace
    its ``_manifest.json`` or land among its files), or an existing file that is not a zerda report, unless
    ``force`` (a typo would destroy another file)."""
    try:
        fs, path = url_to_fs(html)
        fs_out, root = url_to_fs(output)
    except (ValueError, ImportError):  # an unknown protocol: the write says so
        return None
    if fs.protocol == fs_out.protocol:
        root = posixpath.normpath(root)
        if isinstance(fs, LocalFileSystem):
            root = os.path.realpath(root)
            names = local_paths_below(root, path)
        else:
            names = [posixpath.normpath(path)]
        if any(relative_to(name, root) is not None for name in names):
            return f"--html {html} is inside the output being reported ({output}): write the page elsewhere"
    if force:
        return None
    try:
        if not fs.isfile(path):
            return None  # new, or a folder: the write says so
        with fs.open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES).decode("utf-8", "replace")
    except Exception:  # unreadable: the write says why
        return None
    if f'<meta name="generator" content="{GENERATOR}">' in head or "<title>zerda report · " in head:
        return None
    return f"--html {html} exists and is not a zerda report: give a new path, or --force to overwrite it"


cli = command(main)  # zerda-report
