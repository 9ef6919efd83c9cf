"""Faults (issue 4): a worker failing mid-bundle, a killed job, a flaky or dead S3 endpoint, and determinism.

How each fault is made:

- Worker failure: ``ZERDA_INJECT_FAULT="<doc_id>@<marker>"`` with ``tests/fault_injection`` (the test
  process installs it, worker processes through its ``sitecustomize``) makes the chunking DoFn raise
  ``InjectedFault`` once, on the first attempt at that document, after the bundle has already staged files.
  ``--direct_runner_bundle_repeat=1`` replays every bundle, the commit included, as a runner's retries would.
- Killed job: ``python -m pipelines.cli.rechunk`` in its own process group, SIGKILLed as soon as staged
  files appear under ``OUTPUT/_staging``.
- S3 faults: a small HTTP proxy on 127.0.0.1 (:class:`FaultProxy`) in front of moto's server; the job
  reaches it through ``AWS_ENDPOINT_URL`` and is tuned only by the environment (``AWS_RETRY_MODE``,
  ``AWS_MAX_ATTEMPTS``, ``FSSPEC_S3_CONFIG_KWARGS``), as on a real deployment.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import http.client
import io
import json
import lzma
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import zstandard

import pipelines.input.source as source
import pipelines.output.commit as commit_module
import pipelines.output.write as write_module
from pipelines.cli.rechunk import run
from pipelines.errors import StorageError
from pipelines.input.expand import InputFile
from pipelines.input.source import read_file
from pipelines.output.layout import FILES_TABLE
from pipelines.output.manifest import Manifest
from pipelines.records import Reject
from pipelines.settings import InputSettings
from tests.common import DATA, MULTI_PROCESS, REPO
from tests.fault_injection import zerda_fault
from tests.fault_injection.zerda_fault import InjectedFault
from tests.output_checks import read_chunks, read_manifest

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures

ROW_COLUMNS = (
    "chunk_id",
    "doc_id",
    "source",
    "record",
    "chunk_index",
    "text",
    "char_count",
    "start_char",
    "end_char",
    "density",
    "target_size",
    "chunk_type",
    "language",
    "config_fingerprint",
    "density_bucket",
)
REJECT_COLUMNS = ("source", "record", "doc_id", "reason", "message", "excerpt")
FAULT_DOC = "prose-target"  # the last good record of a_prose.jsonl

Row = tuple[Any, ...]


# --- corpora and read-back ------------------------------------------------------------------


def _texts() -> list[str]:
    return [path.read_text(encoding="utf-8") for path in sorted(DATA.iterdir())]


def _document(rng: random.Random, texts: list[str], n: int, parts: int = 2) -> str:
    """A document made of sample texts, with its own first line so that every chunk set differs."""
    return f"Document {n} of the fault corpus, drawn at random.\n\n" + "\n\n".join(rng.sample(texts, parts))


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def write_corpus(directory: Path, documents: int = 40) -> list[Path]:
    """A flat corpus of five file kinds (JSONL, gzip JSONL, Markdown, text, Parquet) with two rejects."""
    rng, texts = random.Random(4), _texts()
    directory.mkdir(parents=True, exist_ok=True)
    prose = [{"id": f"prose-{n}", "text": _document(rng, texts, n)} for n in range(documents)]
    code = [{"id": f"code-{n}", "text": _document(rng, texts, n, 3)} for n in range(documents // 2)]
    files = {
        "a_prose.jsonl": _jsonl(prose)
        + b'{"id": "broken", "text": \n'
        + _jsonl(
            [{"id": "short", "text": "Too short to chunk."}, {"id": FAULT_DOC, "text": _document(rng, texts, -1)}]
        ),
        "b_code.jsonl.gz": gzip.compress(_jsonl(code), mtime=0),
        "c_guide.md": (DATA / "guide.md").read_bytes(),
        "d_notes.txt": (DATA / "arabic_prose.txt").read_bytes(),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    rows = [{"id": f"row-{n}", "text": _document(rng, texts, 1000 + n)} for n in range(5)]
    pq.write_table(pa.Table.from_pylist(rows), directory / "e_rows.parquet")
    return sorted(directory.iterdir())


def write_config(path: Path, max_rows_per_file: int) -> Path:
    """Settings with small staged files, so that a bundle writes files before it ends."""
    path.write_text(f"output:\n  max_rows_per_file: {max_rows_per_file}\n", encoding="utf-8")
    return path


def rows_of(table: pa.Table) -> list[Row]:
    """Every chunk row as a tuple of ROW_COLUMNS, sorted: equal lists mean byte-for-byte equal rows."""
    return sorted(zip(*(table.column(c).to_pylist() for c in ROW_COLUMNS), strict=True))


def chunk_rows(output: Path) -> list[Row]:
    return rows_of(read_chunks(output))


def reject_rows(output: Path) -> list[Row]:
    table = ds.dataset(str(output / "_rejects"), format="parquet").to_table()
    return sorted(zip(*(table.column(c).to_pylist() for c in REJECT_COLUMNS), strict=True))


def assert_clean(output: Path, manifest: dict[str, Any]) -> None:
    """Committed and nothing else: _SUCCESS, no staging, exactly the manifest's files, no doubled chunk."""
    assert (output / "_SUCCESS").exists()
    assert not (output / "_staging").exists(), "staged leftovers after the commit"
    on_disk = sorted(
        str(p.relative_to(output)) for p in output.rglob("*") if p.is_file() and p.suffix in (".parquet", ".pq")
    )
    on_disk.remove(FILES_TABLE)  # the manifest's table of the files, which it names
    assert on_disk == sorted(f["path"] for f in manifest["output"]["files"])
    assert sorted(p.name for p in output.iterdir() if p.is_file()) == ["_SUCCESS", "_manifest.json"]
    ids = read_chunks(output).column("chunk_id").to_pylist()
    assert len(ids) == len(set(ids)) == manifest["counts"]["chunks"]


def staged_files(output: Path) -> list[Path]:
    staging = output / "_staging"
    return [p for p in staging.rglob("*") if p.is_file()] if staging.exists() else []


def counts_of(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: manifest["counts"][k] for k in ("records_read", "documents_chunked", "rejects", "chunks")}


# --- 1. a worker failure in the middle of a bundle ------------------------------------------


@pytest.fixture(scope="module")
def fault_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(corpus folder, config with 10-row staged files)."""
    root = tmp_path_factory.mktemp("fault")
    write_corpus(root / "corpus")
    return root / "corpus", write_config(root / "small_files.yaml", 10)


@pytest.fixture(scope="module")
def fault_reference(fault_corpus: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean run of the fault corpus: what every retried or repeated run must equal."""
    corpus, config = fault_corpus
    output = tmp_path_factory.mktemp("fault_reference") / "out"
    run(["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet"])
    return output


@pytest.mark.parametrize("workers", [[], MULTI_PROCESS], ids=["in-memory", "2-worker-processes"])
def test_worker_failure_fails_the_job_and_the_retried_job_has_every_chunk_once(
    fault_corpus: tuple[Path, Path],
    fault_reference: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    workers: list[str],
) -> None:
    corpus, config = fault_corpus
    output, marker = tmp_path / "out", tmp_path / "fault.marker"
    zerda_fault.arm(monkeypatch, FAULT_DOC, marker)  # here, and in worker processes via its sitecustomize
    argv = ["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet", *workers]

    # The DirectRunner does not retry a bundle: the job fails. In memory, Beam re-raises the InjectedFault;
    # from worker processes, a RuntimeError carrying the worker's traceback.
    with pytest.raises(RuntimeError, match=f"injected worker failure on document '{FAULT_DOC}'") as failure:
        run(argv)
    assert failure.type is InjectedFault or "InjectedFault" in str(failure.value)
    assert marker.exists(), "the fault fired"
    assert not (output / "_SUCCESS").exists() and not (output / "_manifest.json").exists()
    assert not staged_files(output), "the failed run deleted its own staging: nothing will commit it"

    manifest = run(argv)  # the retried job: the same command, the same environment
    assert_clean(output, manifest)
    rows, expected = chunk_rows(output), chunk_rows(fault_reference)
    assert rows == expected
    assert any(r[1] == FAULT_DOC for r in rows), "the document that failed is in the output, once"
    assert reject_rows(output) == reject_rows(fault_reference)
    assert counts_of(manifest) == counts_of(read_manifest(fault_reference))


def test_repeated_bundles_and_a_repeated_commit_double_nothing(
    fault_corpus: tuple[Path, Path], fault_reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--direct_runner_bundle_repeat=1 runs every bundle twice; only the last attempt's files may count."""
    corpus, config = fault_corpus
    staged: list[str] = []
    commits: list[int] = []
    original_close, original_commit = write_module._StageParquet._close, commit_module._FinishCommit.process

    def counting_close(self: Any, directory: str) -> Any:
        staged.append(directory)
        return original_close(self, directory)

    def counting_commit(self: Any, *args: Any) -> Any:
        commits.append(1)
        yield from original_commit(self, *args)

    monkeypatch.setattr(write_module._StageParquet, "_close", counting_close)
    monkeypatch.setattr(commit_module._FinishCommit, "process", counting_commit)
    output = tmp_path / "out"
    argv = ["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet"]
    manifest = run([*argv, "--direct_runner_bundle_repeat=1"])

    assert len(commits) == 2, "the commit ran twice: a retried commit"
    written = [e for e in manifest["output"]["files"] if not e["path"].startswith(("_index/", "_ids/"))]  # one a task
    assert len(staged) >= 2 * len(written), "every bundle staged its files twice"
    assert_clean(output, manifest)
    assert chunk_rows(output) == chunk_rows(fault_reference)
    assert reject_rows(output) == reject_rows(fault_reference)
    assert counts_of(manifest) == counts_of(read_manifest(fault_reference))


# --- 2. a job killed midway -----------------------------------------------------------------


def write_big_corpus(directory: Path, megabytes: int = 32, files: int = 4) -> None:
    """About ``megabytes`` MB of JSONL in ``files`` files: long prose documents (big chunks, a fast run)."""
    rng = random.Random(11)
    texts = [
        (DATA / name).read_text(encoding="utf-8") for name in ("english_prose.txt", "arabic_prose.txt", "guide.md")
    ]
    directory.mkdir(parents=True)
    per_file, n = megabytes * 1_000_000 // files, 0
    for index in range(files):
        with (directory / f"part-{index}.jsonl").open("w", encoding="utf-8") as f:
            size = 0
            while size < per_file:
                text = f"Document {n}.\n\n" + "\n\n".join(rng.choice(texts) for _ in range(6))
                line = json.dumps({"id": f"big-{n}", "text": text}, ensure_ascii=False) + "\n"
                f.write(line)
                size += len(line.encode())
                n += 1


def test_killed_job_leaves_no_success_and_the_next_run_is_complete_and_clean(tmp_path: Path) -> None:
    corpus, output, reference = tmp_path / "big", tmp_path / "out", tmp_path / "reference"
    write_big_corpus(corpus, megabytes=12)  # its first staged file appears ~4 s before it would end
    config = write_config(tmp_path / "small_files.yaml", 500)
    run(["--output", str(output), "--quiet"])  # a finished output (the sample corpus) is there before
    assert (output / "_SUCCESS").exists()
    argv = ["--input", f"{corpus}/*.jsonl", "--output", str(output), "--config", str(config), "--quiet"]

    log = (tmp_path / "killed.log").open("wb")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    job = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,  # its own process group: the kill takes any child with it
    )
    try:
        deadline = time.monotonic() + 60
        while not staged_files(output) and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job.poll() is None, "the job ended before it could be killed midway"
        assert staged_files(output), "no staged file appeared within 60 s"
        os.killpg(job.pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        log.close()
    assert job.returncode == -signal.SIGKILL
    # killed before its commit: the previous output is still the finished one, its _SUCCESS included
    assert (output / "_SUCCESS").exists()
    assert not any(str(corpus) in entry["source"] for entry in read_manifest(output)["inputs"])
    leftovers = staged_files(output)
    assert leftovers

    manifest = run(argv)  # the next run into the same OUTPUT
    assert_clean(output, manifest)
    assert not any(p.exists() for p in leftovers)
    expected = run(["--input", f"{corpus}/*.jsonl", "--output", str(reference), "--config", str(config), "--quiet"])
    assert chunk_rows(output) == chunk_rows(reference)
    assert counts_of(manifest) == counts_of(expected)
    assert {r[2] for r in chunk_rows(output)} == {str(p) for p in sorted(corpus.iterdir())}, "no stale rows"


# --- 3. determinism -------------------------------------------------------------------------


def test_same_rows_in_any_order_of_files_and_with_one_or_two_workers(
    fault_corpus: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, _ = fault_corpus
    files = sorted(str(p) for p in corpus.iterdir())
    globs = [f"{corpus}/*.parquet", f"{corpus}/*.txt", f"{corpus}/*.md", f"{corpus}/*.jsonl.gz", f"{corpus}/*.jsonl"]
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # worker processes import pipelines from the checkout
    variants = {
        "folder, 1 worker": ["--input", str(corpus)],
        "files reversed, 2 worker processes": [arg for f in reversed(files) for arg in ("--input", f)] + MULTI_PROCESS,
        "globs reversed, 1 worker": [arg for g in globs for arg in ("--input", g)],
    }
    results = {}
    for name, inputs in variants.items():
        output = tmp_path / name.replace(" ", "_").replace(",", "")
        manifest = run([*inputs, "--output", str(output), "--quiet"])
        results[name] = (chunk_rows(output), reject_rows(output), counts_of(manifest), read_chunks(output).schema)

    (rows, rejects, counts, schema), *others = results.values()
    assert len(rows) > 100 and rejects and {r[2] for r in rows} == set(files)
    assert len({r[0] for r in rows}) == len(rows)
    for name, (other_rows, other_rejects, other_counts, other_schema) in zip(list(results)[1:], others, strict=True):
        assert other_rows == rows, f"rows differ: {name}"
        assert other_rejects == rejects, f"rejects differ: {name}"
        assert other_counts == counts and other_schema == schema, name


# --- 4. storage failures while reading are retried, never rejected --------------------------


class _FailingRead(io.RawIOBase):
    """Stored bytes whose reads fail, as a dropped connection would, once ``fail_at`` bytes are asked for."""

    def __init__(self, data: bytes, fail_at: int) -> None:
        super().__init__()
        self._data = io.BytesIO(data)
        self._fail_at = fail_at

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._data.seek(offset, whence)

    def tell(self) -> int:
        return self._data.tell()

    def read(self, size: int = -1) -> bytes:
        if size < 0 or self._data.tell() + size > self._fail_at:
            raise OSError(16, "Please reduce your request rate.")
        return self._data.read(size)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink, row_group_size=50)
    return sink.getvalue()


_RECORDS = [{"id": n, "text": f"Record {n}. " + "word " * 300} for n in range(1000)]
_STORED: dict[str, Callable[[], bytes]] = {  # about 1.5 MB of records in each format
    "a.jsonl": lambda: _jsonl(_RECORDS),
    "a.jsonl.gz": lambda: gzip.compress(_jsonl(_RECORDS), mtime=0),
    "a.jsonl.bz2": lambda: bz2.compress(_jsonl(_RECORDS)),
    "a.jsonl.zst": lambda: zstandard.ZstdCompressor().compress(_jsonl(_RECORDS)),
    "a.jsonl.xz": lambda: lzma.compress(_jsonl(_RECORDS), preset=0),
    "a.md": lambda: ("A long document. " * 100_000).encode(),
    "a.parquet": lambda: _parquet(_RECORDS),
    "a.parquet.gz": lambda: gzip.compress(_parquet(_RECORDS), mtime=0),
}


@pytest.mark.parametrize("where", [0.0, 0.6], ids=["at-start", "midway"])
@pytest.mark.parametrize("name", list(_STORED))
def test_storage_failure_while_reading_raises_storage_error_not_a_reject(
    name: str, where: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through every decompressor and pyarrow, a failing read stays a StorageError: the runner retries
    the bundle instead of recording a good file as ``unreadable_file``."""
    data = _STORED[name]()
    monkeypatch.setattr(source, "_open", lambda url: _FailingRead(data, int(len(data) * where)))
    items: list[Any] = []
    with pytest.raises(StorageError, match=f"reading s3://bucket/{name} failed: OSError: .*reduce your request rate"):
        items.extend(read_file(InputFile(f"s3://bucket/{name}", name), InputSettings()))
    assert not [i for i in items if isinstance(i, Reject)]


# --- 5. S3 answering with errors, slowly, or not at all ------------------------------------

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "expect", "te", "upgrade"}
_S3_ERRORS = {
    "503": (503, "SlowDown", "Please reduce your request rate."),
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
}
FLAKY_FAULTS = ("503", "500", "drop", "slow")  # in turn, on the first attempt of each chosen request
SLOW_SECONDS = 2.5  # over the read timeout the job is given (FSSPEC_S3_CONFIG_KWARGS)


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # URL-decoded, with the query
    range: str

    @property
    def is_object_read(self) -> bool:
        return self.method == "GET" and "/corpus/" in self.path and "?" not in self.path


@dataclass
class FaultPlan:
    """What the proxy does to each request (thread-safe), and a log of what it did.

    ``first_attempt``: requests it picks fail once, the first time they are seen (a retry is the same
    method, path and range), with the next fault of FLAKY_FAULTS. ``down_from``: from the first
    request it picks on, every request gets ``down_fault``.
    """

    first_attempt: Callable[[Request], bool] = lambda request: False
    down_from: Callable[[Request], bool] = lambda request: False
    down_fault: str = "503"
    is_down: bool = False
    seen: set[Request] = field(default_factory=set)
    log: list[tuple[str, Request]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, request: Request) -> str:
        with self.lock:
            self.is_down = self.is_down or self.down_from(request)
            if self.is_down:
                fault = self.down_fault
            elif request not in self.seen and self.first_attempt(request):
                fault = FLAKY_FAULTS[sum(f != "ok" for f, _ in self.log) % len(FLAKY_FAULTS)]
            else:
                fault = "ok"
            self.seen.add(request)
            self.log.append((fault, request))
            return fault

    def faults(self) -> list[tuple[str, Request]]:
        with self.lock:
            return [(f, r) for f, r in self.log if f != "ok"]


class _ProxyHandler(BaseHTTPRequestHandler):
    """Forwards one request to moto, or spoils it as the plan says."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the S3 clients expect
    server: FaultProxy

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: one line per request otherwise."""

    def _body(self) -> bytes:
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = bytearray()
        while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
            body += self.rfile.read(size)
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return bytes(body)

    def _drop(self) -> None:
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and not (name.lower() == "content-length" and self.command != "HEAD"):
                self.send_header(name, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
        except OSError:  # the client gave up waiting (the slow fault)
            self.close_connection = True

    def _handle(self) -> None:
        body = self._body()
        fault = self.server.plan.decide(Request(self.command, unquote(self.path), self.headers.get("Range", "")))
        if fault == "cut":  # the connection closes before any answer
            return self._drop()
        if fault in _S3_ERRORS:
            status, code, message = _S3_ERRORS[fault]
            xml = (
                f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            )
            return self._answer(status, [("Content-Type", "application/xml")], xml.encode())
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection(*self.server.upstream, timeout=30)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            status, answer_headers, answer = response.status, response.getheaders(), response.read()
        finally:
            upstream.close()
        if fault == "drop":  # done upstream, but the answer is lost: the retry repeats it
            return self._drop()
        if fault == "slow":  # done upstream, answered after the client's read timeout
            time.sleep(SLOW_SECONDS)
        self._answer(status, answer_headers, answer)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle


class FaultProxy(ThreadingHTTPServer):
    """An HTTP proxy on 127.0.0.1 in front of moto's server, spoiling requests as its plan says."""

    daemon_threads = True

    def __init__(self, upstream: str, plan: FaultPlan) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.plan = plan

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def fault_proxy(upstream: str, plan: FaultPlan) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream, plan)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(10)


@dataclass(frozen=True)
class S3Corpus:
    bucket: str
    keys: tuple[str, ...]
    reference: str  # a clean run's output URL, straight to moto

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


@pytest.fixture(scope="module")
def s3_corpus(s3_env: S3Env, tmp_path_factory: pytest.TempPathFactory) -> S3Corpus:
    """Four corpus files (two rejects among them) uploaded to moto, and a reference run straight to moto."""
    bucket = s3_env.new_bucket("zerda-faults")
    local = [p for p in write_corpus(tmp_path_factory.mktemp("s3_corpus"), documents=6) if p.suffix != ".txt"]
    client = s3_env.client()
    for path in local:
        client.put_object(Bucket=bucket, Key=f"corpus/{path.name}", Body=path.read_bytes())
    corpus = S3Corpus(bucket, tuple(f"corpus/{p.name}" for p in local), f"s3://{bucket}/reference")
    run(["--input", corpus.url("corpus/"), "--output", corpus.reference, "--quiet"])
    return corpus


def s3_rows(s3_env: S3Env, output: str) -> list[Row]:
    fs = s3_env.filesystem()
    return rows_of(
        ds.dataset(output.removeprefix("s3://"), filesystem=fs, format="parquet", partitioning="hive").to_table()
    )


def s3_listing(s3_env: S3Env, output: str) -> list[str]:
    root = output.removeprefix("s3://")
    return sorted(path[len(root) + 1 :] for path in s3_env.filesystem().find(root))


def run_job_through(
    proxy: FaultProxy, argv: list[str], max_attempts: int, timeout: float = 90
) -> tuple[int, str, float]:
    """``python -m pipelines.cli.rechunk`` with S3 reached through the proxy; (exit code, stderr, seconds)."""
    env = {
        **os.environ,  # the fake credentials of s3_env
        "AWS_ENDPOINT_URL": proxy.url,
        "AWS_RETRY_MODE": "standard",
        "AWS_MAX_ATTEMPTS": str(max_attempts),
        "FSSPEC_S3_CONFIG_KWARGS": json.dumps({"read_timeout": 1, "connect_timeout": 1}),
        "PYTHONPATH": str(REPO),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv, "--quiet"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stderr, time.monotonic() - started


def test_s3_errors_and_slow_answers_are_retried_and_the_output_is_complete(
    s3_env: S3Env, s3_corpus: S3Corpus, moto_endpoint: str
) -> None:
    """The first attempt of every corpus read and every write (PUT) fails: 503, 500, dropped, too slow."""
    plan = FaultPlan(first_attempt=lambda r: r.is_object_read or r.method == "PUT")
    output = s3_corpus.url("flaky")
    with fault_proxy(moto_endpoint, plan) as proxy:
        code, stderr, _ = run_job_through(
            proxy, ["--input", s3_corpus.url("corpus/"), "--output", output], max_attempts=3
        )
    assert code == 0, stderr[-3000:]

    faults = plan.faults()
    assert {f for f, _ in faults} == set(FLAKY_FAULTS)
    assert {r.path for _, r in faults if r.is_object_read} == {f"/{s3_corpus.bucket}/{key}" for key in s3_corpus.keys}
    written = {r.path.split("/")[3] for _, r in faults if r.method == "PUT"}  # /bucket/flaky/<entry>/...
    assert {"_staging", "_rejects", "_manifest.json", "_SUCCESS"} <= written, written
    assert any(entry.startswith("density_bucket=") for entry in written), "the commit's copies were retried"
    assert s3_rows(s3_env, output) == s3_rows(s3_env, s3_corpus.reference)
    files = s3_listing(s3_env, output)
    assert "_SUCCESS" in files and not [f for f in files if f.startswith("_staging")]
    manifest = Manifest.load(s3_env.filesystem(), output.removeprefix("s3://")).with_lists()
    assert sorted(f["path"] for f in manifest["output"]["files"]) == [
        f for f in files if f.endswith((".parquet", ".pq")) and f != FILES_TABLE
    ]


def _object_read(request: Request) -> bool:
    return request.is_object_read


def _after_staging_put(request: Request) -> bool:
    return request.method == "PUT" and "/_staging/" in request.path


def _first_dataset_copy(request: Request) -> bool:
    return request.method == "PUT" and "/density_bucket=" in request.path and "/_staging/" not in request.path


# (phase, the request S3 goes down at, its answer from then on, the job's last line, AWS_MAX_ATTEMPTS). s3fs
# itself tries a call 5 times on a throttling answer (503 SlowDown) or a closed connection: botocore's
# attempts on top of those only add their own back-off (up to a second each, for every call of the run
# and of its cleanup), so the reads and writes phases leave the retries to s3fs. A 500 only botocore retries.
_COMMIT_FAILED = r"^zerda: error: the commit failed midway .*internal error.*OUTPUT is incomplete"  # one line
DOWN_PHASES = [
    ("reads", _object_read, "503", r"StorageError: reading s3://\S+/corpus/\S+ failed: .*reduce your request rate", 1),
    ("writes", _after_staging_put, "cut", r"Connection was closed .* URL: \"http://127\.0\.0\.1:\d+/\S+/_staging/", 1),
    ("commit", _first_dataset_copy, "500", _COMMIT_FAILED, 2),
]


@pytest.mark.parametrize(
    ("phase", "down_from", "down_fault", "message", "max_attempts"), DOWN_PHASES, ids=[p[0] for p in DOWN_PHASES]
)
def test_s3_down_fails_the_job_clearly_without_success(
    s3_env: S3Env,
    s3_corpus: S3Corpus,
    moto_endpoint: str,
    phase: str,
    down_from: Callable[[Request], bool],
    down_fault: str,
    message: str,
    max_attempts: int,
) -> None:
    """S3 stops answering while the job reads, stages or commits: a bounded failure, a clear last line."""
    output = s3_corpus.url(f"down-{phase}")
    fs = s3_env.filesystem()
    fs.copy(s3_corpus.reference.removeprefix("s3://"), output.removeprefix("s3://"), recursive=True)
    assert "_SUCCESS" in s3_listing(s3_env, output)  # a finished previous run is there
    plan = FaultPlan(down_from=down_from, down_fault=down_fault)
    argv = ["--input", s3_corpus.url("corpus/"), "--output", output]
    with fault_proxy(moto_endpoint, plan) as proxy:
        code, stderr, seconds = run_job_through(proxy, argv, max_attempts)

    assert code == 1
    last_line = stderr.strip().splitlines()[-1]
    assert re.search(message, last_line), stderr[-4000:]
    assert plan.is_down and max(Counter(r for _, r in plan.faults()).values()) >= 2, "the failing call was retried"
    assert seconds < 45, f"took {seconds:.0f} s to give up"
    left = s3_listing(s3_env, output)
    if phase != "commit":  # the dataset was never touched: the previous output is still finished and whole
        assert "_SUCCESS" in left
        assert s3_rows(s3_env, output) == s3_rows(s3_env, s3_corpus.reference)
    else:  # the commit had begun replacing it: no _SUCCESS over a half-moved dataset
        assert "_SUCCESS" not in left

    if phase == "commit":  # the endpoint is back: the next run replaces what the broken commit left
        assert any(f.startswith("_staging/") for f in left), left
        manifest = run([*argv, "--quiet"])
        assert s3_rows(s3_env, output) == s3_rows(s3_env, s3_corpus.reference)
        files = s3_listing(s3_env, output)
        assert "_SUCCESS" in files and not [f for f in files if f.startswith("_staging")]
        assert sorted(f["path"] for f in manifest["output"]["files"]) == [
            f for f in files if f.endswith((".parquet", ".pq")) and f != FILES_TABLE
        ]
