"""Issue 24: nothing is lost when the storage misbehaves.

Every fault is real: a folder the job cannot list (the CLI run by root without the capabilities that let
root read any folder, ``setpriv``), a temp directory that fills (a 1 MiB tmpfs mounted for the test).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError
from s3fs.errors import translate_boto_error

from pipelines.cli.rechunk import run
from pipelines.errors import EnvironmentFault
from pipelines.input import source
from pipelines.input.expand import InputFile
from pipelines.input.source import fault_kind, read_file
from pipelines.output.layout import PARTITION_COLUMN
from pipelines.settings import InputSettings
from tests.common import MULTI_PROCESS, REPO
from tests.fault_injection import zerda_fault
from tests.output_checks import read_chunks

_PROSE = "The fennec fox sleeps by day in a burrow under the dunes and hunts by night. "
# root, without these, is held to a folder's mode like any user (tests run as root, who reads any folder)
_UNPRIVILEGED = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_read_search,-dac_override"]


def _jsonl(path: Path, prefix: str, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps({"id": f"{prefix}{n}", "text": f"Document {n}. " + _PROSE * (4 + n)}) for n in range(count))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _snapshot(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}


def _cli(argv: list[str], prefix: list[str] | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The command line in its own process (behind ``prefix``): its exit code and its stderr."""
    command = [*(prefix or []), sys.executable, "-m", "pipelines.cli.rechunk", *argv, "--quiet"]
    done = subprocess.run(
        command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, capture_output=True, text=True
    )
    return done.returncode, done.stderr


def _listing_denied(folder: Path) -> bool:
    """Whether a process behind ``_UNPRIVILEGED`` is refused the listing of ``folder``, its names and sizes."""
    if shutil.which("setpriv") is None:
        return False
    listing = f"import os; [os.stat(e) for e in os.scandir({str(folder)!r})]"
    probe = subprocess.run([*_UNPRIVILEGED, sys.executable, "-c", listing], capture_output=True)
    return probe.returncode != 0


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A corpus with a sub-folder, ``locked``, and ``after.jsonl`` sorted after it."""
    root = tmp_path / "corpus"
    _jsonl(root / "a.jsonl", "a", 3)
    _jsonl(root / "locked" / "l.jsonl", "l", 4)
    _jsonl(root / "locked" / "deeper" / "m.jsonl", "m", 2)
    _jsonl(root / "z" / "after.jsonl", "z", 2)
    return root


def _lock(folder: Path, mode: int) -> None:
    folder.chmod(mode)
    if not _listing_denied(folder):
        folder.chmod(0o755)
        pytest.skip("the kernel does not let setpriv drop CAP_DAC_READ_SEARCH/CAP_DAC_OVERRIDE: root lists any folder")


# (what is locked, its mode, the input): mode 000 cannot be listed; 0444 lists its names, but not their sizes
LOCKED = [
    ("locked", 0o000, "{root}"),
    ("locked", 0o000, "{root}/**"),
    ("locked", 0o000, "{root}/*/*.jsonl"),
    ("locked", 0o000, "{root}/l*"),
    ("locked", 0o000, "{root}/locked/l.jsonl"),  # a file named below it: not "matches no file"
    ("locked/deeper", 0o000, "{root}"),
    ("locked", 0o444, "{root}"),
]


@pytest.mark.parametrize("incremental", [False, True], ids=["full", "incremental"])
@pytest.mark.parametrize(("locked", "mode", "pattern"), LOCKED, ids=[f"{p[0]}-{p[1]:o}-{p[2]}" for p in LOCKED])
def test_a_folder_that_cannot_be_listed_stops_the_job_before_anything_is_written(
    corpus: Path, tmp_path: Path, locked: str, mode: int, pattern: str, incremental: bool
) -> None:
    """Left out in silence, its files would be missing from the output and, incrementally, listed as removed
    in ``_changes`` (the embedding job deletes them from the vector store): exit 2, one line, OUTPUT as it was."""
    output = tmp_path / "out"
    argv = ["--input", pattern.format(root=corpus), "--output", str(output)]
    run([*argv, "--quiet"])
    sources = set(read_chunks(output).column("source").to_pylist())
    assert any(f"/{locked}/" in source for source in sources), sources  # the folder's documents were there
    before = _snapshot(output)
    _lock(corpus / locked, mode)
    try:
        code, stderr = _cli([*argv, *(["--incremental"] if incremental else [])], _UNPRIVILEGED)
    finally:
        (corpus / locked).chmod(0o755)

    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("zerda: error: "), stderr
    assert f"folder '{corpus / locked}" in lines[0] and "Permission denied" in lines[0], stderr
    assert _snapshot(output) == before  # no removals listed, no chunk lost, the previous _SUCCESS kept


@pytest.mark.parametrize(
    ("locked", "pattern"), [("_old", "{root}"), (".Trash-0", "{root}/**"), ("locked", "{root}/z*/*.jsonl")]
)
def test_a_folder_never_read_may_be_unlistable(corpus: Path, tmp_path: Path, locked: str, pattern: str) -> None:
    """A ``.``/``_`` folder is skipped, and one the glob cannot reach is not read: neither stops the job."""
    if locked != "locked":
        shutil.copytree(corpus / "locked", corpus / locked)
    output = tmp_path / "out"
    _lock(corpus / locked, 0)
    try:
        code, stderr = _cli(["--input", pattern.format(root=corpus), "--output", str(output)], _UNPRIVILEGED)
    finally:
        (corpus / locked).chmod(0o755)
    assert code == 0, stderr
    assert (output / "_SUCCESS").exists()


def _in_small_tmpfs(folder: Path) -> list[str]:
    """A command prefix: the command runs in its own mount namespace, with a 1 MiB tmpfs on ``folder``."""
    folder.mkdir()
    mount = 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"'
    probe = subprocess.run(["unshare", "-m", "sh", "-c", mount, str(folder), "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"the kernel refuses a tmpfs in a new mount namespace: {probe.stderr.strip()}")
    return ["unshare", "-m", "sh", "-c", mount, str(folder)]


def _big_compressed_parquet(path: Path, megabytes: int) -> int:
    """A gzip-compressed Parquet file that decompresses to ``megabytes``: spooled to temp disk to be read."""
    rows = megabytes * 2**20 // 4096 + 1
    texts = [f"Document {n}. " + (_PROSE * 60)[: 4096 - 20] for n in range(rows)]
    table = pa.table({"id": [f"p{n}" for n in range(rows)], "text": texts})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="none")
    path.write_bytes(gzip.compress(sink.getvalue().to_pybytes(), compresslevel=1))
    return rows


def test_a_full_temp_disk_fails_the_job_and_commits_no_reject(tmp_path: Path) -> None:
    """A compressed Parquet file is spooled to TMPDIR; a full TMPDIR says nothing of the file, so it must not
    become an ``unreadable_file`` reject committed with ``_SUCCESS`` (thousands of documents gone): the job
    fails naming the cause, and OUTPUT keeps its previous output."""
    corpus, output = tmp_path / "corpus", tmp_path / "out"
    _jsonl(corpus / "a.jsonl", "a", 3)
    argv = ["--input", str(corpus), "--output", str(output)]
    run([*argv, "--quiet"])
    before = _snapshot(output)
    _big_compressed_parquet(corpus / "big.parquet.gz", 72)  # past the 64 MiB a spool keeps in memory
    temp = tmp_path / "tmpfs"
    code, stderr = _cli(argv, _in_small_tmpfs(temp), env={"TMPDIR": str(temp)})

    assert code == 1, stderr
    assert "Traceback" not in stderr, stderr[-3000:]  # Beam's log line of the failed step, then zerda's line
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("zerda: error: reading ") and "big.parquet.gz" in last, last
    assert "No space left on device" in last and str(temp) in last, last
    assert _snapshot(output) == before  # no _SUCCESS over a reject: the previous output, whole
    assert not list(temp.iterdir())  # the tmpfs was the child's own: nothing here


def _raised(action: Callable[[], object]) -> BaseException:
    try:
        action()
    except BaseException as err:  # the real error of a real operation, classified below
        return err
    raise AssertionError("the action did not fail")


def _write_to_dev_full() -> None:
    with open("/dev/full", "wb", buffering=0) as full:
        full.write(b"x")


def _closed_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    socket.create_connection(("127.0.0.1", port), timeout=5)


def _parquet_with_bad_footer() -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"text": ["a"]}), sink)
    data = sink.getvalue().to_pybytes()
    pq.read_table(pa.BufferReader(data[:-12] + b"\0" * 8 + data[-4:]))


FAULTS = [
    ("corrupt-gzip", lambda: gzip.decompress(b"\x1f\x8b\x08\x00garbage-and-more"), "data"),
    ("truncated-gzip", lambda: gzip.decompress(gzip.compress(b"x" * 1000)[:-9]), "data"),
    ("bad-parquet-footer", _parquet_with_bad_footer, "data"),
    ("not-parquet", lambda: pq.read_table(pa.BufferReader(b"PAR1 not a parquet file PAR1")), "data"),
    ("undecodable-bytes", lambda: b"\xff\xfe\xfa".decode("utf-8"), "data"),
    ("missing-file", lambda: Path("/nonexistent/zerda").read_bytes(), "data"),
    ("disk-full", _write_to_dev_full, "environment"),
    ("out-of-memory", lambda: bytearray(2**62), "environment"),
    ("connection-refused", _closed_port, "transient"),
]


@pytest.mark.parametrize(("action", "kind"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_errors_are_classified_by_their_codes(action: Callable[[], object], kind: str) -> None:
    """Real errors of real operations: only a file's own damage is ``data``, the one kind a reject records."""
    error = _raised(action)
    assert fault_kind(error) == kind
    try:
        raise RuntimeError("wrapped by a library") from error
    except RuntimeError as wrapped:
        assert fault_kind(wrapped) == kind  # found through the errors it was raised from


def _s3_access_denied() -> OSError:
    """What s3fs raises for an object the credentials may not read: a PermissionError without an errno."""
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")
    return translate_boto_error(denied)


@pytest.mark.parametrize(
    "denial",
    [lambda: PermissionError(errno.EACCES, "Permission denied"), _s3_access_denied],
    ids=["local-EACCES", "s3-AccessDenied"],
)
def test_a_denied_read_fails_the_job_local_or_remote(
    denial: Callable[[], OSError], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the worker may not read is the environment's fault, whether the error has EACCES (local) or only
    its class (an object store's): as a reject, its documents would leave the output (it was one on S3)."""
    error = denial()
    assert isinstance(error, PermissionError) and fault_kind(error) == "environment"

    def denied(url: str) -> object:
        raise error

    monkeypatch.setattr(source, "_open", denied)
    with pytest.raises(EnvironmentFault, match=r"Access Denied|Permission denied") as raised:
        list(read_file(InputFile("s3://bucket/a.jsonl", "a.jsonl"), InputSettings()))
    assert "(permission denied: the worker's user may not read it)" in str(raised.value)
    assert "temp disk" not in str(raised.value)  # not the worker's disk or memory: said so, it misled


@pytest.mark.parametrize("workers", [[], MULTI_PROCESS], ids=["in-memory", "2-worker-processes"])
def test_one_transient_read_error_during_a_carry_keeps_the_run_incremental(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    """The first read of a previous chunk file fails with EIO (``tests/fault_injection``): read again after a
    pause, it carries; without that, one passing hiccup turned the run into a full one, every document
    chunked again. The rows are still exactly a full run's."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    _jsonl(corpus / "a.jsonl", "a", 4)
    _jsonl(corpus / "b.jsonl", "b", 4)
    run(["--input", str(corpus), "--output", str(output), "--quiet"])
    _jsonl(corpus / "a.jsonl", "e", 4)  # a.jsonl edited; b.jsonl's documents are carried
    marker = tmp_path / "read-fault.marker"
    with monkeypatch.context() as armed:
        zerda_fault.arm_read(armed, f"{output}/{PARTITION_COLUMN}=", marker)  # committed chunks, not staging
        manifest = run(["--input", str(corpus), "--output", str(output), "--quiet", "--incremental", *workers])
    run(["--input", str(corpus), "--output", str(fresh), "--quiet"])

    assert marker.exists(), "the read fault never fired: no previous chunk file was read"
    assert manifest["changes"]["incremental"] is True, manifest["changes"]["reason"]
    assert manifest["changes"]["documents_unchanged"] == 4
    assert read_chunks(output).sort_by("chunk_id") == read_chunks(fresh).sort_by("chunk_id")


@pytest.mark.parametrize("incremental", [False, True], ids=["full", "incremental"])
def test_a_file_the_job_may_not_read_fails_the_job_and_keeps_the_previous_output(
    corpus: Path, tmp_path: Path, incremental: bool
) -> None:
    """Like a folder it cannot list: as a reject, its documents would leave the output (and, incrementally,
    be listed as removed); the job fails instead, naming the file, and OUTPUT stays as it was."""
    output = tmp_path / "out"
    argv = ["--input", str(corpus), "--output", str(output)]
    run([*argv, "--quiet"])
    before = _snapshot(output)
    locked = corpus / "z" / "after.jsonl"
    locked.chmod(0)
    try:
        if subprocess.run([*_UNPRIVILEGED, "cat", str(locked)], capture_output=True).returncode == 0:
            pytest.skip("the kernel does not let setpriv drop CAP_DAC_OVERRIDE: root reads any file")
        code, stderr = _cli([*argv, *(["--incremental"] if incremental else [])], _UNPRIVILEGED)
    finally:
        locked.chmod(0o644)
    assert code != 0, stderr
    assert "after.jsonl" in stderr and "Permission denied" in stderr, stderr
    assert _snapshot(output) == before
