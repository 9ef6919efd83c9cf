"""Operators' mistakes and concurrency (issue 9): misspelt or invalid options, two jobs into one OUTPUT,
Ctrl-C, a commit that finds files missing, foreign or short, and dead runs' leases and staging.

Faults are made from the tests only: real processes signalled or run side by side, staged files
removed or truncated by a step the test puts before the commit, leases planted as a dead run leaves them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import pickle
import random
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import fsspec
import psutil
import pytest
from apache_beam.options.pipeline_options import DirectOptions, WorkerOptions

import pipelines.output.commit as commit_module
from pipelines.cli.options import parse_arguments
from pipelines.cli.rechunk import build_parser, main
from pipelines.errors import OutputError, UsageError
from pipelines.output.lease import LEASE_FILE, STALE_SECONDS, WRITING_SECONDS, Lease, best_effort, check_held
from pipelines.output.write import StagedFile, hold_output, new_run_id
from tests.common import MULTI_PROCESS, REPO
from tests.output_checks import read_chunks, read_manifest
from tests.test_reliability_faults import write_big_corpus
from tests.test_write import corpus, run_write

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]

DATA_DIR = REPO / "tests" / "data"


_FINISHED: list[Path] = []  # this process's one real finished output, made on first use


def _finished(out: Path) -> Path:
    """A finished output of the sample corpus at ``out``: the job runs once per test process, into a folder of
    its own, and each caller gets a copy (``cp -a``: every file and its times; the manifest names where the
    run wrote it, as after an operator moved an output). The sample run was a second of CPU for each of
    some twenty tests that only need a finished output to refuse, check or replace."""
    if not _FINISHED:
        made = Path(tempfile.mkdtemp(prefix="zerda-finished-")) / "out"
        atexit.register(shutil.rmtree, made.parent, True)
        assert main(["--output", str(made), "--quiet"]) == 0
        _FINISHED.append(made)
    shutil.copytree(_FINISHED[0], out, symlinks=True)
    assert (out / "_SUCCESS").exists()
    return out


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    """A finished output of the sample corpus, to check that bad usage leaves it whole."""
    return _finished(tmp_path / "out")


@pytest.fixture(scope="module")
def finished_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished output for the tests that must leave it as they found it (each compares its own
    snapshot before and after, so one that changed it fails itself)."""
    return _finished(tmp_path_factory.mktemp("finished") / "out")


def _snapshot(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in output.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--inptu", "x"], "unknown option --inptu (did you mean --input?)"),
        (["--ouput", "elsewhere"], "unknown option --ouput (did you mean --output?)"),
        (["--direct_num_worker=2"], "did you mean --direct_num_workers?"),
        (["--out", "elsewhere"], "unknown option --out"),  # no abbreviation is taken as an option
        (["--input", str(DATA_DIR / "english_prose.txt"), str(DATA_DIR / "guide.md")], "unexpected argument"),
        (["--progress-secs=1"], "did you mean --progress-seconds?"),
        (["-x"], "unknown option -x"),
        (["--runner", "NoSuch"], "Unexpected pipeline runner: NoSuch"),
        (["--runner=NoSuchRunner"], "Unexpected pipeline runner"),
        (["--direct_num_workers=abc"], "invalid int value: 'abc'"),
        (["--direct_running_mode=bogus"], "invalid choice: 'bogus'"),
        (["--direct_num_workers"], "expected one argument"),
        (["--progress-seconds", "soon"], "must be a number of seconds >= 0, got 'soon'"),
        (["--quiet", "--verbose"], "not allowed with argument"),
        (["--output", "elsewhere"], "--output given twice"),  # not: the last one wins
        (["--config", "a.yaml", "--config", "b.yaml"], "--config given twice"),
        # A Beam option of one value with two values: Beam took the last one (Flink here, which then fetched a jar)
        (["--runner", "DirectRunner", "--runner=FlinkRunner"], "--runner given twice ('DirectRunner', then 'Flink"),
        (["--direct_num_workers=2", "--direct_num_workers", "3"], "--direct_num_workers given twice (2, then 3)"),
        (["--output", ""], "argument --output: must not be empty"),  # "" would be the cwd
        (["--input", ""], "argument --input: must not be empty"),
        (["--input", " "], "argument --input: must not be empty"),
        (["--config", ""], "argument --config: must not be empty"),
        (["--direct_num_workers=-3"], "--direct_num_workers must be >= 0"),
        (["--runner=PortableRunner", "--job_endpoint=127.0.0.1:9", "--job_server_timeout=-5"], "must be a positive"),
        (["--direct_num_workers", "-1", "--direct_running_mode=multi_threading"], "--direct_num_workers must be"),
        (["--progress-seconds=-1"], "must be a number of seconds >= 0"),
        (["--progress-seconds=inf"], "must be a number of seconds >= 0"),
        (["--streaming"], "--streaming: zerda is a batch job"),
        (["--runner=FlinkRunner", "--streaming"], "--streaming: zerda is a batch job"),
    ],
)
def test_an_argument_nobody_understands_exits_2_in_one_line_and_touches_nothing(
    args: list[str], message: str, finished_once: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(finished_once)
    assert "_SUCCESS" in before and "_manifest.json" in before
    capsys.readouterr()
    assert main(["--output", str(finished_once), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert _snapshot(finished_once) == before  # _SUCCESS, manifest and rows as they were; no lease, no staging


@pytest.mark.parametrize(
    "beam_args",
    [
        ["--runner", "DirectRunner", "--direct_num_workers", "2", "--direct_running_mode=multi_processing"],
        ["--runner=FlinkRunner", "--flink_master=localhost:8081", "--environment_type=LOOPBACK", "--parallelism=2"],
        ["--runner", "PortableRunner", "--job_endpoint", "localhost:8099", "--environment_type", "DOCKER"],
        [
            "--environment_config=apache/beam_python3.11_sdk:2.77.0",
            "--job_server_timeout=30",
            "--sdk_worker_parallelism=1",
        ],
        ["--setup_file", "./setup.py", "--temp_location", "gs://b/tmp", "--project", "p", "--region", "europe-west1"],
        ["--staging_location=gs://b/staging", "--service_account_email=a@b.iam", "--max_num_workers=10"],
        ["--experiments=use_runner_v2", "--experiments", "shuffle_mode=service", "--save_main_session"],
        ["--direct_num_workers=2", "--direct_num_workers", "2", "--runner", "DirectRunner", "--runner=DirectRunner"],
        ["--default_sdk_harness_log_level=INFO", "--requirements_file=req.txt", "--s3_endpoint_url=http://x"],
        ["--runner=SparkRunner", "--spark_master_url=local[2]", "--spark_version=3"],
        ["--runner=PrismRunner", "--prism_location=/bin/prism"],
    ],
)
def test_every_beam_option_of_any_runner_is_understood(beam_args: list[str]) -> None:
    args, options, _ = parse_arguments(build_parser(), ["--output", "o", *beam_args])
    assert args.output == "o"
    assert options.get_all_options(retain_unknown_options=True)  # Beam itself sees no unknown one


def test_beams_option_views_are_made_once_and_share_their_values() -> None:
    """Views are kept (Beam asks for hundreds while it builds the pipeline); a value set through one is seen
    through every other, by Beam's own collection of options and after pickling, as with Beam's views."""
    _, options, _ = parse_arguments(build_parser(), ["--output", "o", "--direct_num_workers=2"])
    assert options.view_as(DirectOptions) is options.view_as(DirectOptions)
    assert options.view_as(DirectOptions).direct_num_workers == 2
    options.view_as(WorkerOptions).default_sdk_harness_log_level = "ERROR"
    assert options.view_as(WorkerOptions).default_sdk_harness_log_level == "ERROR"
    assert options.get_all_options()["default_sdk_harness_log_level"] == "ERROR"
    copy = pickle.loads(pickle.dumps(options))
    assert copy.view_as(WorkerOptions).default_sdk_harness_log_level == "ERROR"
    assert copy.view_as(DirectOptions).direct_num_workers == 2


def test_dataflow_runner_options_are_understood_or_refused_for_what_they_lack() -> None:
    argv = ["--runner=DataflowRunner", "--project=p", "--region=r", "--temp_location=gs://b/t"]
    try:
        parse_arguments(build_parser(), argv)
    except UsageError as err:  # without apache-beam[gcp] the runner cannot be made: said so, exit 2
        assert "apache_beam[gcp]" in str(err) or "Dataflow" in str(err)


# --- the commit: what it checks before _SUCCESS -----------------------------------------------


class _Tamper(beam.DoFn):
    """Passes staged files on to the commit after breaking the first one (a runner or disk losing it)."""

    def __init__(self, output: str, how: str) -> None:
        self._output, self._how = output, how

    def process(self, staged: StagedFile) -> Iterator[StagedFile]:
        path = Path(self._output) / staged.path
        if staged.directory == "density_bucket=4":
            if self._how == "delete" and path.exists():
                path.unlink()
            elif self._how == "truncate" and path.exists():
                path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
            elif self._how == "drop":
                return
        yield staged


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("delete", "staged files missing.*OUTPUT is as it was"),
        ("truncate", "bytes, not the .* written.*OUTPUT is incomplete"),
        ("drop", "differ from the manifest"),
    ],
)
def test_the_commit_checks_the_files_it_commits_before_success(
    how: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    run_write(str(out), corpus(4))
    before = read_chunks(out).num_rows
    import tests.test_write as write_tests

    original = write_tests.WriteChunks

    class TamperedChunks(original):  # type: ignore[misc,valid-type]
        def expand(self, rows):  # the staged files go through _Tamper on their way to the commit
            return super().expand(rows) | "Tamper" >> beam.ParDo(_Tamper(str(out), how))

    monkeypatch.setattr(write_tests, "WriteChunks", TamperedChunks)
    with pytest.raises(Exception, match=message):
        run_write(str(out), corpus(6, densities=(0.42,)), run_id=new_run_id())
    if how == "truncate":  # found only once moved: no _SUCCESS
        assert not (out / "_SUCCESS").exists()
    else:  # refused before the dataset changed: the previous output is whole
        assert (out / "_SUCCESS").exists() and read_chunks(out).num_rows == before


def test_the_commit_checks_the_accounting_before_it_changes_output(tmp_path: Path) -> None:
    """Records read that add up to neither documents nor rejects: the commit refuses, naming the numbers,
    before anything in OUTPUT changes (it used to be checked after ``_SUCCESS`` was published)."""
    out = tmp_path / "out"
    run_write(str(out), corpus(4))
    before = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    with pytest.raises(Exception, match=r"records read \(\d+\) != documents chunked"):
        run_write(str(out), corpus(6, densities=(0.42,)), run_id=new_run_id(), records_lost=1)
    after = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert {k: v for k, v in after.items() if not k.startswith("_staging/")} == before


def test_the_commit_never_adopts_a_file_it_did_not_stage(tmp_path: Path) -> None:
    """A staged file gone while a file of the same final name is there (another run's): refused."""
    out = tmp_path / "out"
    run_write(str(out), corpus(3), max_rows_per_file=1)
    foreign = next(out.glob("density_bucket=4/part-*.parquet"))  # the committed path of the staged file below
    with pytest.raises(Exception, match="staged files missing"):
        _commit_with_missing_staging(out, foreign.name)
    assert foreign.exists()


def _commit_with_missing_staging(out: Path, name: str) -> None:
    from pipelines.output import commit as commit_module

    fs_root = str(out)
    staged = StagedFile("density_bucket=4", f"_staging/{new_run_id()}/density_bucket=4/{name}", 1)
    manifest = read_manifest(out)
    counts = manifest["counts"]  # counts of the one staged row: the commit's own checks of them pass
    counts.update(chunks_by_bucket={"4": 1}, rejects={}, reject_rows=0, records_read=counts["documents_chunked"])
    counts.update(files_read=0)  # nor an input table
    commit = commit_module._BeginCommit(fs_root)
    list(commit.process(None, [staged], [], manifest, []))


# --- the lease: one run at a time, dead runs do not block --------------------------------------


def _plant_lease(output: Path, **fields: object) -> None:
    holder = {
        "run_id": "20260101T000000Z-deadbeef",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": "2026-01-01T00:00:00+00:00",
        "heartbeat": time.time(),
        **fields,
    }
    output.mkdir(parents=True, exist_ok=True)
    (output / LEASE_FILE).write_text(json.dumps(holder), encoding="utf-8")


def test_a_live_lease_refuses_the_run_naming_it(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _plant_lease(finished, run_id="20260101T000000Z-livelive", host="other-host", pid=1)
    before = _snapshot(finished)
    capsys.readouterr()
    assert main(["--output", str(finished), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "in use by run 20260101T000000Z-livelive (host other-host, pid 1" in err
    assert _snapshot(finished) == before


@pytest.mark.parametrize(
    "lease",
    [{"pid": 2**22 + 12345}, {"host": "other-host", "heartbeat": time.time() - STALE_SECONDS - 60}, {"heartbeat": "x"}],
    ids=["pid-gone-on-this-host", "heartbeat-stale", "unreadable"],
)
def test_a_dead_runs_lease_and_staging_do_not_block_the_next_run(lease: dict, finished: Path) -> None:
    dead = "20260101T000000Z-deadbeef"
    _plant_lease(finished, run_id=dead, **lease)
    leftover = finished / "_staging" / dead / "density_bucket=3" / "part-x.parquet"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"half a file")
    young = finished / "_staging" / new_run_id()  # a run that started a moment ago: not ours to delete
    young.mkdir()
    assert main(["--output", str(finished), "--quiet"]) == 0
    assert not leftover.exists() and young.exists()
    assert not (finished / LEASE_FILE).exists()  # released at the end
    assert (finished / "_SUCCESS").exists()


def test_a_lease_being_written_refuses_and_a_stale_one_is_broken(finished: Path) -> None:
    """An empty lease file: another run between creating and writing it, unless it is old (then it is dead)."""
    lease = finished / LEASE_FILE
    lease.write_bytes(b"")
    assert main(["--output", str(finished), "--quiet"]) == 2 and lease.read_bytes() == b""
    old = time.time() - WRITING_SECONDS - 5
    os.utime(lease, (old, old))
    assert main(["--output", str(finished), "--quiet"]) == 0 and not lease.exists()


def test_a_folder_of_other_files_is_refused_as_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--output .`` in a project or home folder: exit 2, nothing written; dotfiles alone do not count."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    before = _snapshot(folder)
    capsys.readouterr()
    assert main(["--input", str(DATA_DIR / "english_prose.txt"), "--output", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is a folder of other files (notes.txt, src) with no zerda output in it" in err, err
    assert _snapshot(folder) == before and sorted(p.name for p in folder.iterdir()) == ["notes.txt", "src"]
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / ".DS_Store").write_bytes(b"")
    assert main(["--input", str(DATA_DIR / "english_prose.txt"), "--output", str(hidden), "--quiet"]) == 0


def test_a_lease_that_cannot_be_read_is_not_broken(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A storage error reading the lease (here: a directory in its place) is no proof its run is dead."""
    (finished / LEASE_FILE).mkdir()
    (finished / LEASE_FILE / "keep").write_text("another run's", encoding="utf-8")
    before = _snapshot(finished)
    capsys.readouterr()
    assert main(["--output", str(finished), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"zerda: error: cannot take the lease of output {finished}: IsADirectoryError"), err
    assert _snapshot(finished) == before and (finished / LEASE_FILE / "keep").exists()


def test_a_failed_run_removes_its_staging_and_lease(tmp_path: Path) -> None:
    out, run_id = tmp_path / "out", new_run_id()
    with pytest.raises(OSError, match="No space left"), hold_output(str(out), run_id):
        (out / "_staging" / run_id).mkdir(parents=True)
        (out / "_staging" / run_id / "part.parquet").write_bytes(b"x" * 1000)
        raise OSError(28, "No space left on device")
    assert not (out / "_staging" / run_id).exists() and not (out / LEASE_FILE).exists()


def _incompressible_corpus(path: Path, megabytes: int) -> None:
    """JSONL of random words: its chunks do not compress, so the output is about as big as the text."""
    rng = random.Random(5)
    with path.open("w", encoding="utf-8") as f:
        for n in range(megabytes * 100):
            words = ("".join(rng.choices(string.ascii_letters, k=rng.randint(2, 12))) for _ in range(1400))
            f.write(json.dumps({"id": f"d{n}", "text": " ".join(words) + "."}) + "\n")


def test_a_full_disk_fails_the_run_and_keeps_the_previous_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real full disk: OUTPUT on a 3 MB tmpfs holding a finished small run; a run needing more fails
    with ENOSPC, deletes its staging (the space comes back) and leaves the previous output as it was, with one
    line saying so (it was a traceback ending in ``RuntimeError: OSError: [Errno 28] ...``)."""
    corpus = tmp_path / "random.jsonl"
    _incompressible_corpus(corpus, 6)
    small = tmp_path / "small_disk"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)], check=True)
    try:
        out = small / "out"
        assert main(["--input", str(DATA_DIR / "english_prose.txt"), "--output", str(out), "--quiet"]) == 0
        before, free = _snapshot(out), shutil.disk_usage(small).free
        capsys.readouterr()
        assert main(["--input", str(corpus), "--output", str(out), "--quiet"]) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err, err[-3000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"zerda: error: writing this run's files into {out} failed (OSError: ") and (
            "No space left on device" in last and last.endswith("OUTPUT is as it was")
        ), last
        assert _snapshot(out) == before
        assert {p.name for p in out.iterdir()} - {"_staging"} == {Path(name).parts[0] for name in before}
        assert not any(p.is_file() for p in (out / "_staging").rglob("*"))
        assert shutil.disk_usage(small).free == free
    finally:
        subprocess.run(["umount", str(small)], check=True)


def _fill(disk: Path) -> Path:
    """A file taking every byte left on ``disk``."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def test_a_disk_that_fills_during_the_commit_fails_in_one_line_saying_what_output_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OUTPUT's disk fills after the commit moved the new dataset in, as it writes the manifest (another writer
    on the disk; the fill is timed by wrapping the commit's last step). It was a 170-line traceback ending in
    ``RuntimeError: OSError: [Errno 28] ...``, not saying that OUTPUT was left without ``_SUCCESS``, half
    replaced. One line says so; once the space is back, the next run replaces it whole."""
    small = tmp_path / "small_disk"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)], check=True)
    try:
        out, fresh = small / "out", tmp_path / "fresh"
        argv = ["--input", str(DATA_DIR / "english_prose.txt"), "--output", str(out), "--quiet"]
        assert main(argv) == 0
        real = commit_module._publish

        def publish_on_a_full_disk(*args: Any) -> Any:
            _fill(small)
            return real(*args)

        monkeypatch.setattr(commit_module, "_publish", publish_on_a_full_disk)
        capsys.readouterr()
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err, err[-3000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith("zerda: error: the commit failed midway") and "No space left on device" in last, last
        assert "OUTPUT is incomplete" in last and "the next run replaces it whole" in last, last
        assert not (out / "_SUCCESS").exists()
        monkeypatch.undo()
        (small / "filler").unlink()
        assert main(argv) == 0
        assert main([*argv[:3], str(fresh), "--quiet"]) == 0
        assert read_chunks(out).sort_by("chunk_id") == read_chunks(fresh).sort_by("chunk_id")
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_s3_lease_is_exclusive_and_named(s3_env: S3Env) -> None:
    bucket = s3_env.new_bucket()
    fs, root = s3_env.filesystem(), f"{bucket}/out"
    refused = pytest.raises(OutputError, match="in use by run 20260101T000000Z-first000")
    with Lease(fs, root, "20260101T000000Z-first000"), refused:
        Lease(fs, root, "20260101T000000Z-second00").acquire()
    assert not fs.exists(f"{root}/{LEASE_FILE}")
    with Lease(fs, root, "20260101T000000Z-third000"):  # released: the next run takes it
        assert json.loads(fs.cat_file(f"{root}/{LEASE_FILE}"))["run_id"] == "20260101T000000Z-third000"


def test_s3_conditional_put_loses_the_race_cleanly(s3_env: S3Env) -> None:
    """Two creates of the same lease: S3's If-None-Match lets one win; the other reads the winner."""
    bucket = s3_env.new_bucket()
    fs, root = s3_env.filesystem(), f"{bucket}/out"
    first, second = Lease(fs, root, "20260101T000000Z-aaaaaaaa"), Lease(fs, root, "20260101T000000Z-bbbbbbbb")
    assert first._create()
    assert not second._create()
    first.release()


RACERS = 8


def _race_for_the_lease(fs: Any, root: str) -> tuple[list[Lease], list[str]]:
    """``RACERS`` runs take OUTPUT's lease at the same instant (threads behind a barrier): (held, refusals)."""
    barrier = threading.Barrier(RACERS)
    leases = [Lease(fs, root, f"20260101T000000Z-racer{n:03d}") for n in range(RACERS)]
    refusals: list[str] = []

    def take(lease: Lease) -> Lease | None:
        barrier.wait()
        try:
            lease.acquire()
        except OutputError as err:
            refusals.append(str(err))
            return None
        return lease

    with ThreadPoolExecutor(RACERS) as pool:
        held = [lease for lease in pool.map(take, leases) if lease is not None]
    return held, refusals


@pytest.mark.parametrize("start", ["no-lease", "dead-lease"])
@pytest.mark.parametrize("filesystem", ["local", "s3"])
def test_runs_starting_at_the_same_instant_leave_exactly_one_holder(
    filesystem: str, start: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Simultaneous starts: one lease wins. Two runs breaking one dead lease at once may both think they
    hold it, so the commit's check (``check_held``) passes for exactly one of them."""
    if filesystem == "local":
        fs, root = fsspec.filesystem("file"), str(tmp_path / "out")
    else:
        s3_env = request.getfixturevalue("s3_env")
        fs, root = s3_env.filesystem(), f"{s3_env.new_bucket()}/out"
    if start == "dead-lease":
        fs.makedirs(root, exist_ok=True)
        dead = {"run_id": "20260101T000000Z-deadbeef", "host": "other-host", "pid": 1, "heartbeat": 0.0}
        fs.pipe_file(f"{root}/{LEASE_FILE}", json.dumps(dead).encode())
    held, refusals = _race_for_the_lease(fs, root)
    try:
        assert held and len(held) + len(refusals) == RACERS
        if start == "no-lease":
            assert len(held) == 1, [lease.run_id for lease in held]
        expected = (" is in use by run 20260101T000000Z-racer", " was just taken by run ", " is being taken by")
        assert all(any(words in r for words in expected) for r in refusals), refusals
        committers = []
        for lease in held:
            with contextlib.suppress(OutputError):
                check_held(fs, root, lease.run_id)
                committers.append(lease.run_id)
        holder = json.loads(fs.cat_file(f"{root}/{LEASE_FILE}"))["run_id"]
        assert committers == [holder]
    finally:
        for lease in held:
            lease.release()
    assert not fs.exists(f"{root}/{LEASE_FILE}")


# --- real processes: two jobs at once, Ctrl-C -------------------------------------------------


def _job(argv: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        start_new_session=True,
    )


def _wait_for(path: Path, job: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"{path.name} did not appear (job rc {job.poll()})"


def _wait_until(ready: Callable[[], bool], job: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not ready() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready(), f"the job did not get there (rc {job.poll()})"


@contextlib.contextmanager
def _reaped(*jobs: subprocess.Popen) -> Iterator[None]:
    try:
        yield
    finally:
        for job in jobs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("ops") / "big"
    write_big_corpus(directory, megabytes=24, files=4)
    return directory


@pytest.fixture(scope="module")
def two_jobs_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("ops") / "two_jobs"
    write_big_corpus(directory, megabytes=4, files=4)
    return directory


@pytest.mark.parametrize("second", ["small", "big"], ids=["short-second-job", "long-second-job"])
def test_two_jobs_into_one_output_one_commits_the_other_refuses(
    second: str, two_jobs_corpus: Path, tmp_path: Path
) -> None:
    """The first job is stopped (SIGSTOP, its whole group) once it holds the lease, so it is still running,
    however slow or fast the machine, while the second one starts; it then resumes and commits."""
    out, corpus = tmp_path / "out", two_jobs_corpus
    first = _job(["--input", f"{corpus}/*.jsonl", "--output", str(out), "--quiet"], tmp_path / "first.log")
    with _reaped(first):
        _wait_for(out / LEASE_FILE, first)
        os.killpg(first.pid, signal.SIGSTOP)
        holder = json.loads((out / LEASE_FILE).read_text())
        argv = ["--output", str(out), "--quiet"] + ([] if second == "small" else ["--input", f"{corpus}/*.jsonl"])
        try:
            late = subprocess.run(
                [sys.executable, "-m", "pipelines.cli.rechunk", *argv],
                env={**os.environ, "PYTHONPATH": str(REPO)},
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert first.poll() is None, "the first job ended while it was stopped"
        finally:
            os.killpg(first.pid, signal.SIGCONT)
        assert late.returncode == 2, late.stderr
        assert f"in use by run {holder['run_id']}" in late.stderr and str(first.pid) in late.stderr
        assert first.wait(600) == 0, (tmp_path / "first.log").read_text()
    manifest = read_manifest(out)
    assert read_chunks(out).num_rows == manifest["counts"]["chunks"]
    assert {s["source"] for s in manifest["inputs"]} == {str(p) for p in sorted(corpus.iterdir())}
    assert not (out / LEASE_FILE).exists() and not (out / "_staging").exists()


STOPS = {
    # what Ctrl-C in a terminal does: SIGINT to the whole foreground group
    "ctrl-c": (signal.SIGINT, True, 130, "zerda: interrupted; OUTPUT keeps its previous output"),
    # a scheduler (Kubernetes, Airflow, timeout) stops the launcher; systemd stops every process of the job
    "sigterm": (signal.SIGTERM, False, 143, "zerda: terminated (SIGTERM); OUTPUT keeps its previous output"),
    "sigterm-group": (signal.SIGTERM, True, 143, "zerda: terminated (SIGTERM); OUTPUT keeps its previous output"),
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_ctrl_c_or_sigterm_exits_in_one_line_and_takes_the_workers_with_it(
    stop: str, big_corpus: Path, tmp_path: Path
) -> None:
    signum, group, code, line = STOPS[stop]
    out, log = tmp_path / "out", tmp_path / "interrupted.log"
    assert main(["--output", str(out), "--quiet"]) == 0
    before = _snapshot(out)
    job = _job(["--input", f"{big_corpus}/*.jsonl", "--output", str(out), "--quiet", *MULTI_PROCESS], log)
    with _reaped(job):
        _wait_for(out / "_staging", job)
        _wait_until(lambda: any((out / "_staging").glob("*/density_bucket=*")), job)  # workers writing rows
        workers = psutil.Process(job.pid).children(recursive=True)
        assert workers, "no worker process started"
        (os.killpg if group else os.kill)(job.pid, signum)
        assert job.wait(120) == code
    err = log.read_text(errors="replace")
    # one line of zerda's; the workers' start-up lines before it are there in any run
    assert err.strip().splitlines()[-1] == line, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"worker processes outlived the launcher: {alive}"
    assert _snapshot(out) == before  # the previous output, still finished; no lease or staging left


def test_lease_record_says_who_holds_the_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run_id = new_run_id()
    with hold_output(str(out), run_id):
        holder = json.loads((out / LEASE_FILE).read_text())
    assert holder["run_id"] == run_id and holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
    assert datetime.fromisoformat(holder["started"]) <= datetime.now(timezone.utc)


def test_a_failed_runs_cleanup_step_is_bounded_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    """Storage that failed a run is not waited on for minutes of retries: each cleanup step gives up in time."""
    release = threading.Event()
    done: list[str] = []
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="zerda"):
        best_effort(lambda: release.wait(60), "delete this run's staging", seconds=0.5)
        best_effort(lambda: 1 / 0, "remove the lease x")
        best_effort(lambda: done.append("ok"), "remove the lease y")
    release.set()
    assert time.monotonic() - started < 5
    assert done == ["ok"]
    assert [r.getMessage() for r in caplog.records] == [
        "gave up trying to delete this run's staging after 0.5 s: no answer from storage (the next run clears it)",
        "could not remove the lease x (the next run clears it): division by zero",
    ]
