"""The Parquet writer: round trip, reruns, retried bundles, failures, memory:// and prepare_output.

Pipelines run on the real DirectRunner and the dataset is read back with pyarrow and DuckDB.
"""

from __future__ import annotations

import math
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import apache_beam as beam
import duckdb
import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # not collected by pytest
from apache_beam.testing.util import assert_that, equal_to

from pipelines.errors import CommitError
from pipelines.output import commit as commit_module
from pipelines.output import write as write_module
from pipelines.output.build_manifest import BuildManifest, check_accounting
from pipelines.output.commit import CommitOutput
from pipelines.output.layout import INPUTS_DIR, PARTITION_COLUMN, density_bucket, n_buckets
from pipelines.output.ownership import STAGED_KEY
from pipelines.output.schema import CHUNK_SCHEMA, REJECT_SCHEMA
from pipelines.output.write import (
    OutputError,
    StagedFile,
    WriteChunks,
    WriteDescribedChunks,
    WriteInputs,
    WriteRejects,
    new_run_id,
    prepare_output,
)
from pipelines.records import FileReport, Reject
from tests.common import REPO, most_at_once
from tests.output_checks import documents_of, read_manifest, summaries_of


def chunk_row(doc: int, index: int, density: float = 0.42, keywords: list | None = None) -> dict:
    """A chunk row as the chunking transform emits it; Arabic text to check the strings round-trip."""
    text = f"مستند {doc} — chunk {index}"
    return {
        "chunk_id": f"doc{doc}-{index}",
        "doc_id": f"doc{doc}",
        "source": "corpus/part.jsonl",
        "record": doc + 1,
        "chunk_index": index,
        "text": text,
        "char_count": len(text),
        "start_char": 100 * index,
        "end_char": 100 * index + len(text),
        "density": density,
        "target_size": 512,
        "chunk_type": "ADAPTIVE",
        "language": "mixed",
        "config_fingerprint": "f00dfeed",
        "keywords": keywords,
        "local_density": density if index % 2 else None,
        "section": "تثبيت > From source" if index % 2 else None,
        "token_count": len(text) // 4 if index % 2 else None,
        "embed_text": f"تثبيت\n\n{text}" if index % 2 else None,
        PARTITION_COLUMN: density_bucket(density, 0.1),
    }


def corpus(docs: int, densities: tuple[float, ...] = (0.05, 0.42, 0.97)) -> list[dict]:
    """Two chunks per document, spread over the buckets of ``densities``."""
    return [chunk_row(d, i, densities[d % len(densities)]) for d in range(docs) for i in range(2)]


REJECTS = [
    Reject("corpus/part.jsonl", 7, "doc-x", "invalid_json", "Expecting value", "{oops"),
    Reject("corpus/bad.gz", 0, "", "unreadable_file", "truncated gzip", ""),
]


def run_write(
    output: str,
    rows: list[dict],
    rejects: list[Reject] = REJECTS,
    options: tuple[str, ...] = (),
    run_id: str = "",
    records_lost: int = 0,
    **write,
) -> None:
    """The writer's part of the rechunk pipeline, wired as the entry point does; ``records_lost`` records
    read that reach neither the chunks nor the rejects (a runner losing them)."""
    prepare_output(output)
    run_id = run_id or new_run_id()
    records = len({(r["source"], r["record"]) for r in rows}) + len(rejects) + records_lost
    with beam.Pipeline(options=PipelineOptions(list(options))) as p:
        # spread as the real pipeline does (it reshuffles files), so worker processes share the documents
        chunks = p | "Chunks" >> beam.Create(documents_of(rows)) | "Spread" >> beam.Reshuffle()
        bad = p | "Rejects" >> beam.Create(rejects)
        reports = p | "Reports" >> beam.Create([FileReport("corpus/part.jsonl", 1234, records)])
        summaries = p | "Summaries" >> beam.Create(summaries_of(rows))
        manifest = {"summaries": summaries, "rejects": bad, "reports": reports} | "Manifest" >> BuildManifest(
            settings={"output": {"bucket_width": 0.1}},
            fingerprint="f00dfeed",
            output=output,
            started=datetime.now(timezone.utc),
        )
        staged = {
            "chunks": chunks | "WriteChunks" >> WriteChunks(output, run_id, **write),
            "rejects": bad | "WriteRejects" >> WriteRejects(output, run_id, **write),
            "inputs": reports | "WriteInputs" >> WriteInputs(output, run_id, "zstd", 1000),
        }
        {**staged, "manifest": manifest} | "Commit" >> CommitOutput(output)


def read_chunks(output: str, filesystem: fsspec.AbstractFileSystem | None = None) -> list[dict]:
    table = ds.dataset(output, format="parquet", partitioning="hive", filesystem=filesystem).to_table()
    return sorted(table.to_pylist(), key=lambda row: row["chunk_id"])


def read_rejects(output: Path) -> list[Reject]:
    table = pq.read_table(output / "_rejects")
    assert table.schema.equals(REJECT_SCHEMA)
    return sorted((Reject(**row) for row in table.to_pylist()), key=lambda r: r.record)


UNLISTED = {"_SUCCESS", "_manifest.json", "_manifest/files.pq"}  # files a finished output has beside those listed


def files_under(output: Path) -> set[str]:
    return {p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file()}


def manifest_files(output: Path) -> dict:
    manifest = read_manifest(output)
    check_accounting(manifest)
    return {entry["path"]: entry["rows"] for entry in manifest["output"]["files"]}


@pytest.mark.parametrize(
    ("density", "width", "bucket"),
    [
        (0.0, 0.1, 0),
        (0.0999, 0.1, 0),
        (0.1, 0.1, 1),
        (0.3, 0.1, 3),  # 0.3 / 0.1 == 2.9999999999999996 in floats
        (0.7, 0.1, 7),
        (0.9999, 0.1, 9),
        (1.0, 0.1, 9),  # density 1 belongs to the last bucket, not to an eleventh
        (0.5, 1.0, 0),
        (1.0, 1.0, 0),
        (0.25, 0.25, 1),
        (0.75, 0.25, 3),
        (1.0, 0.25, 3),
        (0.9, 0.3, 3),  # 4 buckets of width 0.3, the last one narrower
        (1.0, 0.3, 3),
    ],
)
def test_density_bucket(density: float, width: float, bucket: int) -> None:
    assert density_bucket(density, width) == bucket


def test_bucket_count_and_bad_values() -> None:
    assert [n_buckets(w) for w in (0.1, 0.2, 0.25, 0.3, 1 / 3, 1.0)] == [10, 5, 4, 4, 3, 1]
    for width in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="bucket width"):
            n_buckets(width)
    for density in (-0.01, 1.01, math.nan):
        with pytest.raises(ValueError, match="density"):
            density_bucket(density, 0.1)


def test_schemas_store_no_partition_column_and_require_all_but_the_optional_columns() -> None:
    assert PARTITION_COLUMN not in CHUNK_SCHEMA.names
    assert [f.name for f in CHUNK_SCHEMA if f.nullable] == [
        "keywords",
        "local_density",
        "section",
        "token_count",
        "embed_text",
    ]
    assert REJECT_SCHEMA.names == ["source", "record", "doc_id", "reason", "message", "excerpt", "count"]


def test_staging_writes_a_file_per_max_rows_and_bucket_and_never_splits_a_document(tmp_path: Path) -> None:
    # document 0 has three chunks: its rows stay in one file, which alone passes max_rows_per_file
    rows = [chunk_row(0, i, 0.42) for i in range(3)] + [chunk_row(d, 0, 0.42) for d in (1, 2, 3)]
    rows += [chunk_row(9, 0, 0.97)]
    with BeamTestPipeline() as p:
        staged = p | beam.Create(documents_of(rows)) | WriteChunks(str(tmp_path), "run-1", max_rows_per_file=2)
        assert_that(
            staged | beam.Map(lambda s: (s.directory, s.rows)),
            equal_to(
                [("density_bucket=4", 3), ("density_bucket=4", 2), ("density_bucket=4", 1), ("density_bucket=9", 1)]
            ),
        )
    staged_files = list((tmp_path / "_staging" / "run-1").rglob("part-*.parquet"))
    assert len(staged_files) == 4
    assert sum(pq.read_table(f).num_rows for f in staged_files) == 7
    doc_zero = [f for f in staged_files if "doc0" in pq.read_table(f)["doc_id"].to_pylist()]
    assert len(doc_zero) == 1 and pq.read_table(doc_zero[0]).num_rows == 3


def test_described_chunks_say_which_committed_file_holds_each_document(tmp_path: Path) -> None:
    rows = [chunk_row(d, i, 0.42) for d in range(5) for i in range(2)] + [chunk_row(9, 0, 0.97)]

    def check(described: list) -> None:  # the file named holds every row of its document
        assert sorted(doc_id for doc_id, _, _ in described) == sorted({row["doc_id"] for row in rows})
        for doc_id, n, path in described:
            table = pq.read_table(tmp_path / "_staging" / "run-1" / path)
            assert table["doc_id"].to_pylist().count(doc_id) == n

    with BeamTestPipeline() as p:
        written = (
            p
            | beam.Create(documents_of(rows))
            | WriteDescribedChunks(
                str(tmp_path), "run-1", "zstd", 4, lambda rows, path: (rows[0]["doc_id"], len(rows), path)
            )
        )
        assert_that(written.documents, check)


def test_rows_stream_out_in_row_groups_instead_of_waiting_for_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_module, "_ROW_GROUP_ROWS", 3)
    rows = [chunk_row(d, 0, 0.42) for d in range(8)]
    with BeamTestPipeline() as p:
        _ = p | beam.Create(documents_of(rows)) | WriteChunks(str(tmp_path), "run-1", max_rows_per_file=100)
    (staged,) = (tmp_path / "_staging" / "run-1").rglob("part-*.parquet")
    metadata = pq.ParquetFile(staged).metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [3, 3, 2]
    assert sorted(pq.read_table(staged)["doc_id"].to_pylist()) == sorted(r["doc_id"] for r in rows)


def test_chunk_files_close_where_the_source_changes_once_large_enough(tmp_path: Path) -> None:
    """A file of half max_rows_per_file rows or more ends where the next source begins, so a file holds few
    sources (an incremental run rewrites only the files of a source that changed); small sources share one."""
    sizes = {"a.jsonl": 5, "b.jsonl": 2, "c.jsonl": 2, "d.jsonl": 6}
    rows = [{**chunk_row(n, 0), "source": source} for source, count in sizes.items() for n in range(count)]
    with BeamTestPipeline() as p:
        _ = p | beam.Create(documents_of(rows)) | WriteChunks(str(tmp_path), "run-1", max_rows_per_file=8)
    files = [pq.read_table(f) for f in (tmp_path / "_staging" / "run-1").rglob("part-*.parquet")]
    held = sorted((t.num_rows, sorted(set(t["source"].to_pylist()))) for t in files)
    assert held == [(4, ["b.jsonl", "c.jsonl"]), (5, ["a.jsonl"]), (6, ["d.jsonl"])]


def test_run_id_must_be_a_plain_name(tmp_path: Path) -> None:
    for bad in ("../up", "a/b", "", ".hidden"):
        with pytest.raises(ValueError, match="run_id"):
            WriteChunks(str(tmp_path), bad)


def test_round_trip_reads_back_in_pyarrow_and_duckdb(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rows = corpus(9)
    rows[0]["keywords"] = [{"term": "مستند", "score": 0.9}, {"term": "chunk", "score": 0.5}]
    run_write(str(out), rows, max_rows_per_file=4)

    assert read_chunks(str(out)) == sorted(rows, key=lambda row: row["chunk_id"])
    assert read_rejects(out) == sorted(REJECTS, key=lambda r: r.record)

    glob = (out / "**" / "*.parquet").as_posix()
    per_bucket = duckdb.sql(
        f"SELECT density_bucket, count(*) FROM read_parquet('{glob}', hive_partitioning=true) GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert per_bucket == [(0, 6), (4, 6), (9, 6)]

    files = files_under(out)
    assert {"_SUCCESS", "_manifest.json"} <= files
    assert not any(f.startswith("_staging") for f in files)
    # 6 rows a bucket, 4 a file: two files each, named as staged; the manifest lists exactly what is there
    listed = manifest_files(out)
    assert set(listed) == files - UNLISTED
    named = re.compile(
        r"(density_bucket=[049]/part-[0-9a-f]{32}\.parquet|(_rejects|_manifest/inputs)/part-[0-9a-f]{32}\.pq)"
    )
    assert all(named.fullmatch(path) for path in listed)
    assert sorted(listed.values()) == [1, 2, 2, 2, 2, 4, 4, 4]  # the one input file read, in the inputs table


def test_rerun_with_other_file_count_and_workers_leaves_nothing_stale(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    run_write(str(out), corpus(9), max_rows_per_file=1)  # 9 files of one document in 3 buckets, 2 reject files
    assert len(files_under(out)) == 9 + 2 + 1 + 3  # + the inputs table, _SUCCESS, _manifest.json and its files

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    second = corpus(6, densities=(0.42, 0.55))  # bucket 0 and 9 gone, bucket 5 new, no rejects
    run_write(
        str(out), second, rejects=[], options=("--direct_num_workers=2", "--direct_running_mode=multi_processing")
    )

    assert read_chunks(str(out)) == sorted(second, key=lambda row: row["chunk_id"])
    files = files_under(out)
    assert set(manifest_files(out)) == files - UNLISTED
    folders = {f.split("/")[0] for f in manifest_files(out)}
    assert folders == {"density_bucket=4", "density_bucket=5", "_rejects", "_manifest"}
    (rejects,) = [n for path, n in manifest_files(out).items() if path.startswith("_rejects/")]
    assert rejects == 0  # no reject: one empty file, so queries of it work
    assert not (out / "density_bucket=0").exists()
    # rows in several bundles: each of the two workers wrote its own file per bucket
    assert len(manifest_files(out)) > 3


def test_retried_bundles_and_stray_staged_files_are_not_committed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rows = corpus(9)
    stray = pa.Table.from_pylist([chunk_row(99, 0)], schema=CHUNK_SCHEMA)
    for folder in ("killed-run", "this-run"):  # leftovers of a killed job and of a failed attempt of this one
        (out / "_staging" / folder / "density_bucket=4").mkdir(parents=True)
        pq.write_table(stray, out / "_staging" / folder / "density_bucket=4" / "part-stray.parquet")

    # Every bundle, the commit's included, runs a first attempt whose outputs are thrown away, then again.
    run_write(str(out), rows, options=("--direct_runner_bundle_repeat=1",), run_id="this-run", max_rows_per_file=4)

    assert read_chunks(str(out)) == sorted(rows, key=lambda row: row["chunk_id"])
    assert len(read_rejects(out)) == len(REJECTS)
    # the commit deletes its own staging only; a dead run's is the launcher's to delete (hold_output)
    assert [p.relative_to(out).parts[:2] for p in (out / "_staging").rglob("*.parquet")] == [("_staging", "killed-run")]
    assert set(manifest_files(out)) == files_under(out) - {*UNLISTED, *stray_files(out)}


def stray_files(output: Path) -> set[str]:
    return {str(p.relative_to(output)) for p in (output / "_staging").rglob("*") if p.is_file()}


def test_memory_filesystem_output() -> None:
    output = f"memory://zerda-test-{uuid.uuid4().hex}/out"
    fs, root = fsspec.core.url_to_fs(output)
    try:
        rows = corpus(4)
        run_write(output, rows)
        assert fs.exists(f"{root}/_SUCCESS")
        assert read_chunks(root, filesystem=fs) == sorted(rows, key=lambda row: row["chunk_id"])
        assert not fs.exists(f"{root}/_staging")
    finally:
        fs.rm(root.rsplit("/", 1)[0], recursive=True)


def test_a_failed_write_leaves_the_previous_output_finished(tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = corpus(3)
    run_write(str(out), before)
    assert (out / "_SUCCESS").exists()

    broken = corpus(3)
    del broken[1]["text"]  # a row without a required column: the write must fail, not store a null
    with pytest.raises(Exception, match="required column"):
        run_write(str(out), broken)
    assert (out / "_SUCCESS").exists()  # the failure came before the commit: the previous output is untouched
    assert read_chunks(str(out)) == sorted(before, key=lambda row: row["chunk_id"])


def test_prepare_output(tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        prepare_output(str(a_file))
    with pytest.raises(OutputError, match="not writable"):
        prepare_output(str(a_file / "below"))
    with pytest.raises(OutputError, match="not writable"):
        prepare_output("nosuchprotocol://bucket/out")

    out = tmp_path / "new" / "out"
    prepare_output(str(out))
    assert out.is_dir() and not any(out.iterdir())  # created, and the write probe is gone
    (out / "_SUCCESS").touch()
    prepare_output(str(out))
    assert (out / "_SUCCESS").exists()  # the previous output stays finished until the commit replaces it


def test_only_repeated_columns_are_dictionary_encoded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_write(str(out), corpus(3))
    (first, *_) = sorted(out.glob("density_bucket=*/part-*.parquet"))
    columns = pq.ParquetFile(first).metadata.row_group(0)
    encodings = {columns.column(i).path_in_schema: columns.column(i).encodings for i in range(columns.num_columns)}
    assert any("DICTIONARY" in e for e in encodings["doc_id"])
    assert not any("DICTIONARY" in e for e in encodings["text"] + encodings["chunk_id"])


def test_the_commit_reads_no_kept_file_and_checks_a_retried_moves_footers_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An incremental run keeps most chunk files where they are: the commit reads none of them (the launch
    checked each against its manifest entry; on an object store a read is a few requests, and a 10 TB output
    has ~190,000 chunk files). A retried commit finds the files an earlier attempt moved, and checks each one's
    footer names its staged path, 16 at a time."""
    root = tmp_path / "out"
    (root / "density_bucket=3").mkdir(parents=True)
    kept, moved = [], []
    for n in range(64):
        final = f"density_bucket=3/part-{n:05d}.parquet"
        staged = f"_staging/old/density_bucket=3/part-{n:05d}.parquet"
        table = pa.table({"a": [n]}).replace_schema_metadata({STAGED_KEY: staged.encode()})
        pq.write_table(table, root / final)
        if n % 2:
            kept.append((StagedFile("density_bucket=3", final, 1, written_as=staged, kept=True), final))
        else:
            moved.append((StagedFile("density_bucket=3", staged, 1), final))
    most, read = most_at_once(monkeypatch, commit_module, "staged_as"), []
    reading = commit_module.staged_as
    monkeypatch.setattr(commit_module, "staged_as", lambda fs, path: read.append(path) or reading(fs, path))
    fs = fsspec.filesystem("file")
    to_move, done = commit_module._pending_moves(fs, str(root), [*kept, *moved])
    assert to_move == [] and done == {f"{root}/{final}" for _, final in [*kept, *moved]}
    assert sorted(read) == sorted(f"{root}/{final}" for _, final in moved)
    assert most[0] > 1, "the footers were read one after another"


def test_the_commit_moves_the_files_in_tasks_that_workers_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staged files are moved in tasks of a bounded number of files (a runner spreads the tasks across
    its workers), every file once, and the committed files are those staged, whole."""
    tasks: list[list[str]] = []
    moving = commit_module._MoveStaged.process

    def counted(self: commit_module._MoveStaged, task: tuple[int, Iterable[tuple[str, str]]]) -> Iterator[str]:
        moves = list(task[1])
        tasks.append([final for _, final in moves])
        yield from moving(self, (task[0], moves))

    monkeypatch.setattr(commit_module, "_MOVES_PER_TASK", 3)
    monkeypatch.setattr(commit_module._MoveStaged, "process", counted)
    out = tmp_path / "out"
    run_write(str(out), corpus(12), max_rows_per_file=2)
    committed = [entry["path"] for entry in read_manifest(out)["output"]["files"]]
    moved = [final for task in tasks for final in task]
    assert len(tasks) >= 4 and all(len(task) <= 3 for task in tasks)
    assert sorted(moved) == sorted(committed) and len(set(moved)) == len(moved)
    assert read_chunks(str(out)) == sorted(corpus(12), key=lambda row: row["chunk_id"])


def test_the_commit_refuses_an_inputs_table_that_is_not_one_row_per_file_read(tmp_path: Path) -> None:
    """The table of the files read is checked like the data: its staged rows are the files the manifest counts
    read, or nothing in OUTPUT changes."""
    out = tmp_path / "out"
    run_write(str(out), corpus(3))
    before = files_under(out)
    manifest = read_manifest(out)
    no_rows = {"chunks_by_bucket": {}, "rejects": {}, "reject_rows": 0, "records_read": 0, "documents_chunked": 0}
    manifest["counts"].update(no_rows, files_read=2)  # no data staged; one input row staged for two files
    staged = StagedFile(INPUTS_DIR, f"_staging/{new_run_id()}/{INPUTS_DIR}/part-{uuid.uuid4().hex}.pq", 1)
    with pytest.raises(CommitError, match=r"_manifest/inputs: 1 rows, manifest 2 files read"):
        list(commit_module._BeginCommit(str(out)).process(None, [], [], manifest, [staged]))
    assert files_under(out) == before
