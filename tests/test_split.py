"""Large files split into parts (JSONL by line-aligned byte ranges, Parquet by row groups): the parts
together give exactly the records, rejects, numbers and ids of the whole-file read, on one worker or two.

``input.split_bytes`` is set tiny here, so that files of a few kilobytes split into many parts, with
range edges inside lines, CRLF line ends, a BOM, blank and bad lines, an oversize line and a last
line without a newline.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pipelines.cli.rechunk import run
from pipelines.errors import InputChanged
from pipelines.input.expand import InputFile, expand_inputs
from pipelines.input.formats import line_limit
from pipelines.input.source import read_file, read_part
from pipelines.input.split import FilePart, plan_parts
from pipelines.records import FileReport
from pipelines.settings import InputSettings
from tests.common import MULTI_PROCESS, REPO
from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures

MAX_CHARS = 2000  # a small max_document_chars, so that a line of about 1 MiB is oversize
_PROSE = "The fennec fox sleeps by day in a burrow under the dunes and hunts by night. "
_CODE = "SELECT id, name FROM users WHERE age > 30 AND city = 'Tunis'; -- query {n}\n"


def _doc(n: int) -> str:
    unit = _PROSE if n % 2 else _CODE.format(n=n)
    return f"Document {n}. " + unit * (1 + n % 7)


def _line(n: int) -> bytes:
    return json.dumps({"id": f"d{n}" if n % 3 else "", "text": _doc(n)}).encode()


def hostile_jsonl() -> bytes:
    """Good lines among every kind of line the reader treats on its own; no newline at the end."""
    oversize = b'{"text": "' + b"x" * (line_limit(MAX_CHARS) + 10) + b'"}'
    lines = [b"\xef\xbb\xbf" + _line(0) + b"\r"]  # a BOM at the file's start, CRLF
    for n in range(1, 40):
        lines.append(_line(n) + (b"\r" if n % 4 == 0 else b""))
        extra = {5: b"", 9: b"   \t", 13: b"{broken", 17: b"\xff\xfe not UTF-8", 21: b"[1, 2]", 25: oversize}
        if n in extra:
            lines.append(extra[n])
        if n == 29:
            lines.append(b'{"id": "short", "text": "too short"}')
    return b"\n".join(lines)


def numbered_parquet() -> bytes:
    """Twelve row groups; null and empty texts, null and integer ids."""
    texts: list[str | None] = [_doc(n) for n in range(120)]
    texts[7], texts[33], texts[64] = None, "", "too short"
    ids: list[str | None] = [None if n % 5 == 0 else f"p{n}" for n in range(120)]
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": ids, "text": texts}), buffer, row_group_size=10)
    return buffer.getvalue()


def _settings(split_bytes: int) -> InputSettings:
    return InputSettings(split_bytes=split_bytes, max_document_chars=MAX_CHARS)


def _file(path: Path, data: bytes) -> InputFile:
    path.write_bytes(data)
    (file,) = expand_inputs([str(path)])
    return file


def _split_read(parts: list[FilePart], settings: InputSettings) -> tuple[list[Any], list[FileReport]]:
    items = [item for part in parts for item in read_part(part, settings)]
    return [i for i in items if not isinstance(i, FileReport)], [i for i in items if isinstance(i, FileReport)]


@pytest.mark.parametrize("split_bytes", [1, 50, 333, 4096])
def test_split_jsonl_gives_the_whole_file_read(tmp_path: Path, split_bytes: int) -> None:
    data = hostile_jsonl()
    file = _file(tmp_path / "a.jsonl", data)
    parts = plan_parts(file, _settings(split_bytes))
    assert len(parts) > 3
    assert [p.start for p in parts[1:]] == [p.stop for p in parts[:-1]] and parts[-1].stop == len(data)
    assert all(data[p.start - 1 : p.start] == b"\n" for p in parts[1:]), "a part starts at a line start"
    whole = list(read_file(file, _settings(split_bytes)))
    items, reports = _split_read(parts, _settings(split_bytes))
    assert items == whole[:-1]
    assert {i.reason for i in items if hasattr(i, "reason")} == {"invalid_json", "invalid_utf8", "too_large"}
    assert sum(r.bytes_read for r in reports) == whole[-1].bytes_read == len(data)
    assert sum(r.records for r in reports) == whole[-1].records


@pytest.mark.parametrize("split_bytes", [1, 3000])
def test_split_parquet_by_row_groups_gives_the_whole_file_read(tmp_path: Path, split_bytes: int) -> None:
    file = _file(tmp_path / "b.parquet", numbered_parquet())
    parts = plan_parts(file, _settings(split_bytes))
    assert len(parts) > 3
    assert [p.start for p in parts] == [0] + [p.stop for p in parts[:-1]] and parts[-1].stop == 12
    whole = list(read_file(file, _settings(split_bytes)))
    items, reports = _split_read(parts, _settings(split_bytes))
    assert items == whole[:-1] and len(items) == 120
    assert sum(r.records for r in reports) == whole[-1].records == 120


def test_what_is_not_split(tmp_path: Path) -> None:
    settings = _settings(64)
    small = _file(tmp_path / "small.jsonl", _line(1) + b"\n")
    assert plan_parts(small, settings) == [FilePart(small)]
    packed = _file(tmp_path / "packed.jsonl.gz", gzip.compress(hostile_jsonl()))
    assert plan_parts(packed, settings) == [FilePart(packed, spread=True)]
    for name, data in [
        ("binary.jsonl", b"\x00\x01" + hostile_jsonl()),  # one not_text reject for the file
        ("blank.jsonl", b" \n\r\n\t\n" * 100),  # one empty reject for the file
        ("doc.md", b"# a heading\n\n" + _PROSE.encode() * 10),  # one document
        ("nothing.parquet", b"PAR1" + b"\x01" * 300 + b"PAR1"),  # damaged: one unreadable_file reject
    ]:
        file = _file(tmp_path / name, data)
        assert plan_parts(file, settings) == [FilePart(file)], name
    no_text = io.BytesIO()
    pq.write_table(pa.table({"body": [_doc(n) for n in range(50)]}), no_text, row_group_size=5)
    file = _file(tmp_path / "no_text.parquet", no_text.getvalue())
    assert plan_parts(file, settings) == [FilePart(file)]


def test_a_file_of_blank_lines_is_one_empty_reject_whatever_the_split(tmp_path: Path) -> None:
    file = _file(tmp_path / "blank.jsonl", b"\n  \n" * 500)
    (item, report) = [i for p in plan_parts(file, _settings(8)) for i in read_part(p, _settings(8))]
    assert (item.reason, item.record, report.records) == ("empty", 0, 1)


# --- the job, split and not, on one worker and two --------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("split") / "corpus"
    root.mkdir()
    (root / "a.jsonl").write_bytes(hostile_jsonl())
    (root / "b.parquet").write_bytes(numbered_parquet())
    (root / "c.jsonl.gz").write_bytes(gzip.compress(b"\n".join(_line(n) for n in range(50, 90))))
    (root / "d.md").write_text("# Small\n\n" + _PROSE * 8, encoding="utf-8")
    return root


def _config(path: Path, split_bytes: int | None) -> Path:
    split = f"  split_bytes: {split_bytes}\n" if split_bytes else ""
    path.write_text(f"input:\n  max_document_chars: {MAX_CHARS}\n{split}", encoding="utf-8")
    return path


def _job(corpus: Path, output: Path, config: Path, *options: str) -> tuple[Any, ...]:
    manifest = run(["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet", *options])
    chunks = ds.dataset(str(output), format="parquet", partitioning="hive").to_table().to_pylist()
    rejects = pq.read_table(output / "_rejects").to_pylist()
    inputs = {i["source"].rsplit("/", 1)[-1]: i for i in manifest["inputs"]}
    return sorted(tuple(r.values()) for r in chunks), sorted(tuple(r.values()) for r in rejects), manifest, inputs


@pytest.fixture(scope="module")
def unsplit(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    tmp = tmp_path_factory.mktemp("unsplit")
    return _job(corpus, tmp / "out", _config(tmp / "whole.yaml", None))


@pytest.mark.parametrize("workers", [[], MULTI_PROCESS], ids=["in-memory", "2-worker-processes"])
def test_split_job_gives_the_rows_of_the_unsplit_job(
    corpus: Path, unsplit: tuple[Any, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    config = _config(tmp_path / "split.yaml", 300)
    settings = _settings(300)
    assert [len(plan_parts(f, settings)) > 3 for f in expand_inputs([str(corpus)])] == [True, True, False, False]
    assert plan_parts(expand_inputs([str(corpus / "c.jsonl.gz")])[0], settings)[0].spread

    chunks, rejects, manifest, inputs = _job(corpus, tmp_path / "out", config, *workers)
    whole_chunks, whole_rejects, whole_manifest, whole_inputs = unsplit
    assert chunks == whole_chunks and len(chunks) > 100
    assert rejects == whole_rejects
    assert {r[3] for r in rejects} >= {"invalid_json", "invalid_utf8", "too_large", "missing_text", "empty"}
    assert manifest["counts"] == whole_manifest["counts"]
    assert manifest["fingerprint"] == whole_manifest["fingerprint"]
    assert list(inputs) == list(whole_inputs) == ["a.jsonl", "b.parquet", "c.jsonl.gz", "d.md"]
    for name, entry in inputs.items():
        same = entry if name != "b.parquet" else {**entry, "bytes": whole_inputs[name]["bytes"]}
        # a split Parquet's parts each fetch its footer: more bytes; a stamp depends on the file's age
        assert {**same, "stamp": ""} == {**whole_inputs[name], "stamp": ""}, name


def test_two_worker_processes_both_chunk_one_split_file(tmp_path: Path) -> None:
    """The point of splitting: one file's documents are chunked in both worker processes, not one.

    Each worker's progress lines name its pid; read whole, one file's documents would all show one pid.
    """
    corpus = tmp_path / "one.jsonl"
    corpus.write_bytes(b"\n".join(_line(n) for n in range(400)) + b"\n")
    config = _config(tmp_path / "split.yaml", 2000)
    command = [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(corpus), "--output", str(tmp_path / "out")]
    command += ["--config", str(config), "--progress-seconds", "0.000001", *MULTI_PROCESS]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=True)
    pids = set(re.findall(r"zerda\.progress: progress \(pid (\d+)\)", done.stderr))
    assert len(pids) == 2, done.stderr[-3000:]


def _settled(path: Path) -> None:
    """Modified a minute ago: listed with a stamp (size and time), as a file at rest is."""
    settled = path.stat().st_mtime - 60
    os.utime(path, (settled, settled))


def test_a_part_of_a_file_rewritten_since_it_was_listed_is_a_reject_not_the_other_version(tmp_path: Path) -> None:
    """The parts of one split file are read apart, maybe minutes apart: a part that finds the file rewritten
    (same size, a new time) reads none of it, so no part reads a version the others did not; a file listed
    without a stamp (written just before) is compared by its size."""
    settings = _settings(333)
    path = tmp_path / "a.jsonl"
    path.write_bytes(hostile_jsonl())
    _settled(path)
    (file,) = expand_inputs([str(path)])
    assert file.stamp is not None
    parts = plan_parts(file, settings)
    first = list(read_part(parts[0], settings))
    path.write_bytes(hostile_jsonl().replace(b"fennec", b"FENNEC"))  # same size, a new modification time
    items, reports = _split_read(parts[1:], settings)
    assert [i.reason for i in items] == ["unreadable_file"] * (len(parts) - 1)
    assert all("the file changed since it was listed (its size, time or ETag)" in i.message for i in items)
    assert [i.record for i in items] == [p.records_before for p in parts[1:]]
    assert all(r.records == 1 and r.bytes_read == 0 for r in reports)
    assert not any(b"FENNEC" in json.dumps(i.text).encode() for i in first if hasattr(i, "text"))

    fresh = tmp_path / "b.jsonl"
    fresh.write_bytes(hostile_jsonl())
    (unstamped,) = expand_inputs([str(fresh)])
    assert unstamped.stamp is None
    later = plan_parts(unstamped, settings)
    fresh.write_bytes(hostile_jsonl() + b"\n" + _line(99))
    (item, _) = read_part(later[-1], settings)
    message = f"the file changed since it was listed ({len(hostile_jsonl())} bytes listed, {fresh.stat().st_size} now)"
    assert item.reason == "unreadable_file" and message in item.message


def test_a_file_rewritten_while_a_part_is_read_fails_the_part_so_the_runner_reads_it_again(tmp_path: Path) -> None:
    """A rewrite that lands while a part is being read: the part raises (the runner retries it, and the retry
    finds the file changed: a reject), rather than hand on records that may mix the two versions."""
    settings = _settings(4096)
    path = tmp_path / "a.jsonl"
    path.write_bytes(hostile_jsonl())
    _settled(path)
    (file,) = expand_inputs([str(path)])
    reading = read_part(plan_parts(file, settings)[0], settings)
    next(reading)
    path.write_bytes(hostile_jsonl()[:-10])
    with pytest.raises(InputChanged, match=r"a\.jsonl changed while part 1 of \d+ was read \(its size, time or ETag\)"):
        list(reading)
    whole = list(read_file(file, settings))  # a file read whole is one version whatever happens: not checked
    assert isinstance(whole[-1], FileReport) and whole[-1].error == ""


def test_a_split_file_rewritten_on_an_object_store_is_seen_changed(s3_env: S3Env) -> None:
    """On an object store a rewrite is a new object of a new ETag: a part sees it, though the listing that found
    the file is still cached in its filesystem."""
    bucket = s3_env.new_bucket()
    fs = s3_env.filesystem()
    fs.pipe(f"{bucket}/corpus/a.jsonl", hostile_jsonl())
    (file,) = expand_inputs([f"s3://{bucket}/corpus/*.jsonl"])
    assert file.stamp is not None and "ETag" in file.stamp
    settings = _settings(333)
    parts = plan_parts(file, settings)
    first, _ = _split_read(parts[:1], settings)
    assert len(parts) > 3 and first and not any(getattr(i, "reason", "") == "unreadable_file" for i in first)
    fs.pipe(f"{bucket}/corpus/a.jsonl", hostile_jsonl().replace(b"fennec", b"FENNEC"))
    items, _ = _split_read(parts[1:], settings)
    assert [i.reason for i in items] == ["unreadable_file"] * (len(parts) - 1)
