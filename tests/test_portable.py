"""The portable path Flink and Dataflow use: the pipeline as Runner API protos, run through a job service.

Two shapes, both offline and without Java:

- ``--job_endpoint=embed --environment_type=LOOPBACK``: Beam's job service in this process, the SDK
  harness in this process too;
- Beam's local job service in its own process (``local_job_service_main``, as a Flink job server would
  be) and an ``EXTERNAL`` environment: a Python worker pool in a third process (as Flink's Python
  worker-pool sidecar is), so every DoFn is pickled, shipped and unpickled there.

Each output must equal the DirectRunner's, row for row.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pyarrow.dataset as ds
import pytest
from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc
from apache_beam.runners.portability.portable_runner import PortableRunner

from pipelines.cli.rechunk import run
from tests.common import DATA, REPO
from tests.output_checks import read_manifest

START_TIMEOUT = 60.0

# The pool ignores stop requests: it knows a harness by its worker id alone, and each of Flink's TaskManagers
# numbers its own from "1-1", so one TaskManager's stop ended the other's harness of the same id (a thread's
# control stream closed under a running task: "SDK harness closed connection"; a process's task then waited
# forever). A harness ends when its runner closes its control channel. With ``--processes`` each harness is a
# child process of the pool instead of a thread in it (tests/flink_cluster.py, for a benchmark).
_WORKER_POOL = """
import logging, sys
logging.basicConfig(level=logging.INFO)
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer

class StopsIgnored(BeamFnExternalWorkerPoolServicer):
    def StopWorker(self, request, context):
        return beam_fn_api_pb2.StopWorkerResponse()

address, server = StopsIgnored.start(use_process="--processes" in sys.argv, port=0)
print(address, flush=True)
server.wait_for_termination()
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """tests/data plus a gzipped JSONL of 40 documents (and one bad line), so there are many elements."""
    folder = tmp_path_factory.mktemp("corpus")
    texts = [path.read_text(encoding="utf-8") for path in sorted(DATA.iterdir()) if path.is_file()]
    lines = [json.dumps({"id": f"doc-{i}", "text": texts[i % len(texts)] * (1 + i % 3)}) for i in range(40)]
    lines.insert(7, "{not json")
    (folder / "many.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    return [f"{DATA}/*", str(folder / "many.jsonl.gz")]


def run_to(output: Path, corpus: list[str], *beam_args: str) -> dict[str, Any]:
    inputs = [arg for pattern in corpus for arg in ("--input", pattern)]
    return run([*inputs, "--output", str(output), "--quiet", *beam_args])


def dataset(output: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(chunk rows, reject rows), every column, in a stable order."""
    chunks = ds.dataset(output, format="parquet", partitioning="hive").to_table().to_pylist()
    rejects = ds.dataset(output / "_rejects", format="parquet").to_table().to_pylist()
    return sorted(chunks, key=lambda r: r["chunk_id"]), sorted(rejects, key=lambda r: (r["source"], r["record"]))


@pytest.fixture(scope="module")
def direct(corpus: list[str], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The reference: the same corpus on the DirectRunner."""
    output = tmp_path_factory.mktemp("direct") / "out"
    return output, run_to(output, corpus, "--runner=DirectRunner")


@pytest.fixture()
def portable_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the job endpoint of every pipeline PortableRunner runs, to prove the portable path was taken."""
    endpoints: list[str] = []
    real = PortableRunner.run_pipeline

    def spy(self: PortableRunner, pipeline: Any, options: Any) -> Any:
        endpoints.append(options.get_all_options()["job_endpoint"])
        return real(self, pipeline, options)

    monkeypatch.setattr(PortableRunner, "run_pipeline", spy)
    return endpoints


def assert_same_output(output: Path, manifest: dict[str, Any], direct: tuple[Path, dict[str, Any]]) -> None:
    """Complete (accounted, committed) and equal to the DirectRunner's output, row for row."""
    direct_output, direct_manifest = direct
    assert (output / "_SUCCESS").exists()
    assert read_manifest(output) == manifest
    assert manifest["counts"] == direct_manifest["counts"]
    assert manifest["counts"]["documents_chunked"] >= 40
    assert manifest["counts"]["rejects"]["invalid_json"] == 1
    chunks, rejects = dataset(output)
    direct_chunks, direct_rejects = dataset(direct_output)
    assert len(chunks) == manifest["counts"]["chunks"] > 40
    assert sorted((r["chunk_id"], r["text"]) for r in chunks) == sorted(
        (r["chunk_id"], r["text"]) for r in direct_chunks
    )
    assert chunks == direct_chunks
    assert rejects == direct_rejects
    assert ("invalid_json", 8) in {(r["reason"], r["record"]) for r in rejects}


def test_embedded_job_service_with_loopback_workers(
    corpus: list[str], direct: tuple[Path, dict[str, Any]], portable_runs: list[str], tmp_path: Path
) -> None:
    output = tmp_path / "out"
    manifest = run_to(output, corpus, "--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK")
    assert portable_runs == ["embed"]
    assert_same_output(output, manifest, direct)


def _start(command: list[str], cwd: Path, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)


def _wait_for(read: Any, process: subprocess.Popen[bytes], log: Path) -> str:
    """Poll ``read()`` until it gives a value; fail with the process's log if it dies or times out."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        value = read()
        if value:
            return str(value)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    pytest.fail(f"{process.args} did not start (exit {process.poll()}):\n{log.read_text(errors='replace')}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture()
def job_service_and_worker_pool(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """Beam's local job service and a Python worker pool, each in its own process.

    Yields (job endpoint, worker pool address, worker pool log).
    """
    workdir = tmp_path / "services"
    workdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # the worker pool unpickles DoFns from pipelines.*
    port_file = workdir / "job_service.port"
    job_log, pool_log = workdir / "job_service.log", workdir / "worker_pool.log"
    job_service = _start(
        [
            sys.executable,
            "-m",
            "apache_beam.runners.portability.local_job_service_main",
            "--port=0",
            f"--port_file={port_file}",
        ],
        workdir,
        job_log,
        env,
    )
    pool = _start([sys.executable, "-c", _WORKER_POOL], workdir, pool_log, env)
    try:
        port = _wait_for(lambda: port_file.exists() and port_file.read_text().strip(), job_service, job_log)
        address = _wait_for(
            lambda: next((ln for ln in pool_log.read_text().splitlines() if ln.startswith("localhost:")), ""),
            pool,
            pool_log,
        )
        yield f"localhost:{port}", address, pool_log
        assert job_service.poll() is None, job_log.read_text(errors="replace")
        assert pool.poll() is None, pool_log.read_text(errors="replace")
    finally:
        _stop(job_service)
        _stop(pool)


def test_job_service_process_with_external_worker_pool(
    corpus: list[str],
    direct: tuple[Path, dict[str, Any]],
    portable_runs: list[str],
    job_service_and_worker_pool: tuple[str, str, Path],
    tmp_path: Path,
) -> None:
    endpoint, pool, pool_log = job_service_and_worker_pool
    output = tmp_path / "out"
    manifest = run_to(
        output,
        corpus,
        "--runner=PortableRunner",
        f"--job_endpoint={endpoint}",
        "--environment_type=EXTERNAL",
        f"--environment_config={pool}",
    )
    assert portable_runs == [endpoint]
    assert "Control channel established" in pool_log.read_text(), "the SDK harness ran in the worker pool process"
    assert_same_output(output, manifest, direct)


def test_sigterm_to_the_launcher_cancels_the_job_on_the_job_service(
    job_service_and_worker_pool: tuple[str, str, Path], tmp_path: Path
) -> None:
    """A scheduler stopping the launcher must not leave its job running on the cluster without it."""
    endpoint, pool, _ = job_service_and_worker_pool
    corpus, output, log = tmp_path / "c", tmp_path / "out", tmp_path / "launcher.log"
    corpus.mkdir()
    text = " ".join(f"Sentence {i} says where the ferry docks on day {i % 7}." for i in range(20_000))
    for n in range(8):  # about 9 MB: long enough on one worker pool to be stopped in the middle
        lines = (json.dumps({"id": f"{n}-{i}", "text": text[i:]}) for i in range(12))
        (corpus / f"part-{n}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    jobs = beam_job_api_pb2_grpc.JobServiceStub(grpc.insecure_channel(endpoint))
    launcher = subprocess.Popen(
        [
            *(
                sys.executable,
                "-m",
                "pipelines.cli.rechunk",
                "--input",
                str(corpus),
                "--output",
                str(output),
                "--quiet",
            ),
            *("--runner=PortableRunner", f"--job_endpoint={endpoint}", "--environment_type=EXTERNAL"),
            f"--environment_config={pool}",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    try:
        _wait_for(lambda: any((output / "_staging").glob("*/density_bucket=*")), launcher, log)  # the job runs
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(60) == 143, log.read_text(errors="replace")
    finally:
        launcher.kill()
    last = log.read_text().strip().splitlines()[-1]
    assert (
        last == "zerda: terminated (SIGTERM); OUTPUT has no finished output (no _SUCCESS); the next run writes it whole"
    )
    (job,) = jobs.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info
    assert beam_job_api_pb2.JobState.Enum.Name(job.state) in ("CANCELLING", "CANCELLED")
    time.sleep(2)  # what the job might still do, it does without the lease: nothing is committed
    assert not (output / "_SUCCESS").exists()
    assert not (output / "_lease.json").exists()
