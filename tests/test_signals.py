"""Issue 24, signals and streams: a stop signal says what OUTPUT truly holds at that moment of the commit; SIGHUP
stops a run as SIGTERM does; a committed run exits 0 whatever happens to its stdout.

Real subprocesses and real signals. The moment is fixed by pausing the commit from outside the product code
(``tests/fault_injection``: ``ZERDA_PAUSE_COMMIT`` makes it create a marker file, then wait): the test waits
for the marker, then signals the launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.common import MULTI_PROCESS, REPO
from tests.output_checks import read_chunks, read_manifest

FAULTS = REPO / "tests" / "fault_injection"
INCOMPLETE = (
    "during the commit: OUTPUT is incomplete (its previous output partly replaced, no _SUCCESS: do not read it); "
    "the next run replaces it whole (an --incremental one runs in full)"
)
PHASES = {
    "before": "OUTPUT keeps its previous output",
    "during": INCOMPLETE,
    "after": "after the commit: OUTPUT holds this run's complete output",
}


def snapshot(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in output.rglob("*") if p.is_file()}


def rechunk(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@contextlib.contextmanager
def paused_job(argv: list[str], phase: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """The job in its own session, its commit paused at ``phase``: yields (the process, its stderr file) once
    the commit waits there; the whole session is killed at the end whatever happened."""
    marker, log = tmp_path / f"paused-{phase}", tmp_path / f"stderr-{phase}.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FAULTS)])}
    env["ZERDA_PAUSE_COMMIT"] = f"{phase}@{marker}"
    job = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the commit never reached {phase} (rc {job.poll()}): {log.read_text()[-3000:]}"
        yield job, log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)


def last_line(log: Path) -> str:
    return log.read_text(errors="replace").strip().splitlines()[-1]


@pytest.fixture
def previous(tmp_path: Path) -> Path:
    """An OUTPUT holding a finished previous output (the bundled sample corpus)."""
    output = tmp_path / "out"
    first = rechunk(["--output", str(output), "--quiet"])
    assert first.returncode == 0, first.stderr[-3000:]
    return output


@pytest.mark.parametrize(
    ("phase", "mode"),
    [
        ("before", "multi_processing"),
        ("during", "multi_processing"),
        ("after", "multi_processing"),
        ("before", "in_memory"),  # the commit runs in the launcher: stopped between its steps
        ("during", "in_memory"),
        ("after", "in_memory"),
    ],
)
def test_sigterm_says_what_output_holds_at_that_point_of_the_commit(
    phase: str, mode: str, previous: Path, tmp_path: Path
) -> None:
    before = snapshot(previous)
    argv = ["--output", str(previous), "--quiet", *(MULTI_PROCESS if mode == "multi_processing" else [])]
    with paused_job(argv, phase, tmp_path) as (job, log):
        workers = psutil.Process(job.pid).children(recursive=True)
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 143
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, f"worker processes outlived the launcher: {alive}"
    assert last_line(log) == f"zerda: terminated (SIGTERM); {PHASES[phase]}", log.read_text()[-3000:]
    assert "Traceback" not in log.read_text(errors="replace")
    success = (previous / "_SUCCESS").exists()
    if phase == "before":
        assert snapshot(previous) == before  # untouched; no lease or staging left
    elif phase == "during":
        assert not success and not (previous / "_manifest.json").exists()
        assert not list(previous.glob("density_bucket=*/*.parquet"))  # the previous dataset is gone
    else:
        manifest = read_manifest(previous)
        assert success and read_chunks(previous).num_rows == manifest["counts"]["chunks"]
        assert snapshot(previous) != before
    if phase == "during":  # what the line promises: the next run replaces it whole
        again = rechunk(["--output", str(previous), "--incremental"])
        assert again.returncode == 0, again.stderr[-3000:]
        assert "no committed previous output" in again.stderr
        manifest = read_manifest(previous)
        assert read_chunks(previous).num_rows == manifest["counts"]["chunks"] > 0


def test_a_stop_with_no_previous_output_says_none_is_finished(tmp_path: Path) -> None:
    output = tmp_path / "new"
    with paused_job(["--output", str(output), "--quiet", *MULTI_PROCESS], "during", tmp_path) as (job, log):
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 143
    assert last_line(log) == "zerda: terminated (SIGTERM); OUTPUT has no finished output (no _SUCCESS); " + (
        "the next run writes it whole"
    )


@pytest.mark.parametrize("mode", ["multi_processing", "in_memory"])
def test_sighup_to_the_whole_session_stops_like_sigterm_in_one_line(mode: str, previous: Path, tmp_path: Path) -> None:
    """A closed terminal or SSH session hangs up every process of the job: the workers ignore it, the launcher
    ends them and says so in one line, exit code 129."""
    before = snapshot(previous)
    argv = ["--output", str(previous), *(MULTI_PROCESS if mode == "multi_processing" else [])]
    with paused_job(argv, "before", tmp_path) as (job, log):
        workers = psutil.Process(job.pid).children(recursive=True)
        assert workers or mode == "in_memory"
        os.killpg(job.pid, signal.SIGHUP)
        assert job.wait(120) == 128 + signal.SIGHUP
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, f"worker processes outlived the launcher: {alive}"
    err = log.read_text(errors="replace")
    assert last_line(log) == "zerda: terminated (SIGHUP); OUTPUT keeps its previous output", err[-3000:]
    assert "Traceback" not in err and "grpc" not in err.lower(), err[-3000:]
    assert snapshot(previous) == before


ARABIC = "يجري النهر من التلال إلى البحر. يستخدم المزارعون ماءه في الصيف. " * 4


@pytest.fixture(scope="module")
def arabic_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = tmp_path_factory.mktemp("signals") / "نصوص"
    corpus.mkdir()
    (corpus / "نهر.jsonl").write_text(json.dumps({"id": "نهر-1", "text": ARABIC}, ensure_ascii=False) + "\n")
    return corpus


@pytest.mark.parametrize("stdout", ["/dev/full", "closed"])
def test_a_failing_stdout_after_the_commit_exits_0_with_one_line(
    stdout: str, arabic_corpus: Path, tmp_path: Path
) -> None:
    output = tmp_path / "مخرجات"
    with open("/dev/full", "w") as full:
        run = subprocess.run(
            [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(arabic_corpus), "--output", str(output)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=full if stdout == "/dev/full" else None,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
            preexec_fn=None if stdout == "/dev/full" else lambda: os.close(1),  # started as with ``>&-``
        )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1] == "zerda: the output is committed; its summary could not be printed"
    assert (output / "_SUCCESS").exists() and read_chunks(output).num_rows > 0


def test_an_ascii_only_stdout_gets_the_summary_with_escapes(arabic_corpus: Path, tmp_path: Path) -> None:
    output = tmp_path / "مخرجات"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    env.pop("LANG", None)
    run = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(arabic_corpus), "--output", str(output)],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    assert b"Traceback" not in run.stderr
    assert run.stdout.isascii() and b"\\u0645\\u062e\\u0631\\u062c\\u0627\\u062a" in run.stdout  # the output's name
    assert (output / "_SUCCESS").exists()


@pytest.mark.parametrize(
    ("flag", "what"), [([], "the report"), (["--verify"], "the verdict")], ids=["report", "verify"]
)
def test_the_report_on_a_full_stdout_fails_in_one_line(previous: Path, flag: list[str], what: str) -> None:
    """The report (or --verify's verdict) is the command's whole output: not printed, the command failed."""
    with open("/dev/full", "w") as full:
        run = subprocess.run(
            [sys.executable, "-m", "pipelines.report", *flag, str(previous)],
            cwd=REPO,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert run.returncode == 1 and run.stderr == f"zerda-report: {what} could not be written to stdout\n", run.stderr


def test_a_stopped_commit_in_this_process_takes_no_further_step_and_a_step_under_way_finishes_first() -> None:
    """In memory the commit runs in the launcher: the stop waits for the step under way (removing ``_SUCCESS``,
    writing it), so what the line says cannot change after it is said; later steps never run."""
    from pipelines.output import write

    run_id, steps = write.new_run_id(), []
    entered, release = threading.Event(), threading.Event()

    def slow_step() -> None:
        entered.set()
        release.wait(10)
        steps.append("retract")

    under_way = threading.Thread(target=write._unless_stopped, args=(run_id, slow_step))
    under_way.start()
    entered.wait(10)
    stopping = threading.Thread(target=write.stop_commit, args=(run_id,))
    stopping.start()
    stopping.join(0.3)
    assert stopping.is_alive()  # waits for the step under way
    release.set()
    stopping.join(10)
    under_way.join(10)
    assert steps == ["retract"]
    with pytest.raises(write.CommitStopped):
        write._unless_stopped(run_id, lambda: steps.append("publish"))
    assert steps == ["retract"]
    write._unless_stopped(write.new_run_id(), lambda: steps.append("another run's"))  # only this run is stopped


def test_a_wake_that_is_no_stop_signal_does_not_stop_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A profiler or debugger attaching to the launcher (py-spy, gdb: ptrace) can wake ``sigtimedwait`` with
    a number that is no signal: the run goes on (it stopped, then failed on ``signal.Signals(number)``)."""
    import pipelines.cli.rechunk as rechunk

    real = signal.sigtimedwait
    woken: list[int] = []

    class _Bogus:
        si_signo = 173502200

    def wait(signals: object, timeout: float) -> object:
        if not woken:
            woken.append(1)
            return _Bogus()
        return real(signals, timeout)  # type: ignore[arg-type]

    monkeypatch.setattr(signal, "sigtimedwait", wait)
    done: list[str] = []
    rechunk._interruptible(lambda: (time.sleep(0.3), done.append("finished")), local=True)
    assert woken and done == ["finished"]


def test_a_stopped_runs_writers_begin_no_file_while_another_runs_do(tmp_path: Path) -> None:
    """A stopped in-memory run's pipeline thread cannot be killed and goes on for a while: its writers must begin
    no file (nor folder) once the launcher has deleted the run's files, or they would be left behind."""
    import pyarrow as pa

    from pipelines.errors import RunStopped
    from pipelines.output import write

    stopped, running = write.new_run_id(), write.new_run_id()
    table = pa.table({"x": [1, 2]})
    write.stop_commit(stopped)
    with pytest.raises(RunStopped, match=f"run {stopped} was stopped: it begins no new file"):
        write.stage_table(str(tmp_path), stopped, "d", table, ".pq", "zstd")
    assert not list(tmp_path.iterdir())
    staged = write.stage_table(str(tmp_path), running, "d", table, ".pq", "zstd")
    assert staged.rows == 2 and (tmp_path / staged.path).is_file()
