"""One run at a time in an OUTPUT: a lease file, ``OUTPUT/_lease.json``, taken at launch and checked at the commit.

The lease names its run (run id, host, pid, start time) and carries a heartbeat the launcher refreshes
every ``HEARTBEAT_SECONDS``. It is created exclusively: a hard link of a complete file on local disk, a
conditional put (``If-None-Match: *``) on S3; other fsspec filesystems get fsspec's check-then-write,
which is not atomic. The launcher then reads it back and goes on only if it holds its own run id, and
the commit checks it again, which catches what a filesystem's create let through. A second run finds
the lease and refuses with :class:`OutputError` naming the holder.

A lease whose run is dead does not block: dead means a heartbeat older than ``STALE_SECONDS``, or the
same host and a pid that no longer runs; a file that is no lease (empty, half-written, not JSON) once
it is ``WRITING_SECONDS`` old (younger, its run may be writing it: refused). The next run removes it,
takes its own and deletes the staging that dead runs left (:func:`dead_staging`). Two runs breaking
the same dead lease at once can both believe they hold it: the commit checks the lease again
(:func:`check_held`) before it touches the dataset, so only the last one commits and the other fails
cleanly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from pipelines.errors import OutputError

log = logging.getLogger("zerda")

LEASE_FILE = "_lease.json"
HEARTBEAT_SECONDS = 15.0
STALE_SECONDS = 300.0  # twenty missed heartbeats: a launcher this late is stopped or cut off
WRITING_SECONDS = 30.0  # a lease that is not one yet (empty, half-written) younger than this: its run is writing it
CLEANUP_SECONDS = 10.0  # what each step of a failed run's cleanup may take: storage that is down is not waited on
_RUN_STARTED = "%Y%m%dT%H%M%SZ"  # how a run id starts (pipelines.output.write.new_run_id)


def _now() -> float:
    return time.time()


def read_holder(fs: AbstractFileSystem, root: str) -> dict[str, Any] | None:
    """The lease in OUTPUT, or None when there is none; ``{}`` when it is not a lease (a half-written one is dead).

    A storage failure raises: a lease that could not be read is not a dead one, and breaking it could let
    two runs write one OUTPUT.
    """
    try:
        holder = json.loads(fs.cat_file(f"{root}/{LEASE_FILE}"))
    except FileNotFoundError:
        return None
    except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
        return {}
    return holder if isinstance(holder, dict) else {}


def is_dead(holder: dict[str, Any], now: float | None = None) -> bool:
    """A lease no live run keeps: its heartbeat stopped, or its pid is gone on this host."""
    now = _now() if now is None else now
    heartbeat = holder.get("heartbeat")
    if not isinstance(heartbeat, (int, float)) or now - heartbeat > STALE_SECONDS:
        return True
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int):
        return not _pid_alive(holder["pid"])
    return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def describe(holder: dict[str, Any], now: float | None = None) -> str:
    """The holder in words, for the refusal."""
    now = _now() if now is None else now
    age = now - holder["heartbeat"] if isinstance(holder.get("heartbeat"), (int, float)) else float("nan")
    return (
        f"run {holder.get('run_id')} (host {holder.get('host')}, pid {holder.get('pid')}, "
        f"started {holder.get('started')}, last heartbeat {age:.0f} s ago)"
    )


def check_held(fs: AbstractFileSystem, root: str, run_id: str) -> None:
    """Raise OutputError unless OUTPUT's lease is ``run_id``'s: the commit's guard against a run that took over."""
    holder = read_holder(fs, root)
    if holder is None or holder.get("run_id") != run_id:
        other = "no lease" if holder is None else describe(holder)
        raise OutputError(f"run {run_id} no longer holds the output (now {other}); nothing was committed")


def dead_staging(fs: AbstractFileSystem, staging: str, lease: Lease, now: float | None = None) -> list[str]:
    """Staging folders of runs that cannot be alive: the broken lease's run, and any run id older than
    ``STALE_SECONDS``; never this run's.

    A live run other than the lease holder can only have started a moment ago (the race above), so the age
    of the run id is enough; a folder name zerda did not make is left alone.
    """
    now = _now() if now is None else now
    broken = (lease.broken or {}).get("run_id")
    try:
        folders = [entry.rstrip("/") for entry in fs.ls(staging, detail=False)]
    except FileNotFoundError:
        return []
    names = {folder: folder.rsplit("/", 1)[-1] for folder in folders}
    return [f for f, name in names.items() if name != lease.run_id and (name == broken or _older(name, now))]


def _older(run_id: str, now: float) -> bool:
    try:
        started = datetime.strptime(run_id.split("-", 1)[0], _RUN_STARTED)
    except ValueError:
        return False
    return now - started.replace(tzinfo=timezone.utc).timestamp() > STALE_SECONDS


class Lease:
    """OUTPUT's lease for one run: ``with Lease(fs, root, run_id):`` holds it, heartbeat included."""

    def __init__(self, fs: AbstractFileSystem, root: str, run_id: str) -> None:
        self._fs, self._root, self.run_id = fs, root, run_id
        self._path = f"{root}/{LEASE_FILE}"
        self._record = {
            "run_id": run_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.broken: dict[str, Any] | None = None  # the dead run's lease this run replaced, if any

    def __enter__(self) -> Lease:
        try:
            self.acquire()
        except OutputError:
            raise
        except Exception as err:  # OSError, or botocore's connection errors, which are not OSErrors
            raise OutputError(f"cannot take the lease of output {self._root}: {type(err).__name__}: {err}") from err
        return self

    def __exit__(self, failure: type[BaseException] | None, *_: object) -> None:
        if failure is None:
            self.release()
        else:
            best_effort(self.release, f"remove the lease {self._path}")

    def _payload(self) -> bytes:
        return json.dumps({**self._record, "heartbeat": _now()}).encode()

    def acquire(self) -> None:
        """Take the lease, breaking a dead run's; OutputError naming the holder when a live run has it."""
        self._fs.makedirs(self._root, exist_ok=True)
        holder = read_holder(self._fs, self._root)
        if holder == {} and self._age() < WRITING_SECONDS:  # another run's lease between its create and write
            raise OutputError(f"output {self._root} is being taken by another run (its lease is being written)")
        if holder is not None:
            if not is_dead(holder):
                raise OutputError(f"output {self._root} is in use by {describe(holder)}; wait for it or pick another")
            self._break(holder)
        if not self._create() or (read_holder(self._fs, self._root) or {}).get("run_id") != self.run_id:
            holder = read_holder(self._fs, self._root) or {}
            raise OutputError(f"output {self._root} was just taken by {describe(holder)}")
        self._beat = threading.Thread(target=self._heartbeat, name="zerda-lease", daemon=True)
        self._beat.start()

    def _age(self) -> float:
        """Seconds since the lease file was last written; infinite when the filesystem cannot say."""
        try:
            return _now() - self._fs.modified(self._path).timestamp()
        except (OSError, NotImplementedError, ValueError):
            return float("inf")

    def _break(self, holder: dict[str, Any]) -> None:
        """Remove a dead run's lease, unless it changed since it was read (its run came back, or another broke it)."""
        if read_holder(self._fs, self._root) == holder:
            with contextlib.suppress(FileNotFoundError):
                self._fs.rm_file(self._path)
            self.broken = holder

    def _create(self) -> bool:
        """Write the lease if there is none; False if one appeared first.

        fsspec's generic ``pipe_file(mode="create")`` checks, then writes: two runs can both pass the check.
        So on local disk the lease is written whole to a file of its own, then hard-linked into place
        (``link`` fails if the lease exists, and a lease never appears half-written); s3fs sends a conditional
        put (``If-None-Match: *``), exclusive on the server.
        """
        try:
            if isinstance(self._fs, LocalFileSystem):
                _link_into_place(self._path, self._payload())
            else:
                self._fs.pipe_file(self._path, self._payload(), mode="create")
        except FileExistsError:
            return False
        except OSError:  # S3 answers a failed If-None-Match with 412, which s3fs raises as EINVAL
            if self._fs.exists(self._path):
                return False
            raise
        return True

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            with contextlib.suppress(Exception):  # a missed beat is retried; the commit checks the lease anyway
                holder = read_holder(self._fs, self._root) or {}
                if holder.get("run_id") == self.run_id and not self._stop.is_set():  # not after a release
                    self._fs.pipe_file(self._path, self._payload())

    def release(self) -> None:
        """Stop the heartbeat and remove the lease if it is still this run's."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        try:
            if (read_holder(self._fs, self._root) or {}).get("run_id") == self.run_id:
                self._fs.rm_file(self._path)
        except Exception as err:  # never masks the run's own outcome; a lease left behind is dead (pid gone)
            log.warning("could not remove the lease %s (the next run breaks it): %s", self._path, err)


def best_effort(action: Callable[[], object], what: str, seconds: float = CLEANUP_SECONDS) -> None:
    """Run a step of a failed run's cleanup for at most ``seconds``, logging instead of raising: the run's
    own error is the news, and storage that is down would hold it back behind minutes of retries. What
    is left (staging, a lease whose holder is gone) the next run clears."""
    failures: list[BaseException] = []

    def step() -> None:
        try:
            action()
        except Exception as err:  # not all botocore errors are OSErrors
            failures.append(err)

    worker = threading.Thread(target=step, name="zerda-cleanup", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        log.warning("gave up trying to %s after %g s: no answer from storage (the next run clears it)", what, seconds)
    elif failures:
        log.warning("could not %s (the next run clears it): %s", what, failures[0])


def _link_into_place(path: str, payload: bytes) -> None:
    """Create ``path`` holding ``payload``, atomically and only if it does not exist (FileExistsError)."""
    draft = f"{path}.{os.getpid()}.{threading.get_ident()}.draft"
    with open(draft, "wb") as f:
        f.write(payload)
    try:
        os.link(draft, path)
    finally:
        os.unlink(draft)
