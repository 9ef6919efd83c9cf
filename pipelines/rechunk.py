"""The re-chunking job: ``zerda-rechunk --input GLOB --output DIR [--config YAML] [Beam options]``.

With no ``--input`` it chunks the bundled sample corpus into ``./out/chunks``. Options this
parser does not know are handed to Beam (``--runner``, ``--direct_num_workers``, ...), so the
same ``--config`` runs on the DirectRunner, Dataflow and Flink. Bad settings, inputs or
outputs exit with code 2 before anything is written.

    ReadCorpus ─► ChunkDocuments ─┬─► WriteChunks ──┐
         │                         └─► rejects ─────┼─► WriteRejects ─┐
         └─► rejects, file reports ─────────────────┴─► BuildManifest ─┴─► CommitOutput
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any

import apache_beam as beam
import fsspec
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, WorkerOptions

from pipelines.chunking import ChunkDocuments
from pipelines.io.expand import InputError, InputFile, expand_inputs, sample_corpus_glob
from pipelines.io.read import FILES_TAG, REJECTS_TAG, ReadCorpus
from pipelines.io.write import (
    MANIFEST_FILE,
    CommitOutput,
    OutputError,
    WriteChunks,
    WriteRejects,
    new_run_id,
    prepare_output,
)
from pipelines.manifest import BuildManifest, check_accounting
from pipelines.progress import DEFAULT_INTERVAL_SECONDS, LOG_FORMAT
from pipelines.redact import RedactCredentials, redact_url
from pipelines.schema import REJECTS_DIR
from pipelines.settings import Settings, SettingsError, load_settings
from pipelines.summary import render_summary
from pipelines.terminal_table import write_stdout

DEFAULT_OUTPUT = "out/chunks"
EXIT_USAGE = 2
EXIT_NOTHING_CHUNKED = 1
log = logging.getLogger("zerda")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerda-rechunk",
        description="Re-chunk a text corpus by information density into a Parquet dataset "
        "partitioned by density bucket. Unknown options go to Apache Beam (e.g. --runner, "
        "--direct_num_workers, --direct_running_mode, --temp_location, --setup_file).",
    )
    parser.add_argument(
        "--input",
        action="append",
        metavar="GLOB",
        help="corpus files: a glob, directory or file on any fsspec filesystem (repeatable); "
        "default: the bundled sample corpus",
    )
    parser.add_argument("--output", default=DEFAULT_OUTPUT, metavar="DIR_OR_URL", help=f"default: {DEFAULT_OUTPUT}")
    parser.add_argument("--config", metavar="YAML", help="reviewed run settings (default: built-in defaults)")
    parser.add_argument(
        "--progress-seconds",
        type=float,
        default=DEFAULT_INTERVAL_SECONDS,
        metavar="S",
        help=f"log progress every S seconds on each worker; 0 turns it off (default: {DEFAULT_INTERVAL_SECONDS:g})",
    )
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("--quiet", action="store_true", help="print only errors")
    verbosity.add_argument("--verbose", action="store_true", help="log debug details, Beam's included")
    return parser


def build_pipeline(
    pipeline: beam.Pipeline,
    files: list[InputFile],
    settings: Settings,
    output: str,
    started: datetime,
    progress_seconds: float = DEFAULT_INTERVAL_SECONDS,
) -> beam.PCollection:
    """Wire the whole job onto ``pipeline``; returns the PCollection of the committed manifest."""
    run_id = new_run_id()
    read = pipeline | "ReadCorpus" >> ReadCorpus(files, settings.input)
    chunked = read.records | "ChunkDocuments" >> ChunkDocuments(
        settings.chunking,
        settings.enrich,
        bucket_width=settings.output.bucket_width,
        fingerprint=settings.fingerprint,
        progress_seconds=progress_seconds,
    )
    rejects = (read[REJECTS_TAG], chunked.rejects) | "AllRejects" >> beam.Flatten()
    compression, max_rows = settings.output.compression, settings.output.max_rows_per_file
    staged_chunks = chunked.chunks | "WriteChunks" >> WriteChunks(output, run_id, compression, max_rows)
    staged_rejects = rejects | "WriteRejects" >> WriteRejects(output, run_id, compression, max_rows)
    manifest = {
        "summaries": chunked.summaries,
        "rejects": rejects,
        "reports": read[FILES_TAG],
    } | "Manifest" >> BuildManifest(
        settings=settings.to_dict(), fingerprint=settings.fingerprint, output=output, started=started
    )
    return {"chunks": staged_chunks, "rejects": staged_rejects, "manifest": manifest} | "Commit" >> CommitOutput(output)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the job; returns the manifest. Raises SettingsError/InputError/OutputError on bad usage."""
    args, beam_args = build_parser().parse_known_args(argv)
    _configure_logging(args.quiet, args.verbose)
    settings = load_settings(args.config)
    files = expand_inputs(args.input or [sample_corpus_glob()], output=args.output)
    prepare_output(args.output)
    log.info("reading %d file(s) into %s (settings %s)", len(files), args.output, settings.fingerprint)
    started = datetime.now(timezone.utc)
    pipeline = beam.Pipeline(options=_worker_logging(PipelineOptions(beam_args), args.quiet, args.verbose))
    build_pipeline(pipeline, files, settings, args.output, started, args.progress_seconds)
    pipeline.run().wait_until_finish()
    with fsspec.open(f"{args.output.rstrip('/')}/{MANIFEST_FILE}", "r", encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    check_accounting(manifest)
    if not args.quiet:
        write_stdout(render_summary(manifest) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    try:
        manifest = run(argv)
    except (SettingsError, InputError, OutputError) as error:
        print(f"zerda: error: {redact_url(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    if manifest["counts"]["documents_chunked"] == 0:
        print(f"zerda: error: {nothing_chunked(manifest)}", file=sys.stderr)
        return EXIT_NOTHING_CHUNKED
    return 0


def nothing_chunked(manifest: dict[str, Any]) -> str:
    """Why a run that read files gave no chunk at all, in words, with what to do about the usual cause."""
    counts = manifest["counts"]
    reasons = sorted(((n, reason) for reason, n in counts["rejects"].items() if n), reverse=True)
    because = ", ".join(f"{n:,} {reason}" for n, reason in reasons) or "no record"
    message = (
        f"read {counts['files_read']:,} file(s) and {counts['records_read']:,} record(s) but chunked none"
        f" (rejects: {because}); the rejects are in {manifest['output']['root'].rstrip('/')}/{REJECTS_DIR}/"
    )
    if counts["rejects"].get("not_text"):
        message += "; a file type zerda does not know can be read as text with input.formats in the config"
    return message


def _worker_logging(options: PipelineOptions, quiet: bool, verbose: bool) -> PipelineOptions:
    """On the DirectRunner, worker processes (``multi_processing``) log zerda's lines at the launcher's level.

    Beam's own worker logs are kept to errors unless ``--verbose``: otherwise every worker prints each
    start-up step and two harmless warnings, which the launcher relays a second time. Remote runners
    keep their own defaults; a ``--default_sdk_harness_log_level`` given on the command line leaves the
    workers as the user set them, and per-logger overrides given there win over zerda's. The options are
    read through Beam's own parsing, so ``--runner X`` counts like ``--runner=X``.
    """
    workers = options.view_as(WorkerOptions)
    runner = options.view_as(StandardOptions).runner
    if runner not in (None, "DirectRunner", "direct") or workers.default_sdk_harness_log_level is not None:
        return options
    workers.default_sdk_harness_log_level = "DEBUG" if verbose else "ERROR"
    ours = "ERROR" if quiet else "DEBUG" if verbose else "INFO"
    workers.sdk_harness_log_level_overrides = {
        "zerda": ours,
        "pipelines": ours,
        **(workers.sdk_harness_log_level_overrides or {}),
    }
    return options


def _configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(level=level, format=LOG_FORMAT, force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactCredentials())
    beam_level = logging.DEBUG if verbose else logging.ERROR if quiet else logging.WARNING
    for name in ("apache_beam", "root"):
        logging.getLogger(name).setLevel(beam_level)
    logging.getLogger("zerda").setLevel(level)
    logging.getLogger("pipelines").setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
