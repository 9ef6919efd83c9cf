"""What the launcher hands the runner, and what it costs: a job graph whose size does not grow with the corpus,
a launch whose I/O does not either, and a listing of the inputs (on the workers) with no request a file."""

from __future__ import annotations

import builtins
import logging
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import pytest
import s3fs

import pipelines.cli.rechunk
import pipelines.redact
from pipelines.cli.rechunk import build_pipeline, run
from pipelines.incremental.previous import Previous
from pipelines.input.expand import InputFile, expand_inputs, source_name
from pipelines.records import FileReport
from pipelines.settings import load_settings

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures


def _graph_bytes(files: int, output: Path) -> int:
    """The serialized job graph of an incremental run over a glob matching ``files`` input files, every other one
    unchanged, into an output whose previous run wrote one chunk file per input file (and a million documents)."""
    inputs = [InputFile(f"file:///corpus/f{n:06d}.jsonl", f"f{n:06d}.jsonl", 5_000, f"s{n}") for n in range(files)]
    unchanged = {source_name(f.url): FileReport(source_name(f.url), 5_000, 7, "", f.stamp or "") for f in inputs[::2]}
    chunk_files = tuple((f"density_bucket=3/part-{n:032x}.parquet", 70, f"{n:032x}") for n in range(files))
    previous = Previous(True, "incremental", output.as_uri(), 1, frozenset({0}), 10**6, chunk_files, (), unchanged)
    pipeline = beam.Pipeline()
    started = datetime.now(timezone.utc)
    settings = load_settings(None)
    build_pipeline(pipeline, ["/corpus/*.jsonl"], settings, str(output), started, run_id="run-1", previous=previous)
    return len(pipeline.to_runner_api().SerializeToString())


def test_the_job_graph_for_100000_files_is_no_larger_than_for_10(tmp_path: Path) -> None:
    """The graph holds the input globs, matched on the workers; the previous run's lists (its input reports, its
    chunk files) reach the workers as files in the run's staging: a graph holding them (hundreds of bytes a
    file) would pass Dataflow's 20 MiB limit."""
    small, large = _graph_bytes(10, tmp_path / "small"), _graph_bytes(100_000, tmp_path / "large")
    assert large <= 1.1 * small, (small, large)
    listed = sorted(p.relative_to(tmp_path / "large") for p in (tmp_path / "large").rglob("*.jsonl"))
    assert {str(p.parent) for p in listed} == {
        "_staging/run-1/listing/previous_inputs",
        "_staging/run-1/listing/previous",
    }


class _Launched(Exception):
    """Raised where the launcher hands the job to the runner: what it did before is the launch."""


def _launch_io(files: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The file-system calls (stat, lstat, scandir, listdir, open) the launcher makes on the corpus of ``files``
    files (in 3 folders, one with a hidden file) up to ``pipeline.run``."""
    corpus = tmp_path / f"corpus{files}"
    for n in range(files):
        (corpus / f"d{n % 3}").mkdir(parents=True, exist_ok=True)
        (corpus / f"d{n % 3}" / f"f{n:05d}.jsonl").write_text('{"text": "Some words of a document."}\n')
    (corpus / "d0" / ".hidden.jsonl").write_text("x")
    calls: Counter[str] = Counter()
    with monkeypatch.context() as patch:
        for name in ("stat", "lstat", "scandir", "listdir", "open"):
            call = getattr(os, name)

            def counted(path: Any, *args: Any, _call: Any = call, _name: str = name, **kwargs: Any) -> Any:
                if str(os.fspath(path) if isinstance(path, os.PathLike | str | bytes) else "").startswith(str(corpus)):
                    calls[_name] += 1
                return _call(path, *args, **kwargs)

            patch.setattr(os, name, counted)
        real_open = builtins.open

        def opened(path: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(path, str | os.PathLike) and str(path).startswith(str(corpus)):
                calls["builtins.open"] += 1
            return real_open(path, *args, **kwargs)

        patch.setattr(builtins, "open", opened)
        patch.setattr(beam.Pipeline, "run", lambda *_: (_ for _ in ()).throw(_Launched()))
        patch.setattr(pipelines.cli.rechunk, "_configure_logging", lambda *_: None)  # the test process's, as it was
        with pytest.raises(_Launched):
            run(["--input", str(corpus / "*" / "*.jsonl"), "--input", str(corpus), "--output", str(tmp_path / "out")])
    return calls


def test_the_launch_does_no_io_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher checks each input (a glob, a folder) with I/O a pattern, stopping at its first file: the same
    calls for 10 files as for 1,000; the files are listed, sized and stamped on the workers."""
    small, large = _launch_io(10, tmp_path, monkeypatch), _launch_io(1_000, tmp_path, monkeypatch)
    assert small == large and sum(small.values()) <= 20, (small, large)


def test_the_launch_lists_an_s3_prefix_with_no_request_a_file(s3_env: S3Env) -> None:
    """1,500 input files under an S3 prefix: the launcher finds them, with their sizes and stamps, in a few
    listing requests (1,000 keys a page), never one request a file (at 10^6 files that would be hours)."""
    bucket, client = s3_env.new_bucket(), s3_env.client()
    keys = [f"corpus/part-{n // 500}/f{n:05d}.jsonl" for n in range(1_500)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=b'{"text": "x"}\n'), keys))
    calls: Counter[str] = Counter()
    original = s3fs.S3FileSystem._call_s3

    async def counted(self: s3fs.S3FileSystem, method: str, *args: Any, **kwargs: Any) -> Any:
        calls[method] += 1
        return await original(self, method, *args, **kwargs)

    s3fs.S3FileSystem.clear_instance_cache()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
        files = expand_inputs([f"s3://{bucket}/corpus/**"])
    assert len(files) == len(keys) and all(f.size == 14 and f.stamp for f in files)
    assert calls["list_objects_v2"] <= 12 and calls["head_object"] <= 1 and "get_object" not in calls, calls


def test_a_local_listing_resolves_each_folder_once_and_reads_the_credentials_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 files in 3 folders, one of them a symlink to another file: each folder's real path is resolved once
    and the environment's credentials are read once for the listing, not once a file (the launch lists every
    input file); the symlink and its target are still one file, read once."""
    corpus = tmp_path / "corpus"
    for n in range(300):
        (corpus / f"d{n % 3}").mkdir(parents=True, exist_ok=True)
        (corpus / f"d{n % 3}" / f"f{n:03d}.jsonl").write_text('{"text": "x"}\n')
    (corpus / "d0" / "f000.jsonl").unlink()
    (corpus / "d0" / "f000.jsonl").symlink_to(corpus / "d1" / "f001.jsonl")
    resolved: Counter[str] = Counter()
    read: list[int] = []
    realpath, environment = os.path.realpath, pipelines.redact._environment_secrets
    monkeypatch.setattr(os.path, "realpath", lambda path: resolved.update([str(path)]) or realpath(path))
    monkeypatch.setattr(pipelines.redact, "_environment_secrets", lambda: read.append(1) or environment())
    # an earlier main() in this process redacts each log record (its factory, its handlers): not the listing's reads
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(logging.LogRecord)
    try:
        files = expand_inputs([str(corpus)])
    finally:
        logging.setLogRecordFactory(factory)
    paths = {f.relative_path for f in files}
    assert len(files) == 299 and "d0/f000.jsonl" in paths and "d1/f001.jsonl" not in paths  # the first URL is kept
    assert max(resolved.values()) == 1 and len(resolved) <= 3 + 1, resolved  # the folders, and the symlink
    assert len(read) == 1


def test_an_incremental_launch_reads_no_previous_inputs_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous run's reports of its input files (its manifest's inputs table, a row a file) are read by the
    workers, part by part, where the files they match are judged: the launch opens none of it."""
    corpus, output = tmp_path / "corpus", tmp_path / "out"
    for n in range(30):
        (corpus / f"f{n:02d}.jsonl").parent.mkdir(exist_ok=True)
        (corpus / f"f{n:02d}.jsonl").write_text('{"text": "Some words of a document."}\n')
    run(["--input", str(corpus), "--output", str(output), "--quiet"])
    assert list((output / "_manifest" / "inputs").glob("*.pq"))
    opened: list[str] = []
    real_open = builtins.open

    def spied(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", spied)
        patch.setattr(beam.Pipeline, "run", lambda *_: (_ for _ in ()).throw(_Launched()))
        patch.setattr(pipelines.cli.rechunk, "_configure_logging", lambda *_: None)
        with pytest.raises(_Launched):
            run(["--input", str(corpus), "--output", str(output), "--incremental"])
    assert any(path.endswith("_manifest.json") for path in opened), opened  # the spy sees the launch's reads
    assert not [path for path in opened if "/_manifest/inputs/" in path], opened
