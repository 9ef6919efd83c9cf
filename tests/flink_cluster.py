"""A real Apache Flink session cluster on 127.0.0.1 for tests, and Beam's Flink job server to submit to it.

Import the fixture into a test module (``from tests.flink_cluster import flink  # noqa: F401``):

- ``flink`` (session): a JobManager and two TaskManagers, each a ``java`` process in its own process
  group, configured by a ``config.yaml`` written into a temporary directory (every address 127.0.0.1,
  free ports, a fixed-delay restart strategy, short heartbeats so a killed TaskManager is noticed in
  seconds), and Beam's Python worker pool in a process of its own, where the pipelines' SDK harnesses
  run (``EXTERNAL``). Yields a :class:`FlinkCluster`; at the end every process group is killed.
- :func:`running_cluster`: the same start and stop, for the fixture and for ``benchmarks/bench_memory.py``'s
  Flink mode (a cluster per corpus size there, SDK harnesses as processes of their own).

What runs, and where it comes from (downloaded once, then cached under ``.cache/`` in the repository):

- Flink itself: the distribution's jars that PyPI's ``apache-flink-libraries`` sdist carries
  (``deps/lib``). Only the jars are used: the processes are started with ``java`` directly, not through
  ``bin/`` scripts, so the fixture owns their process ids.
- Beam's Flink job server. Maven Central serves no ``beam-runners-flink-*-job-server`` shaded jar for
  any version here; it serves ``beam-runners-flink-1.19`` (2.62.0 and 2.70.0) and, for 2.62.0 only,
  every dependency of it. So Maven resolves ``beam-runners-flink-1.19:2.62.0`` and its dependencies,
  and a small launcher jar (a manifest naming ``FlinkJobServerDriver`` and the jars on its class path)
  stands in for the shaded one: Beam's ``--flink_job_server_jar`` runs it with ``java -jar``. Hence
  Flink 1.19 here (Beam 2.77 supports 1.19 to 2.2) and a 2.62 job server behind the 2.77 Python SDK.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.common import REPO, free_port
from tests.test_portable import _WORKER_POOL, _wait_for

FLINK_VERSION = "1.19.3"
BEAM_JOB_SERVER_VERSION = "2.62.0"
CACHE = REPO / ".cache"
START_TIMEOUT = 120.0
TASK_MANAGERS = 2
SLOTS = 2
RESTART_ATTEMPTS = 5
_RUNTIME = "org.apache.flink.runtime"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>zerda.tests</groupId><artifactId>flink-job-server</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.beam</groupId><artifactId>beam-runners-flink-1.19</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def flink_lib() -> Path:
    """The Flink distribution's ``lib/`` folder, from PyPI's apache-flink-libraries (cached)."""
    lib = CACHE / f"flink-{FLINK_VERSION}" / "lib"
    if lib.is_dir():
        return lib
    downloads = CACHE / "pypi"
    sdist = downloads / f"apache-flink-libraries-{FLINK_VERSION}.tar.gz"
    if not sdist.exists():
        requirement = f"apache-flink-libraries=={FLINK_VERSION}"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(downloads), requirement],
            check=True,
        )
    staging = lib.parent.with_name(lib.parent.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    prefix = f"apache-flink-libraries-{FLINK_VERSION}/deps/lib/"
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.startswith(prefix):
                member.name = member.name[len(prefix) :]
                archive.extract(member, staging / "lib", filter="data")
    staging.rename(lib.parent)
    return lib


def job_server_jar() -> Path:
    """A launcher jar for Beam's Flink job server: its manifest names the main class and the Maven jars."""
    home = CACHE / f"beam-flink-1.19-job-server-{BEAM_JOB_SERVER_VERSION}"
    launcher = home / "job-server.jar"
    if launcher.exists():
        return launcher
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(_POM.format(version=BEAM_JOB_SERVER_VERSION), encoding="utf-8")
    subprocess.run(
        ["mvn", "-B", "-q", "-f", str(home / "pom.xml"), "dependency:copy-dependencies", "-DoutputDirectory=lib"],
        check=True,
        cwd=home,
    )
    class_path = " ".join(f"lib/{jar.name}" for jar in sorted((home / "lib").glob("*.jar")))
    manifest = "Manifest-Version: 1.0\n"
    manifest += "Main-Class: org.apache.beam.runners.flink.FlinkJobServerDriver\n"
    manifest += _wrap_manifest_line(f"Class-Path: {class_path}")
    partial = launcher.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", manifest)
    partial.rename(launcher)
    return launcher


def _wrap_manifest_line(line: str) -> str:
    """A manifest line cut into 72-byte lines, continuations starting with a space (the jar spec's rule)."""
    parts = [line[:72]] + [" " + line[i : i + 71] for i in range(72, len(line), 71)]
    return "\n".join(parts) + "\n"


class FlinkCluster:
    """A JobManager and TaskManagers as process groups; TaskManagers can be killed and started again."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.lib = flink_lib()
        self.job_server_jar = job_server_jar()
        self.rest_port = free_port()
        self.conf = workdir / "conf"
        self.conf.mkdir()
        settings = {
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.rpc.port": free_port(),
            "jobmanager.memory.process.size": "900m",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": self.rest_port,
            "blob.server.port": "0",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.rpc.port": "0",
            "taskmanager.data.port": "0",
            "taskmanager.numberOfTaskSlots": SLOTS,
            # What Flink's bin/ scripts would compute (BashJavaUtils), set outright: the JVM flags below match.
            "taskmanager.cpu.cores": SLOTS,
            "taskmanager.memory.framework.heap.size": "128m",
            "taskmanager.memory.task.heap.size": "256m",
            "taskmanager.memory.managed.size": "128m",
            "taskmanager.memory.framework.off-heap.size": "128m",
            "taskmanager.memory.task.off-heap.size": "0m",
            # 16,384 buffers: a TaskManager left alone after the other is killed runs every task, and each
            # sort-merge shuffle partition asks for 512 buffers (taskmanager.network.sort-shuffle.min-buffers)
            "taskmanager.memory.network.min": "512m",
            "taskmanager.memory.network.max": "512m",
            "taskmanager.memory.jvm-metaspace.size": "256m",
            "taskmanager.memory.jvm-overhead.min": "192m",
            "taskmanager.memory.jvm-overhead.max": "192m",
            "parallelism.default": TASK_MANAGERS,
            "cluster.evenly-spread-out-slots": "true",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": RESTART_ATTEMPTS,
            "restart-strategy.fixed-delay.delay": "1 s",
            "heartbeat.interval": "1000",
            "heartbeat.timeout": "5000",
            "slot.request.timeout": "15000",
            "io.tmp.dirs": str(workdir / "tmp"),
        }
        (self.conf / "config.yaml").write_text(
            "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items()), encoding="utf-8"
        )
        shutil.copy(Path(__file__).with_name("flink_log4j.properties"), self.conf / "log4j.properties")
        self.logs = workdir / "log"
        self.logs.mkdir()
        self.jobmanager = self._java("jobmanager", f"{_RUNTIME}.entrypoint.StandaloneSessionClusterEntrypoint")
        self.taskmanagers: dict[str, subprocess.Popen[bytes]] = {}
        self.worker_pool: subprocess.Popen[bytes] | None = None
        self.worker_pool_address = ""
        self.worker_pool_log = self.logs / "worker_pool.log"

    @property
    def master(self) -> str:
        """What ``--flink_master`` takes: the REST endpoint."""
        return f"127.0.0.1:{self.rest_port}"

    def beam_args(self, *extra: str) -> list[str]:
        """Beam options that run a pipeline on this cluster, SDK harnesses in the worker pool process."""
        return [
            "--runner=FlinkRunner",
            f"--flink_master={self.master}",
            f"--flink_job_server_jar={self.job_server_jar}",
            "--environment_type=EXTERNAL",
            f"--environment_config={self.worker_pool_address}",
            # Keep a task's SDK environment for a minute after its last bundle: with 0 (Beam's default) a task
            # finishing closes the environment while the next task on that slot is taking it up, and under
            # load Flink failed such tasks with "SDK harness closed connection" (seen in CI).
            "--environment_cache_millis=60000",
            # One TaskManager's slots: spread over both (evenly-spread-out-slots), and when one is lost the
            # other alone can run the restarted tasks. At 4 the restart waits for slots that never come.
            f"--parallelism={SLOTS}",
            *extra,
        ]

    def start_worker_pool(self, harness_processes: bool = False) -> None:
        """Beam's Python worker pool, its own process group, up for the whole session.

        Not ``LOOPBACK``: there the SDK harnesses live in the submitting process and close when it sees the
        job end, racing Flink's own end of the tasks; under load Flink took the closed connection ("SDK
        harness closed connection") for a failure and marked a job whose output was committed FAILED.
        ``harness_processes``: each SDK harness a child process of the pool instead of a thread in it, so a
        benchmark can measure each one's memory (the pool starts them as ``python``: this interpreter's).
        """
        env = {**os.environ, "PYTHONPATH": str(REPO)}  # the harnesses unpickle DoFns from pipelines.*
        if harness_processes:
            env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        command = [sys.executable, "-c", _WORKER_POOL, *(["--processes"] if harness_processes else [])]
        with self.worker_pool_log.open("wb") as out:
            self.worker_pool = subprocess.Popen(
                command,
                cwd=self.workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        log = self.worker_pool_log
        self.worker_pool_address = _wait_for(
            lambda: next((ln for ln in log.read_text().splitlines() if ln.startswith("localhost:")), ""),
            self.worker_pool,
            log,
        )

    def _java(self, name: str, main: str, *args: str, heap: str = "384m") -> subprocess.Popen[bytes]:
        log = self.logs / f"{name}.log"
        command = [
            "java",
            f"-Xmx{heap}",
            f"-Xms{heap}",
            "-XX:MaxDirectMemorySize=640m",  # the framework's off-heap memory and the network's
            "-XX:MaxMetaspaceSize=256m",
            f"-Dlog.file={log}",
            f"-Dlog4j.configurationFile=file:{self.conf / 'log4j.properties'}",
            "-cp",
            f"{self.lib}/*",
            main,
            "--configDir",
            str(self.conf),
            *args,
        ]
        with (self.logs / f"{name}.out").open("wb") as out:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def rest(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://{self.master}{path}", timeout=10) as response:
            return json.load(response)

    def _registered(self) -> int:
        try:
            return len(self.rest("/taskmanagers")["taskmanagers"])
        except OSError:
            return -1

    def start_taskmanagers(self, count: int = TASK_MANAGERS) -> None:
        """Start TaskManagers until ``count`` are alive, and wait until the JobManager has them all."""
        self.taskmanagers = {name: tm for name, tm in self.taskmanagers.items() if tm.poll() is None}
        while len(self.taskmanagers) < count:
            name = f"taskmanager-{len(list(self.logs.glob('taskmanager-*.out')))}"
            self.taskmanagers[name] = self._java(
                name, f"{_RUNTIME}.taskexecutor.TaskManagerRunner", "-D", f"taskmanager.resource-id={name}"
            )
        self.wait(lambda: self._registered() == count, f"{count} TaskManagers registered")

    def taskmanager(self, resource_id: str) -> subprocess.Popen[bytes] | None:
        """The live TaskManager process Flink knows by ``resource_id``."""
        process = self.taskmanagers.get(resource_id)
        return process if process is not None and process.poll() is None else None

    def kill_taskmanager(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no shutdown hook, no goodbye to the JobManager, as a lost machine would be."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def wait(self, ready: Any, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if self.jobmanager.poll() is not None:
                break
            time.sleep(0.25)
        logs = "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}" for log in sorted(self.logs.iterdir())
        )
        pytest.fail(f"Flink: no {what} after {timeout:.0f}s\n{logs}")

    def stop(self) -> None:
        pool = [self.worker_pool] if self.worker_pool is not None else []
        for process in [*self.taskmanagers.values(), self.jobmanager, *pool]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def running_cluster(workdir: Path, harness_processes: bool = False) -> Iterator[FlinkCluster]:
    """A cluster in ``workdir`` with its worker pool and TaskManagers up; every process group killed on leaving."""
    cluster = FlinkCluster(workdir)
    try:
        cluster.start_worker_pool(harness_processes)
        cluster.start_taskmanagers()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def flink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlinkCluster]:
    with running_cluster(tmp_path_factory.mktemp("flink")) as cluster:
        yield cluster
