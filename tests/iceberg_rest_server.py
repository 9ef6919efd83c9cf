"""A real Apache Iceberg REST catalog server for tests: Iceberg's own ``RESTCatalogServer``.

``iceberg_rest_server`` (module fixture): the server Iceberg publishes for REST clients to test against (the
class its ``apache/iceberg-rest-fixture`` image runs), started with ``java`` on 127.0.0.1 on a free port,
over a JDBC catalog in a SQLite file and a warehouse folder, both in a temporary folder. Yields a
:class:`RestServer`; the process is killed after the module.

Its jars come from Maven Central (downloaded once by ``mvn``, then cached under ``.cache/``): the
``test-fixtures`` jar of ``iceberg-open-api`` (the server's main class) and the ``tests`` jar of
``iceberg-core`` (the servlet it serves), neither of which lists its dependencies in a POM, so the POM
below names them: ``iceberg-core``, Jetty 11, Hadoop's shaded client (the JDBC catalog's ``HadoopFileIO``
writes the metadata files), the SQLite JDBC driver and a logger.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.common import REPO, free_port

ICEBERG_VERSION = "1.10.0"
START_TIMEOUT = 60.0
_HOME = REPO / ".cache" / f"iceberg-rest-{ICEBERG_VERSION}"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>zerda.tests</groupId><artifactId>iceberg-rest-server</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.iceberg</groupId><artifactId>iceberg-open-api</artifactId><version>{v}</version>
      <classifier>test-fixtures</classifier>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId><version>{v}</version>
      <classifier>tests</classifier>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId><version>{v}</version>
    </dependency>
    <dependency>
      <groupId>org.eclipse.jetty</groupId><artifactId>jetty-servlet</artifactId><version>11.0.24</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-api</artifactId><version>3.4.1</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-runtime</artifactId><version>3.4.1</version>
    </dependency>
    <dependency>
      <groupId>org.xerial</groupId><artifactId>sqlite-jdbc</artifactId><version>3.50.3.0</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>2.0.17</version>
    </dependency>
  </dependencies>
</project>
"""


@dataclass(frozen=True)
class RestServer:
    uri: str  # http://127.0.0.1:PORT
    warehouse: Path  # where the server's tables live (its metadata files, and the data files clients write)


def server_jars() -> Path:
    """The folder of the server's jars (resolved by Maven once, under a lock: test workers start at once)."""
    lib = _HOME / "lib"
    _HOME.mkdir(parents=True, exist_ok=True)
    with (_HOME / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not lib.is_dir():
            partial = _HOME / "lib.partial"
            shutil.rmtree(partial, ignore_errors=True)
            (_HOME / "pom.xml").write_text(_POM.format(v=ICEBERG_VERSION), encoding="utf-8")
            subprocess.run(
                ["mvn", "-B", "-q", "-f", "pom.xml", "dependency:copy-dependencies", f"-DoutputDirectory={partial}"],
                check=True,
                cwd=_HOME,
            )
            partial.rename(lib)
    return lib


@pytest.fixture(scope="module")
def iceberg_rest_server() -> Iterator[RestServer]:
    lib = server_jars()
    root = Path(tempfile.mkdtemp(prefix="zerda-rest-"))
    warehouse, port = root / "warehouse", free_port()
    warehouse.mkdir()
    environment = {
        **os.environ,
        "CATALOG_WAREHOUSE": f"file://{warehouse}",
        "CATALOG_URI": f"jdbc:sqlite:file:{root / 'catalog.db'}",
        "CATALOG_REST_PORT": str(port),
    }
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(
        ["java", "-cp", f"{lib}/*", "org.apache.iceberg.rest.RESTCatalogServer"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=environment,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(uri, server, root / "server.log")
        yield RestServer(uri, warehouse)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _wait_until_up(uri: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the Iceberg REST server exited ({server.returncode}):\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{uri}/v1/config", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"the Iceberg REST server did not answer in {START_TIMEOUT:.0f}s:\n{log.read_text(errors='replace')}")
