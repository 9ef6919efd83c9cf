"""A real PostgreSQL server for tests, from Debian's ``postgresql`` package (``tests/system_packages.sh``).

``postgres_server`` (module fixture): ``initdb`` a fresh cluster in a temporary folder, start it on 127.0.0.1
on a free port with password authentication (a role ``zerda``, a database ``iceberg``), yield a
:class:`PostgresServer`, and stop it and delete the folder after the module. PostgreSQL refuses to run as
root: as root, the server's commands run as the ``postgres`` user (its folder handed to that user).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.common import free_port

ROLE, DATABASE = "zerda", "iceberg"


@dataclass(frozen=True)
class PostgresServer:
    port: int
    password: str

    def uri(self, password: str | None = None) -> str:
        """The SQLAlchemy URL of the test database (psycopg2), with ``password`` or the right one."""
        return f"postgresql+psycopg2://{ROLE}:{password or self.password}@127.0.0.1:{self.port}/{DATABASE}"


def _binaries() -> Path:
    """The folder of the newest installed PostgreSQL's server commands."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        which = shutil.which("initdb")
        if which is None:
            raise RuntimeError("PostgreSQL is not installed: run tests/system_packages.sh (Debian's postgresql)")
        return Path(which).parent
    return Path(found[-1]).parent


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    binaries = _binaries()
    root = Path(tempfile.mkdtemp(prefix="zerda-pg-"))
    user = None
    if os.geteuid() == 0:  # initdb and postgres refuse root: run them as the postgres user
        user = "postgres"
        account = pwd.getpwnam(user)
        os.chown(root, account.pw_uid, account.pw_gid)
    password = secrets.token_hex(12)
    (root / "pw").write_text(password, encoding="utf-8")
    if user is not None:
        os.chown(root / "pw", pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    data, port = root / "data", free_port()

    def command(*args: str) -> None:
        subprocess.run(args, check=True, user=user, capture_output=True, timeout=120, cwd=root)

    command(
        str(binaries / "initdb"), "-D", str(data), "-U", ROLE, f"--pwfile={root / 'pw'}",
        "--auth=scram-sha-256", "--encoding=UTF8", "--no-sync",
    )  # fmt: skip
    options = f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off"
    command(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start")
    try:
        env = {**os.environ, "PGPASSWORD": password}
        subprocess.run(
            [str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", ROLE, DATABASE],
            check=True, env=env, capture_output=True, timeout=60, user=user,
        )  # fmt: skip
        yield PostgresServer(port, password)
    finally:
        subprocess.run(
            [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            user=user, capture_output=True, timeout=60, cwd=root,
        )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
