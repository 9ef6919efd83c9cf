"""The pipeline from ``s3://`` to ``s3://`` over real HTTP (moto's server), credentials from the environment.

The corpus is compressed for real (gzip, zstd, bz2, xz) plus a Parquet file that must be read with
seeks over HTTP; the result is read back with pyarrow through s3fs and checked against the texts the
test uploaded, not against what zerda's reader makes of them.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import zstandard

from pipelines.cli.rechunk import run
from pipelines.output.layout import FILES_TABLE, PARTITION_COLUMN
from pipelines.output.manifest import Manifest
from pipelines.report import load_report
from pipelines.report import main as report_main
from tests.common import DATA, MULTI_PROCESS, REPO

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Corpus:
    """What was uploaded: accepted documents by (source URL, record) -> (doc id, text), and the rejects."""

    bucket: str
    documents: dict[tuple[str, int], tuple[str, str]]
    rejects: dict[tuple[str, int], str]
    files: list[str]

    @property
    def jsonl(self) -> str:
        return f"s3://{self.bucket}/corpus/news/articles.jsonl.gz"


def _parquet_bytes(rows: list[dict[str, str]]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink, row_group_size=1)
    return sink.getvalue()


@pytest.fixture(scope="module")
def corpus(s3_env: S3Env) -> Corpus:
    """Upload five compressed or columnar files, with one invalid JSON line and one too-short document."""
    bucket = s3_env.new_bucket()
    english, arabic, code = _text("english_prose.txt"), _text("arabic_prose.txt"), _text("code_python.txt")
    mixed, guide, sql = _text("mixed_en_ar.md"), _text("guide.md"), _text("query.sql")
    jsonl_lines = [
        json.dumps({"id": "en-1", "text": english}),
        json.dumps({"id": "mixed-1", "text": mixed}, ensure_ascii=False),
        "",
        '{"id": "broken", "text": ',
        json.dumps({"id": "short", "text": "Too short to chunk."}),
        json.dumps({"id": "code-1", "text": code}),
    ]
    parquet_rows = [{"id": "pq-ar", "text": arabic + "\n\n" + english}, {"id": "pq-code", "text": code + sql}]
    uploads = {
        "corpus/news/articles.jsonl.gz": gzip.compress("\n".join(jsonl_lines).encode() + b"\n"),
        "corpus/docs/guide.md.zst": zstandard.ZstdCompressor().compress(guide.encode()),
        "corpus/notes/arabic.txt.bz2": bz2.compress(arabic.encode()),
        "corpus/notes/query.rst.xz": lzma.compress(sql.encode()),
        "corpus/tables/rows.parquet": _parquet_bytes(parquet_rows),
    }
    client = s3_env.client()
    for key, body in uploads.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)

    def url(key: str) -> str:
        return f"s3://{bucket}/{key}"

    jsonl = url("corpus/news/articles.jsonl.gz")
    documents = {
        (jsonl, 1): ("en-1", english),
        (jsonl, 2): ("mixed-1", mixed),
        (jsonl, 6): ("code-1", code),
        (url("corpus/docs/guide.md.zst"), 0): ("docs/guide.md.zst", guide),
        (url("corpus/notes/arabic.txt.bz2"), 0): ("notes/arabic.txt.bz2", arabic),
        (url("corpus/notes/query.rst.xz"), 0): ("notes/query.rst.xz", sql),
        (url("corpus/tables/rows.parquet"), 1): ("pq-ar", parquet_rows[0]["text"]),
        (url("corpus/tables/rows.parquet"), 2): ("pq-code", parquet_rows[1]["text"]),
    }
    rejects = {(jsonl, 4): "invalid_json", (jsonl, 5): "below_min_chunk_size"}
    return Corpus(bucket, documents, rejects, sorted(url(key) for key in uploads))


@pytest.fixture(scope="module")
def output(corpus: Corpus) -> tuple[str, dict[str, Any]]:
    """One run from ``s3://bucket/corpus/**`` to ``s3://bucket/out``: (output URL, returned manifest)."""
    out = f"s3://{corpus.bucket}/out"
    manifest = run(["--input", f"s3://{corpus.bucket}/corpus/**", "--output", out, "--quiet"])
    return out, manifest


def read_chunks(s3_env: S3Env, output: str) -> pa.Table:
    """The chunk dataset as pyarrow reads it over s3fs, the Hive partition column included."""
    path = output.removeprefix("s3://")
    return ds.dataset(path, filesystem=s3_env.filesystem(), format="parquet", partitioning="hive").to_table()


def read_manifest(s3_env: S3Env, output: str) -> dict[str, Any]:
    return Manifest.load(s3_env.filesystem(), output.removeprefix("s3://")).with_lists()


def listing(s3_env: S3Env, output: str) -> list[str]:
    """Every object key under OUTPUT, relative to it."""
    root = output.removeprefix("s3://")
    return sorted(path[len(root) + 1 :] for path in s3_env.filesystem().find(root))


def assert_documents_chunked_whole(table: pa.Table, documents: dict[tuple[str, int], tuple[str, str]]) -> None:
    """Every chunk is the exact slice of its uploaded document; every document is covered, none twice."""
    by_document: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in table.to_pylist():
        key = (row["source"], row["record"])
        assert key in documents, f"chunk of an unknown document: {key}"
        doc_id, text = documents[key]
        assert row["doc_id"] == doc_id
        assert row["text"] == text[row["start_char"] : row["end_char"]], row["chunk_id"]
        assert row["char_count"] == len(row["text"])
        assert row[PARTITION_COLUMN] / 10 <= row["density"] <= (row[PARTITION_COLUMN] + 1) / 10
        by_document[key].append(row)
    assert set(by_document) == set(documents), "every accepted document has chunks"
    for key, rows in by_document.items():
        text = documents[key][1]
        assert sorted(r["chunk_index"] for r in rows) == list(range(len(rows))), f"chunks lost or doubled: {key}"
        covered = [False] * len(text)
        for r in rows:
            covered[r["start_char"] : r["end_char"]] = [True] * (r["end_char"] - r["start_char"])
        assert all(covered[i] or ch.isspace() for i, ch in enumerate(text)), f"text lost in {key}"


def test_s3fs_takes_the_endpoint_from_the_environment(s3_env: S3Env, corpus: Corpus) -> None:
    """What boto3 uploaded, s3fs (built with no arguments) reads back from the same moto server."""
    fs = s3_env.filesystem()
    body = fs.cat(f"{corpus.bucket}/corpus/notes/arabic.txt.bz2")
    assert bz2.decompress(body).decode() == _text("arabic_prose.txt")
    assert fs.s3.meta.endpoint_url == s3_env.endpoint


def test_s3_run_is_complete_and_accounted(s3_env: S3Env, corpus: Corpus, output: tuple[str, dict]) -> None:
    out, returned = output
    manifest = read_manifest(s3_env, out)
    assert manifest == returned
    counts = manifest["counts"]
    assert sorted(i["source"] for i in manifest["inputs"]) == corpus.files
    assert counts["files_read"] == len(corpus.files)
    assert counts["records_read"] == len(corpus.documents) + len(corpus.rejects)
    assert counts["documents_chunked"] == len(corpus.documents)
    assert {reason: n for reason, n in counts["rejects"].items() if n} == {"invalid_json": 1, "below_min_chunk_size": 1}
    files = listing(s3_env, out)
    assert "_SUCCESS" in files and "_manifest.json" in files
    assert not [f for f in files if f.startswith("_staging") or ".zerda-probe" in f], files
    written = sorted(f["path"] for f in manifest["output"]["files"])
    assert written == [f for f in files if f.endswith((".parquet", ".pq")) and f != FILES_TABLE]
    assert sum(f["rows"] for f in manifest["output"]["files"] if f["path"].endswith(".parquet")) == counts["chunks"]


def test_s3_chunks_are_exact_slices_of_the_uploaded_documents(
    s3_env: S3Env,
    corpus: Corpus,
    output: tuple[str, dict],
) -> None:
    out, manifest = output
    table = read_chunks(s3_env, out)
    assert table.num_rows == manifest["counts"]["chunks"] > len(corpus.documents)
    assert pa.types.is_integer(table.column(PARTITION_COLUMN).type)
    assert len(set(table["chunk_id"].to_pylist())) == table.num_rows
    by_bucket = table.group_by(PARTITION_COLUMN).aggregate([("chunk_id", "count")]).to_pylist()
    assert {str(r[PARTITION_COLUMN]): r["chunk_id_count"] for r in by_bucket} == manifest["counts"]["chunks_by_bucket"]
    assert_documents_chunked_whole(table, corpus.documents)
    assert {"en", "ar"} <= set(table["language"].to_pylist())


def test_s3_rejects_say_which_record(s3_env: S3Env, corpus: Corpus, output: tuple[str, dict]) -> None:
    out, _ = output
    rejects = ds.dataset(
        f"{out.removeprefix('s3://')}/_rejects", filesystem=s3_env.filesystem(), format="parquet"
    ).to_table()
    assert {(r["source"], r["record"]): r["reason"] for r in rejects.to_pylist()} == corpus.rejects
    assert {r["doc_id"] for r in rejects.to_pylist()} == {"short", "news/articles.jsonl.gz/4"}


def test_s3_rerun_in_worker_processes_replaces_the_previous_dataset(
    s3_env: S3Env,
    corpus: Corpus,
    output: tuple[str, dict],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A previous full output is replaced by a smaller run, in separate worker processes: no stale rows."""
    out, _ = output
    rerun = f"s3://{corpus.bucket}/rerun"
    fs = s3_env.filesystem()
    fs.copy(out.removeprefix("s3://"), rerun.removeprefix("s3://"), recursive=True)
    assert read_chunks(s3_env, rerun).num_rows == read_chunks(s3_env, out).num_rows  # the stale dataset is there
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # worker processes import pipelines from the checkout
    manifest = run(["--input", corpus.jsonl, "--output", rerun, "--quiet", *MULTI_PROCESS])

    table = read_chunks(s3_env, rerun)
    assert set(table["source"].to_pylist()) == {corpus.jsonl}
    assert table.num_rows == manifest["counts"]["chunks"]
    jsonl_documents = {key: doc for key, doc in corpus.documents.items() if key[0] == corpus.jsonl}
    assert_documents_chunked_whole(table, jsonl_documents)
    files = listing(s3_env, rerun)
    assert sorted(f["path"] for f in manifest["output"]["files"]) == [
        f for f in files if f.endswith((".parquet", ".pq")) and f != FILES_TABLE
    ]
    assert read_manifest(s3_env, rerun) == manifest
    assert "_SUCCESS" in files


def test_report_reads_an_s3_output_and_writes_its_page_there(
    s3_env: S3Env, output: tuple[str, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    out, manifest = output
    report = load_report(out)
    counts = manifest["counts"]
    assert report.stats().chunks == counts["chunks"]
    assert report.stats().documents == counts["documents_chunked"]
    assert {str(b): n for b, n in report.chunks_by_bucket().items()} == counts["chunks_by_bucket"]
    assert dict(report.rejects) == {reason: n for reason, n in counts["rejects"].items() if n}
    page = f"{out}-report.html"
    assert report_main([out, "--html", page]) == 0
    assert f"{counts['chunks']:,}" in capsys.readouterr().out
    with s3_env.filesystem().open(page.removeprefix("s3://"), "rb") as f:
        assert b"<svg" in f.read()
