"""The re-chunking job: ``zerda-rechunk --input GLOB --output DIR [--config YAML] [Beam options]``.

With no ``--input`` it chunks the bundled sample corpus into ``./out/chunks``. Options this
parser does not know go to Beam (``--runner``, ``--direct_num_workers``, ...), so the same
``--config`` runs on the DirectRunner, Dataflow and Flink; an argument Beam does not know either
is refused (``pipelines.cli.options``). Bad arguments, settings, inputs or outputs, and an OUTPUT another
run holds, exit with code 2 before anything is written; Ctrl-C exits with 130, SIGTERM with 143, SIGHUP with
129, each with one line saying what OUTPUT holds then. Once the output is committed the exit code is 0, even
if the summary cannot be printed (a full disk or a closed stdout: one line on stderr says so).

    ReadCorpus ─► ChunkDocuments ─┬─► WriteChunks ──┐
         │                         └─► rejects ─────┼─► WriteRejects ─┐
         └─► rejects, file reports ─────────────────┴─► BuildManifest ─┴─► CommitOutput

ChunkDocuments runs inside ``pipelines.incremental.transform.ChunkIncrementally``: with ``--incremental`` the documents
unchanged since the previous output skip it and keep their rows; every run writes ``_index/`` and ``_changes/``.
"""

from __future__ import annotations

import pipelines.cli.quiet_beam  # noqa: F401  (first: imports Beam without its import-time warning)

# isort: split
import argparse
import atexit
import contextlib
import functools
import gc
import itertools
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import apache_beam as beam
import fsspec
import psutil
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, WorkerOptions
from apache_beam.runners.direct.direct_runner import DirectRunner
from apache_beam.runners.runner import PipelineResult, PipelineRunner

import zerda_core
from pipelines import redact
from pipelines.chunking import ChunkDocuments
from pipelines.cli.endpoints import check_endpoint, job_failure
from pipelines.cli.options import Once, new_pipeline, non_empty, parse_arguments, seconds
from pipelines.cli.process_exit import command
from pipelines.cli.summary import render_summary
from pipelines.cli.worker_log import worker_environment
from pipelines.errors import (
    InputError,
    JobError,
    OutputError,
    SettingsError,
    UsageError,
    explained_line,
    explains,
)
from pipelines.incremental.previous import Previous, planned_partitions, read_previous, unreadable_carry, without_carry
from pipelines.incremental.reports import PreviousReports
from pipelines.incremental.transform import ChunkIncrementally
from pipelines.input.expand import sample_corpus_glob
from pipelines.input.listing import listing_folder
from pipelines.input.match import JudgeInputs, MatchFailed, MatchInputs, check_inputs, may_spread
from pipelines.input.read import ReadCorpus
from pipelines.output.build_manifest import BuildManifest
from pipelines.output.commit import CommitOutput
from pipelines.output.iceberg import (
    DATA_DIR,
    CommitTable,
    TableTarget,
    WriteTableRejects,
    committed_manifest,
    conflict_line,
    discard_run,
    notice_orphans,
    open_table,
    remove_staging,
    summary_lines,
    table_after_stop,
    table_name,
)
from pipelines.output.iceberg_incremental import TableIncrementally, read_previous_table
from pipelines.output.layout import REJECTS_DIR
from pipelines.output.lease import best_effort
from pipelines.output.manifest import Manifest
from pipelines.output.write import (
    WriteInputs,
    WriteRejects,
    discard_staging,
    has_finished_output,
    hold_output,
    new_run_id,
    output_after_stop,
    prepare_output,
    stop_commit,
)
from pipelines.progress import DEFAULT_INTERVAL_SECONDS, LOG_FORMAT
from pipelines.redact import RedactCredentials, redact_url, remember_arguments
from pipelines.settings import Settings, load_settings
from pipelines.terminal_table import VisibleFormatter, visible, write_stdout

DEFAULT_OUTPUT = "out/chunks"
EXIT_USAGE = 2
EXIT_NOTHING_CHUNKED = 1
EXIT_JOB_FAILED = 1
# SIGHUP: the terminal or SSH session closed; it stops the run as SIGTERM does (129)
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)
_STOP_SIGNALS = {signal.SIGINT, *_TERMINATING}
log = logging.getLogger("zerda")


class Terminated(BaseException):
    """SIGTERM (a scheduler stopping the job, ``timeout``, ``kill``) or SIGHUP (a closed terminal) reached the
    launcher: the run stops as for Ctrl-C. A BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` swallows it."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signum


class Stopped(BaseException):
    """A stop signal ended the run while it held OUTPUT: the signal, and what OUTPUT holds now, in words."""

    def __init__(self, signum: int, output_state: str) -> None:
        super().__init__(signum, output_state)
        self.signum, self.output_state = signum, output_state


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerda-rechunk",
        allow_abbrev=False,  # "--out" is no option: every argument is spelt out or refused
        description="Re-chunk a text corpus by information density into a Parquet dataset "
        "partitioned by density bucket. Unknown options go to Apache Beam (e.g. --runner, "
        "--direct_num_workers, --direct_running_mode, --temp_location, --setup_file).",
    )
    parser.add_argument(
        "--input",
        action="append",
        type=non_empty,
        metavar="GLOB",
        help="corpus files: a glob, directory or file on any fsspec filesystem (repeatable); "
        "default: the bundled sample corpus",
    )
    parser.add_argument(
        "--output",
        action=Once,
        type=non_empty,
        default=DEFAULT_OUTPUT,
        metavar="DIR_OR_URL",
        help=f"a folder on any fsspec filesystem, or iceberg://NAMESPACE.TABLE for an Apache Iceberg table "
        f"(docs/iceberg.md); default: {DEFAULT_OUTPUT}",
    )
    parser.add_argument(
        "--config", action=Once, type=non_empty, metavar="YAML", help="reviewed run settings (default: the defaults)"
    )
    parser.add_argument(
        "--progress-seconds",
        action=Once,
        type=seconds,
        default=DEFAULT_INTERVAL_SECONDS,
        metavar="S",
        help=f"log progress every S seconds on each worker; 0 turns it off (default: {DEFAULT_INTERVAL_SECONDS:g})",
    )
    parser.add_argument(
        "--incremental",
        action="store_true",
        help="chunk only new and changed documents; unchanged ones keep their rows from the previous output "
        "in OUTPUT (same as output.incremental: true in the config)",
    )
    parser.add_argument("--version", action="version", version=f"zerda-rechunk {zerda_core.__version__}")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("--quiet", action="store_true", help="print only errors")
    verbosity.add_argument("--verbose", action="store_true", help="log debug details, Beam's included")
    return parser


def build_pipeline(
    pipeline: beam.Pipeline,
    inputs: Sequence[str],
    settings: Settings,
    output: str | TableTarget,
    started: datetime,
    progress_seconds: float = DEFAULT_INTERVAL_SECONDS,
    run_id: str | None = None,
    previous: Previous | None = None,
) -> beam.PCollection:
    """Wire the whole job onto ``pipeline``; returns the PCollection of the committed manifest.

    ``inputs`` are the patterns (globs, folders, files): the graph holds them, and the workers match them
    (:mod:`pipelines.input.match`), size and stamp the files, and tell those unchanged since ``previous`` from
    those to read, so that neither the graph nor the launch grows with the number of files.
    With a ``run_id`` (the entry point's, which holds OUTPUT's lease under it) the commit checks the lease. A
    :class:`~pipelines.output.iceberg.TableTarget` output is an Iceberg table: the same job, its chunks and
    rejects written as the tables' data files, its index and changes in the run's side folder, one commit of a
    snapshot each (``pipelines.output.iceberg``, ``pipelines.output.iceberg_incremental``).
    """
    table = output if isinstance(output, TableTarget) else None
    staging = output.side_location if isinstance(output, TableTarget) else output  # index, changes, listings
    lease = run_id  # a directory's commit checks the lease held under it
    run_id = run_id or new_run_id()
    previous = previous or Previous()
    matched = pipeline | "MatchInputs" >> MatchInputs(inputs)
    reports = None  # with --incremental: the previous reports, against which the files are judged
    if previous.carry:
        folder = listing_folder(staging, run_id, "previous_inputs")  # a format 1 manifest's, outside the graph
        reports = pipeline | "PreviousInputs" >> PreviousReports(previous, folder)
    judged = matched | "JudgeInputs" >> JudgeInputs(reports)  # unchanged files are not read: rows carried
    read = judged.to_read | "ReadCorpus" >> ReadCorpus((), settings.input, spread=may_spread(inputs))
    chunk_documents = ChunkDocuments.for_run(settings, progress_seconds)
    # incremental hook: unchanged documents bypass ChunkDocuments; index and changes files are committed too
    incremental = (ChunkIncrementally if table is None else functools.partial(TableIncrementally, table))(
        chunk_documents,
        previous,
        judged.unchanged,
        output=staging,
        run_id=run_id,
        settings=settings.output,
        fingerprint=settings.config_fingerprint,
        partitions=planned_partitions(previous),
    )
    chunked = read.records | "Incremental" >> incremental
    rejects = (read.rejects, chunked.rejects) | "AllRejects" >> beam.Flatten()
    compression, max_rows = settings.output.compression, settings.output.max_rows_per_file
    write_rejects: beam.PTransform
    if table is None:
        write_rejects = WriteRejects(staging, run_id, compression, max_rows)
    else:
        write_rejects = WriteTableRejects(table.reject_files, run_id, compression, max_rows, f"{DATA_DIR}/{run_id}")
    staged_rejects = rejects | "WriteRejects" >> write_rejects
    reports = read.files if chunked.reports is None else (read.files, chunked.reports) | "AllReports" >> beam.Flatten()
    counted = {"summaries": chunked.summaries, "totals": chunked.totals, "duplicates": chunked.duplicates}
    manifest = {**counted, "rejects": rejects, "reports": reports} | "Manifest" >> BuildManifest(
        settings=settings.to_dict(), fingerprint=settings.fingerprint, output=str(output), started=started
    )
    manifest = incremental.annotate(manifest, chunked.facts)
    inputs = reports | "WriteInputs" >> WriteInputs(staging, run_id, compression, max_rows)
    staged = {"chunks": chunked.chunk_files, "rejects": staged_rejects, "manifest": manifest, "inputs": inputs}
    staged |= {"index": chunked.index_files, "ids": chunked.id_files, "changes": chunked.change_files}
    commit = CommitOutput(staging, lease) if table is None else CommitTable(table, run_id)
    return staged | "Commit" >> commit


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the job; returns the manifest, with its per-file lists (``inputs``, ``output.files``) read from its
    tables. Raises UsageError/SettingsError/InputError/OutputError on bad usage.

    Every argument and setting is checked, and OUTPUT's lease taken, before anything in OUTPUT changes;
    the previous output stays finished until this run's commit replaces it.
    """
    remember_arguments(sys.argv[1:] if argv is None else argv)  # before any parser can echo a credential
    args, options, runner = parse_arguments(build_parser(), argv)
    _configure_logging(args.quiet, args.verbose)
    worker_levels = _worker_logging(options, args.quiet, args.verbose)
    pipeline = new_pipeline(options, runner)
    check_endpoint(runner, options)
    settings = load_settings(args.config)
    table = table_name(None if args.output == DEFAULT_OUTPUT else args.output, settings.output.table)
    if table is not None:
        return _run_into_table(table, args, settings, pipeline, runner, options, worker_levels)
    inputs = args.input or [sample_corpus_glob()]
    check_inputs(inputs, output=args.output)
    prepare_output(args.output)
    run_id = new_run_id()
    with hold_output(args.output, run_id), _stops_said(args.output, run_id) as stop:
        # the previous output is read under the lease: no run can change it
        stop.had_finished_output = has_finished_output(args.output)
        incremental = args.incremental or settings.output.incremental
        previous = read_previous(args.output, settings.fingerprint, incremental)
        _say_previous(previous, incremental)
        log.info("reading %s into %s (settings %s)", _said_inputs(inputs), args.output, settings.fingerprint)
        started = stop.started = datetime.now(timezone.utc)

        def attempt(pipeline: beam.Pipeline, previous: Previous) -> None:
            build_pipeline(pipeline, inputs, settings, args.output, started, args.progress_seconds, run_id, previous)
            _run_to_the_end(pipeline, runner, options)

        with worker_environment(worker_levels):
            _run_or_rerun_in_full(
                attempt, pipeline, previous, lambda: discard_staging(args.output, run_id), options, runner
            )
    manifest = Manifest.load_url(args.output)
    if not args.quiet and not write_stdout(render_summary(manifest) + "\n"):
        print("zerda: the output is committed; its summary could not be printed", file=sys.stderr)
    return manifest.with_lists()


def _say_previous(previous: Previous, incremental: bool) -> None:
    """Log, for an incremental run, whether it carries rows and why. How many files it does not read is known
    once the workers have matched them: the manifest's ``changes.files_unchanged`` and the summary say it."""
    if incremental:
        log.info("%s", previous.reason)


def _said_inputs(inputs: Sequence[str]) -> str:
    """The inputs in a log line: the files they match are counted on the workers, in the manifest."""
    return "the files of " + (f"{len(inputs)} inputs" if len(inputs) > 1 else "1 input")


def _run_or_rerun_in_full(
    attempt: Callable[[beam.Pipeline, Previous], None],
    pipeline: beam.Pipeline,
    previous: Previous,
    discard: Callable[[], None],
    options: PipelineOptions,
    runner: PipelineRunner,
) -> None:
    """``attempt`` the run on ``pipeline``; if it failed on a previous chunk or index file it could not read
    (:func:`~pipelines.incremental.previous.unreadable_carry`), ``discard`` what it wrote and attempt it again in full
    on a new pipeline, which reads no previous chunk file."""
    try:
        attempt(pipeline, previous)
    except Exception as error:
        why = unreadable_carry(error) if previous.carry or previous.index_partitions else None
        if why is None:
            raise
        log.warning("%s: running again in full, which reads no previous chunk file", why)
        best_effort(discard, "delete the failed attempt's files")
        attempt(new_pipeline(options, runner), without_carry(previous, why))


def _run_into_table(
    table: str,
    args: argparse.Namespace,
    settings: Settings,
    pipeline: beam.Pipeline,
    runner: PipelineRunner,
    options: PipelineOptions,
    worker_levels: tuple[str, str] | None,
) -> dict[str, Any]:
    """:func:`run` into an Iceberg table: the tables are opened (created if missing) and the previous snapshot
    read before anything is written; a run that fails or is stopped before its commit leaves them as they were,
    its files deleted."""
    inputs = args.input or [sample_corpus_glob()]
    check_inputs(inputs)
    target = open_table(table, settings.output.catalog)
    notice_orphans(target)
    incremental = args.incremental or settings.output.incremental
    previous, snapshot_id = read_previous_table(target, settings.fingerprint, incremental)
    target = replace(target, snapshot_id=snapshot_id)
    _say_previous(previous, incremental)
    run_id = new_run_id()
    log.info("reading %s into Iceberg table %s (settings %s)", _said_inputs(inputs), table, settings.fingerprint)
    started = datetime.now(timezone.utc)

    def attempt(pipeline: beam.Pipeline, previous: Previous) -> None:
        build_pipeline(pipeline, inputs, settings, target, started, args.progress_seconds, run_id, previous)
        _run_to_the_end(pipeline, runner, options)

    try:
        with worker_environment(worker_levels):
            _run_or_rerun_in_full(attempt, pipeline, previous, lambda: discard_run(target, run_id), options, runner)
    except (KeyboardInterrupt, Terminated) as stop:
        stop_commit(run_id)
        best_effort(lambda: discard_run(target, run_id), "delete this run's data files")
        signum = stop.signum if isinstance(stop, Terminated) else signal.SIGINT
        raise Stopped(signum, table_after_stop(target, run_id)) from None
    except BaseException as error:
        best_effort(lambda: discard_run(target, run_id), "delete this run's data files")
        if (conflict := conflict_line(error)) is not None:  # another run's snapshot won: exit 2, naming it
            raise OutputError(conflict) from error
        raise
    best_effort(lambda: remove_staging(target, run_id), "delete this run's staging")  # once the job is over
    manifest = committed_manifest(target, run_id)
    if not args.quiet and not write_stdout(render_summary(Manifest(manifest), summary_lines(target, manifest)) + "\n"):
        print("zerda: the table is committed; its summary could not be printed", file=sys.stderr)
    return manifest


class _StopState:
    """What a stop signal's line needs to say what OUTPUT holds: whether it had a finished output at launch,
    and when this run started (its manifest says so once committed)."""

    had_finished_output = True
    started: datetime | None = None


@contextlib.contextmanager
def _stops_said(output: str, run_id: str) -> Iterator[_StopState]:
    """Turn a stop signal while the run holds OUTPUT into :class:`Stopped`, saying what OUTPUT holds: the run's
    commit is stopped first (its workers are gone already), so the answer cannot change after it is given."""
    state = _StopState()
    try:
        yield state
    except (KeyboardInterrupt, Terminated) as stop:
        signum = stop.signum if isinstance(stop, Terminated) else signal.SIGINT
        stop_commit(run_id)
        if state.started is None:
            said = "OUTPUT keeps its previous output" if state.had_finished_output else "nothing was committed"
        else:
            said = output_after_stop(output, state.started, state.had_finished_output)
        raise Stopped(signum, said) from None


def main(argv: list[str] | None = None) -> int:
    """The command line: the exit code of one run (a library caller wants :func:`run`)."""
    redact.install()  # the command's process, not an import of zerda: a library caller's hooks stay theirs
    atexit.unregister(gc.freeze)  # once, however often main runs in one process
    atexit.register(gc.freeze)  # the heap left at exit is freed with the process, not collected first
    try:
        manifest = run(argv)
    except (UsageError, SettingsError, InputError, OutputError, JobError) as error:
        print(visible(f"zerda: error: {redact_url(str(error))}"), file=sys.stderr)
        return EXIT_JOB_FAILED if isinstance(error, JobError) else EXIT_USAGE
    except (KeyboardInterrupt, Terminated, Stopped) as stop:
        logging.disable(logging.NOTSET)
        signum = signal.SIGINT if isinstance(stop, KeyboardInterrupt) else stop.signum
        said = stop.output_state if isinstance(stop, Stopped) else "OUTPUT is as it was"
        stopped = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
        print(f"zerda: {stopped}; {said}", file=sys.stderr)
        return 128 + signum  # as a shell reports a command a signal stopped: 130 for Ctrl-C, 143 for SIGTERM
    if manifest["counts"]["documents_chunked"] == 0:
        print(visible(f"zerda: error: {nothing_chunked(manifest)}"), file=sys.stderr)
        return EXIT_NOTHING_CHUNKED
    return 0


def _run_to_the_end(pipeline: beam.Pipeline, runner: PipelineRunner, options: PipelineOptions) -> None:
    """Run the pipeline and wait for it; stopped by Ctrl-C, SIGTERM or SIGHUP (see ``_interruptible``), a job on a
    cluster is cancelled, so that it does not go on running without its launcher (and its lease). A job on
    a cluster that cannot start or fails is a JobError: the launcher's traceback would only show Beam's
    client code (the DirectRunner's failures keep theirs, with the worker's traceback in them, but for a
    failure that explains itself: :func:`~pipelines.errors.explained_line`)."""
    results: list[PipelineResult] = []
    local = isinstance(runner, DirectRunner)

    def work() -> None:
        results.append(pipeline.run())
        results[0].wait_until_finish()

    try:
        _interruptible(work, local)
    except (KeyboardInterrupt, Terminated):
        if results and not local:
            try:
                results[0].cancel()
            except Exception as err:  # the job server may be gone already (Beam stops it on SIGINT)
                log.warning("could not cancel the job (cancel it on the cluster): %s", err)
        raise
    except Exception as err:
        explained = explained_line(err)
        if explained is not None and _input_unlisted(err):  # a usage error found by a worker: exit 2
            raise InputError(explained) from err
        if explained is not None:  # the failure says all an operator needs: one line, not the traceback around it
            raise JobError(explained) from err
        if local:
            raise
        raise JobError(job_failure(err, runner, options)) from err


def _input_unlisted(error: BaseException) -> bool:
    """Whether a worker could not list an input (:class:`MatchFailed`), from the chain or the text the failure
    reached the launcher as (its class's name is its code)."""
    return isinstance(explains(error), MatchFailed) or f"{MatchFailed.__name__}: " in str(error)


_POLL_SECONDS = 0.05  # how long the end of the work may wait to be seen: a run pays half of it on average


def _interruptible(work: Callable[[], object], local: bool) -> None:
    """Run ``work`` so that Ctrl-C, SIGTERM or SIGHUP reaches the launcher only: it kills the workers, then
    raises KeyboardInterrupt (SIGINT) or Terminated (the others), and the run's staging and lease go with it.

    The thread and signal masks below are for a ``local`` runner only (the DirectRunner, whose worker
    processes share the terminal). Other runners run ``work`` on the main thread, with only SIGTERM and SIGHUP
    handlers that raise Terminated: their workers are elsewhere, and a portable runner's job server
    installs its own SIGINT handler, which Python allows on the main thread only.

    Ctrl-C signals the terminal's whole process group, and each Beam worker process would print its own
    traceback. So while ``work`` runs (in a thread), SIGINT is ignored and blocked: worker processes
    inherit the ignored disposition across exec, so Python never turns it into KeyboardInterrupt in them,
    while the launcher still receives it with ``sigtimedwait`` (Linux queues a blocked signal even when it
    is ignored). SIGTERM is treated alike: a scheduler may send it to every process of the job (systemd
    stops a whole cgroup), and the workers, ignoring it, leave the launcher to end them; so is SIGHUP, which
    a closed terminal or SSH session sends to every process of the job (a worker it reached prints gRPC tracebacks).
    """
    if threading.current_thread() is not threading.main_thread():
        work()
        return
    if not local:
        previous_handlers = {signum: signal.signal(signum, _raise_terminated) for signum in _TERMINATING}
        try:
            work()
        finally:
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)
        return
    failure: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as err:  # handed to the main thread below
            failure.append(err)

    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in _STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        thread = threading.Thread(target=target, name="zerda-pipeline", daemon=True)
        thread.start()
        received = None
        while thread.is_alive() and received is None:
            info = signal.sigtimedwait(_STOP_SIGNALS, _POLL_SECONDS)
            # only a stop signal stops: a debugger or profiler attaching (ptrace) can wake the wait with a number
            # that is no signal at all
            received = info.si_signo if info is not None and info.si_signo in _STOP_SIGNALS else None
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received is not None:
        threading.excepthook = lambda _: None  # the runner's threads fail and log as their workers go: not news
        logging.disable(logging.CRITICAL)
        _end_worker_processes()
        raise KeyboardInterrupt if received == signal.SIGINT else Terminated(received)
    if failure:
        raise failure[0]


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def _end_worker_processes() -> None:
    """Kill the worker processes the runner started (``multi_processing``): they must not outlive the launcher.

    SIGKILL, not SIGTERM: a worker told to stop logs its broken connection as a traceback, and its half
    written staged files are deleted with the run's staging anyway.
    """
    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(children, timeout=10)


def nothing_chunked(manifest: dict[str, Any]) -> str:
    """Why a run that read files gave no chunk at all, in words, with what to do about the usual cause."""
    counts = manifest["counts"]
    reasons = sorted(((n, reason) for reason, n in counts["rejects"].items() if n), reverse=True)
    because = ", ".join(f"{n:,} {reason}" for n, reason in reasons) or "no record"
    output = manifest["output"]
    where = output.get("rejects_table") or f"{output['root'].rstrip('/')}/{REJECTS_DIR}/"  # a table's, or a folder
    message = (
        f"read {counts['files_read']:,} file(s) and {counts['records_read']:,} record(s) but chunked none"
        f" (rejects: {because}); the rejects are in {where}"
    )
    if counts["rejects"].get("not_text"):
        message += "".join(f"; {hint}" for hint in _not_text_hints(manifest))
    return message


# What to do about a not_text reject, by how the reader's message starts (pipelines.input.source, .context).
_NOT_TEXT_HINTS = {
    "not a corpus file type": (
        "a file type zerda does not know can be read as text with input.formats in the config"
        " (input.default_format: text for files without a suffix)"
    ),
    "UTF-16 text": "UTF-16 file(s): convert them to UTF-8 (iconv -f UTF-16 -t UTF-8)",
    "UTF-32 text": "UTF-32 file(s): convert them to UTF-8 (iconv -f UTF-32 -t UTF-8)",
    "binary content": "binary file(s) matched the input (NUL bytes near their start): narrow --input to the corpus",
    "NUL character": "documents with NUL characters (U+0000) are not text: remove them from the corpus",
}
_HINT_SCAN_ROWS = 1_000_000  # not_text rejects read at most to find the causes: short on a huge corpus


def _not_text_hints(manifest: dict[str, Any]) -> list[str]:
    """The hints for the causes of the run's ``not_text`` rejects, read from its committed reject files
    (none if they cannot be read: the message then only points at them)."""
    found: set[str] = set()
    try:
        for message in itertools.islice(_not_text_messages(manifest), _HINT_SCAN_ROWS):
            found |= {start for start in _NOT_TEXT_HINTS if message.startswith(start)}
            if len(found) == len(_NOT_TEXT_HINTS):
                break
    except Exception as error:  # only a hint is lost: the error line must still be printed
        log.debug("could not read the rejects for hints: %s", redact_url(str(error)))
    return [hint for start, hint in _NOT_TEXT_HINTS.items() if start in found]


def _not_text_messages(manifest: dict[str, Any]) -> Iterator[str]:
    if "table" in manifest["output"]:  # an Iceberg table's rejects are in its rejects table, not files
        return
    root = manifest["output"]["root"].rstrip("/")
    for entry in Manifest.load_url(root).files or ():
        if entry["path"].startswith(f"{REJECTS_DIR}/"):
            with fsspec.open(f"{root}/{entry['path']}", "rb") as f:
                for batch in pq.ParquetFile(f).iter_batches(columns=["reason", "message"]):
                    reasons, messages = (column.to_pylist() for column in batch.columns)
                    yield from (m for r, m in zip(reasons, messages, strict=True) if r == "not_text")


def _worker_logging(options: PipelineOptions, quiet: bool, verbose: bool) -> tuple[str, str] | None:
    """On the DirectRunner, worker processes (``multi_processing``) log zerda's lines at the launcher's level.

    Beam's own worker logs are kept to errors unless ``--verbose``: otherwise every worker prints each
    start-up step and two harmless warnings, which the launcher relays a second time. Remote runners
    keep their own defaults; a ``--default_sdk_harness_log_level`` given on the command line leaves the
    workers as the user set them, and per-logger overrides given there win over zerda's. The options are
    read through Beam's own parsing, so ``--runner X`` counts like ``--runner=X``. Sets ``options``; returns
    (Beam's level, zerda's level) for the workers' own stderr (``pipelines.cli.worker_log``), or None.
    """
    workers = options.view_as(WorkerOptions)
    runner = options.view_as(StandardOptions).runner
    if runner not in (None, "DirectRunner", "direct") or workers.default_sdk_harness_log_level is not None:
        return None
    workers.default_sdk_harness_log_level = "DEBUG" if verbose else "ERROR"
    ours = "ERROR" if quiet else "DEBUG" if verbose else "INFO"
    workers.sdk_harness_log_level_overrides = {
        "zerda": ours,
        "pipelines": ours,
        **(workers.sdk_harness_log_level_overrides or {}),
    }
    return workers.default_sdk_harness_log_level, ours


def _configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(level=level, format=LOG_FORMAT, force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactCredentials())
        handler.setFormatter(VisibleFormatter(LOG_FORMAT))
    beam_level = logging.DEBUG if verbose else logging.ERROR if quiet else logging.WARNING
    for name in ("apache_beam", "root"):
        logging.getLogger(name).setLevel(beam_level)
    logging.getLogger("zerda").setLevel(level)
    logging.getLogger("pipelines").setLevel(level)
    logging.getLogger("apache_beam.runners.common").addFilter(_not_said_twice)  # once, however often run is


def _not_said_twice(record: logging.LogRecord) -> bool:
    """Beam logs a step's failure with its traceback before the job fails: not an input a worker could not list
    (:class:`MatchFailed`), a usage error that the launcher's one line says."""
    return not (record.exc_info and isinstance(record.exc_info[1], MatchFailed))


cli = command(main)  # zerda-rechunk

if __name__ == "__main__":
    cli()
