"""A cluster runner whose endpoint is unreachable or is no job service (issue 9): one line, a non-zero exit,
the previous output finished as it was, no lease or staging left, in bounded time.

Real endpoints on 127.0.0.1: a closed port, a port that accepts connections and says nothing, and a gRPC
server with no Beam service. The CLI runs in its own process, as a scheduler starts it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NoReturn

import grpc
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.flink_runner import FlinkRunner

from pipelines.cli.endpoints import check_endpoint
from pipelines.cli.rechunk import main
from pipelines.errors import UsageError
from tests.common import DATA, REPO
from tests.fault_injection import zerda_fault
from tests.flink_cluster import BEAM_JOB_SERVER_VERSION, CACHE
from tests.test_reliability_ops import _finished, _snapshot

BOUND_SECONDS = 60.0
JOB_SERVER_JAR = CACHE / f"beam-flink-1.19-job-server-{BEAM_JOB_SERVER_VERSION}" / "job-server.jar"


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: bound once to pick it, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a web server's or a database's port, taken for
    the job server's)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def grpc_port() -> Iterator[int]:
    """A gRPC server with no service at all: it answers every call UNIMPLEMENTED."""
    server = grpc.server(ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


def _run_cli(output: Path, *beam_args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", "--output", str(output), "--quiet", *beam_args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return done, time.monotonic() - started


def _check_untouched(output: Path, before: dict[str, bytes]) -> None:
    assert _snapshot(output) == before, "the previous output changed"  # _SUCCESS and all; no lease, no staging
    assert (output / "_SUCCESS").exists()


@pytest.mark.parametrize(
    ("beam_args", "named"),
    [
        (["--runner=FlinkRunner", "--flink_master=127.0.0.1:{closed}"], "--flink_master 127.0.0.1:{closed}"),
        (["--runner=FlinkRunner", "--flink_master=http://localhost:{closed}/"], "localhost:{closed} cannot be reached"),
        (["--runner=PortableRunner", "--job_endpoint=127.0.0.1:{closed}"], "--job_endpoint 127.0.0.1:{closed}"),
        (["--runner=FlinkRunner", "--job_endpoint=localhost:{closed}"], "--job_endpoint localhost:{closed}"),
        (
            ["--runner=PortableRunner", "--job_endpoint=127.0.0.1:{silent}", "--job_server_timeout=2"],
            "accepts connections but no gRPC server answered in 2 s",
        ),
    ],
)
def test_an_unreachable_endpoint_exits_2_at_launch_naming_it(
    beam_args: list[str], named: str, closed_port: int, silent_port: int, tmp_path: Path
) -> None:
    """Found before anything is touched. (Beam alone: a closed --flink_master failed after 70 s with Flink's
    job server's ConnectException as a traceback; a closed --job_endpoint waited 300 s.)"""
    output = _finished(tmp_path / "out")
    before = _snapshot(output)
    ports = {"closed": closed_port, "silent": silent_port}
    args = [arg.format(**ports) for arg in beam_args]
    done, seconds = _run_cli(output, *args, f"--flink_job_server_jar={JOB_SERVER_JAR}")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zerda: error: "), done.stderr
    assert named.format(**ports) in lines[0] and "check that" in lines[0], lines[0]
    assert seconds < BOUND_SECONDS
    _check_untouched(output, before)


def test_an_endpoint_that_is_no_job_service_fails_the_run_in_one_line(grpc_port: int, tmp_path: Path) -> None:
    """Found once the job is submitted, under the lease: exit 1, and the lease and staging go with the run."""
    output = _finished(tmp_path / "out")
    before = _snapshot(output)
    done, seconds = _run_cli(output, "--runner=PortableRunner", f"--job_endpoint=127.0.0.1:{grpc_port}")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"zerda: error: PortableRunner (--job_endpoint 127.0.0.1:{grpc_port}): the job service answered "
        "UNIMPLEMENTED (no Beam job service there?): Method not found!"
    ], done.stderr
    assert seconds < BOUND_SECONDS
    _check_untouched(output, before)


def test_a_job_that_fails_on_its_workers_says_why_in_its_last_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that fails in a worker after submission: Beam's message is the worker's Python traceback (kilobytes,
    the exception on its last line, under Flink's Java frames). The one line kept the first 1000 characters, a
    traceback's opening frames, and lost the exception; it must name it."""
    zerda_fault.arm(monkeypatch, "english_prose.txt", tmp_path / "marker")
    output = _finished(tmp_path / "out")
    argv = ["--input", str(DATA / "english_prose.txt"), "--output", str(output), "--quiet"]
    capsys.readouterr()
    assert main([*argv, "--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("zerda: error: PortableRunner: the job failed: Pipeline "), last
    assert "InjectedFault: injected worker failure on document 'english_prose.txt'" in last, last
    assert (output / "_SUCCESS").exists()


def test_a_name_lookup_that_does_not_answer_is_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DNS server that does not answer: the launch gives up in the probe's time, not the resolver's (a
    timeout on the socket does not cover the lookup; the resolver's retries take 20 s here)."""
    release = threading.Event()

    def no_answer(*args: object, **kwargs: object) -> NoReturn:
        release.wait(20)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", no_answer)
    options = PipelineOptions(["--flink_master=cluster.example:8081", "--job_server_timeout=1"])
    try:
        with pytest.raises(UsageError, match=r"cluster\.example:8081 cannot be reached \(no answer in 1 s\)"):
            check_endpoint(FlinkRunner(), options)
    finally:
        release.set()
