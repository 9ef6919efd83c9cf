"""``--incremental``: a rerun chunks only what changed, and gives exactly the rows a full run would.

Each test edits a real corpus on disk (or in moto's S3 server) between runs and compares the output of an
incremental run, row for row, with a full run of the new corpus into a fresh OUTPUT. Unchanged documents
are proven not to be chunked again with ``ZERDA_INJECT_FAULT`` on one of them: had the chunker seen it,
the run would fail.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

import pipelines.incremental.carry
import pipelines.incremental.classify
import pipelines.incremental.compare
import pipelines.incremental.index
import pipelines.incremental.previous
import pipelines.incremental.rows
import pipelines.input.read
import pipelines.output.commit
import zerda_core
from pipelines.cli.rechunk import main, run
from pipelines.errors import NewerManifestError, OutputError
from pipelines.incremental.classify import kept_records
from pipelines.incremental.index import MAX_INDEX_PARTITIONS, index_partitions
from pipelines.incremental.previous import Previous, planned_partitions, read_previous
from pipelines.records import content_id
from pipelines.report import main as report_main
from tests.common import MULTI_PROCESS, REPO
from tests.fault_injection import zerda_fault
from tests.output_checks import read_manifest, write_manifest
from zerda_core.chunks import AdaptiveChunker

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]

_PROSE = "The fennec fox sleeps by day in a burrow under the dunes and hunts by night. "
_CODE = "SELECT id, name FROM users WHERE age > 30 AND city = 'Tunis'; -- query {n}\n"


def _doc(n: int, kind: str = "prose") -> str:
    unit = _PROSE if kind == "prose" else _CODE.format(n=n)
    return f"Document {n}. " + unit * (4 + n % 7)


def _write_jsonl(path: Path, docs: list[tuple[str, str]]) -> None:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs), encoding="utf-8")


def _corpus_v1(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    _write_jsonl(root / "a.jsonl", [(f"d{n}", _doc(n, "prose" if n % 2 else "code")) for n in range(1, 9)])
    _write_jsonl(root / "b.jsonl", [("d3", _doc(3)), ("b1", _doc(21)), ("short", "too short")])
    (root / "notes.md").write_text("# Notes\n\n" + _PROSE * 6, encoding="utf-8")
    (root / "keep.md").write_text("# Keep\n\n" + _CODE.format(n=99) * 8, encoding="utf-8")


def _corpus_v2(root: Path) -> None:
    """Edits, adds, deletions, a rename, a reject that became valid and a document that became a reject."""
    docs = [(f"d{n}", _doc(n, "prose" if n % 2 else "code")) for n in range(1, 9) if n != 4]  # d4 deleted
    docs[1] = ("d2", _doc(2, "code") + " An edited last sentence.")  # d2 edited
    docs[4] = ("d6", "")  # d6 became a reject (empty)
    docs.append(("d9", _doc(9)))  # added
    _write_jsonl(root / "a.jsonl", docs)
    _write_jsonl(root / "b.jsonl", [("d3", _doc(3)), ("b1", _doc(21)), ("short", _doc(30))])  # reject -> valid
    (root / "notes.md").rename(root / "renamed.md")


def _rows(output: str | Path, filesystem: Any = None) -> list[tuple[Any, ...]]:
    table = ds.dataset(str(output), format="parquet", partitioning="hive", filesystem=filesystem).to_table()
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _table(output: Path, folder: str) -> list[dict[str, Any]]:
    return pq.read_table(output / folder).to_pylist()


def _rejects(output: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(row.values()) for row in _table(output, "_rejects"))


def _index(output: Path) -> list[tuple[Any, ...]]:
    """The index rows, sorted, without the chunk file each names, after checking that file holds exactly the
    document's rows (two runs name their files differently)."""
    rows = _table(output, "_index")
    for row in rows:
        chunks = pq.read_table(output / row["chunk_file"]).to_pylist()
        mine = [
            c["chunk_id"]
            for c in chunks
            if (c["source"], c["record"], c["doc_id"]) == (row["source"], row["record"], row["doc_id"])
        ]
        assert sorted(mine) == sorted(row["chunk_ids"]), row
    return sorted(tuple(map(str, (v for k, v in row.items() if k != "chunk_file"))) for row in rows)


def _argv(corpus: Path | str, output: Path | str, *extra: str) -> list[str]:
    return ["--input", str(corpus), "--output", str(output), "--quiet", *extra]


def _to_embed(output: Path) -> set[str]:
    """docs/incremental.md's query for the chunks to re-embed."""
    query = f"""
        SELECT c.chunk_id, c.doc_id, c.source, c.text
        FROM read_parquet('{output}/_changes/*.pq') AS ch
        JOIN read_parquet('{output}/**/*.parquet', hive_partitioning = true) AS c USING (chunk_id)
        WHERE ch.change = 'added'"""
    return {row[0] for row in duckdb.sql(query).fetchall()}


def _snapshot(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("workers", "split"),
    [([], False), (MULTI_PROCESS, False), (MULTI_PROCESS, True)],
    ids=["in-memory", "2-worker-processes", "2-worker-processes-split-files"],
)
def test_incremental_run_equals_a_full_run_and_lists_the_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[str], split: bool
) -> None:
    """With ``split``, the incremental runs read the JSONL files in parts of a few lines; the full run does not."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    if split:
        config = tmp_path / "split.yaml"
        config.write_text("input:\n  split_bytes: 700\n", encoding="utf-8")
        workers = [*workers, "--config", str(config)]
    _corpus_v1(corpus)
    _age(*corpus.iterdir())  # keep.md stays as it is: the incremental run does not read it
    first = run(_argv(corpus, output, *workers))
    assert first["changes"]["incremental"] is False
    assert first["changes"]["documents_added"] == first["counts"]["documents_chunked"] == 12
    assert first["changes"]["chunks_added"] == first["counts"]["chunks"]
    assert {r["change"] for r in _table(output, "_changes")} == {"added"}
    before = {(r["chunk_id"], r["source"], r["doc_id"]) for r in pq.read_table(output, columns=None).to_pylist()}

    _corpus_v2(corpus)
    marker = tmp_path / "fault.marker"
    with monkeypatch.context() as armed:
        zerda_fault.arm(armed, "b1", marker)  # b1 is unchanged: chunking it would fail the run
        manifest = run(_argv(corpus, output, "--incremental", *workers))
    assert not marker.exists(), "an unchanged document went through the chunker"
    full = run(_argv(corpus, fresh))

    assert _rows(output) == _rows(fresh)
    assert _rejects(output) == _rejects(fresh)
    assert manifest["counts"] == full["counts"]
    changes = manifest["changes"]
    assert changes["incremental"] is True and changes["files_unchanged"] == 1
    # A document is its id within its source, wherever its line is: deleting d4 (line 4) moves d5..d8 up a
    # line and changes none of them. Unchanged: d1 d3 d5 d7 d8 (a.jsonl), d3 b1 (b.jsonl), keep.md; changed:
    # d2; added: d9, short (was a reject), renamed.md; removed: d4, d6 (now a reject), notes.md (renamed).
    assert {k: changes[k] for k in changes if k.startswith("documents_")} == {
        "documents_added": 3,
        "documents_changed": 1,
        "documents_removed": 3,
        "documents_unchanged": 8,
    }
    after = {(r["chunk_id"], r["source"], r["doc_id"]) for r in pq.read_table(fresh).to_pylist()}
    listed = {(r["chunk_id"], r["source"], r["doc_id"], r["change"]) for r in _table(output, "_changes")}
    assert listed == {(*c, "added") for c in after - before} | {(*c, "removed") for c in before - after}
    assert changes["chunks_added"] == len(after - before) and changes["chunks_removed"] == len(before - after)
    assert _to_embed(output) == {c[0] for c in after - before}
    assert _index(output) == _index(fresh)
    index = _table(output, "_index")
    assert len(index) == manifest["counts"]["documents_chunked"]
    assert sorted(len(r["chunk_ids"]) for r in index) == sorted(r["chunk_count"] for r in index)
    committed = {entry["path"] for entry in manifest["output"]["files"]}
    assert any(path.startswith("_index/") for path in committed) and any(p.startswith("_changes/") for p in committed)
    assert not (output / "_staging").exists()


def test_a_chunk_file_of_unchanged_files_only_stays_where_it_is(tmp_path: Path) -> None:
    """Chunk files close at source boundaries: a previous file holding only rows of files not read this
    time is kept by the commit as it is (same inode: no copy), the others are replaced; rows as a full run."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    config = tmp_path / "small_files.yaml"
    config.write_text("output:\n  max_rows_per_file: 4\n", encoding="utf-8")
    corpus.mkdir()
    for name in ("p", "q", "r", "s"):
        _write_jsonl(corpus / f"{name}.jsonl", [(f"{name}{n}", _doc(n)) for n in range(1, 7 if name == "s" else 4)])
    _age(*corpus.iterdir())
    run(_argv(corpus, output, "--config", str(config)))

    def chunk_files() -> dict[str, tuple[int, set[str]]]:  # path -> (inode, the sources of its rows)
        return {
            str(path.relative_to(output)): (
                path.stat().st_ino,
                set(pq.read_table(path, columns=["source"])["source"].to_pylist()),
            )
            for path in output.glob("density_bucket=*/*.parquet")
        }

    before = chunk_files()
    _write_jsonl(corpus / "q.jsonl", [("q1", _doc(1) + " Edited."), ("q2", _doc(2))])  # q3 gone, q1 edited
    manifest = run(_argv(corpus, output, "--config", str(config), "--incremental"))
    assert manifest["changes"]["files_unchanged"] == 3
    after = chunk_files()
    unchanged = {
        path: inode for path, (inode, sources) in before.items() if not any(s.endswith("/q.jsonl") for s in sources)
    }
    assert unchanged, "the layout left no file of unchanged sources only"
    assert {path: after[path][0] for path in unchanged if path in after} == unchanged  # kept: same files
    assert len(after) == len({inode for inode, _ in after.values()})
    assert sorted(
        entry["path"] for entry in manifest["output"]["files"] if entry["path"].startswith("density")
    ) == sorted(after)
    run(_argv(corpus, fresh, "--config", str(config)))
    assert _rows(output) == _rows(fresh)
    assert not (output / "_staging").exists()
    # the unread files' index rows, carried as they were, beside the rows of the file read: one partition
    assert [path.name for path in (output / "_index").glob("*.pq")] == ["part-00000-of-00001.pq"]
    assert _index(output) == _index(fresh)


def test_only_the_chunk_files_of_changed_or_removed_documents_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every input file is read again (their times changed), one document is edited and one removed: the run
    reads the previous chunk files holding those two and no other, rewrites them under their own names (the
    index rows of the documents left in them still point there) and keeps every other file as it is."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    config = tmp_path / "small_files.yaml"
    config.write_text("output:\n  max_rows_per_file: 3\n", encoding="utf-8")
    corpus.mkdir()
    for name in ("p", "q", "r"):
        _write_jsonl(corpus / f"{name}.jsonl", [(f"{name}{n}", _doc(n)) for n in range(1, 7)])
    run(_argv(corpus, output, "--config", str(config)))
    index = {row["doc_id"]: row["chunk_file"] for row in _table(output, "_index")}
    inodes = {path: (output / path).stat().st_ino for path in set(index.values())}
    _write_jsonl(
        corpus / "q.jsonl", [(f"q{n}", _doc(n) + (" Edited." if n == 2 else "")) for n in range(1, 7) if n != 5]
    )
    for path in corpus.iterdir():
        os.utime(path, (time.time() - 30, time.time() - 30))  # a new time: every file is read
    opened: list[str] = []
    real = pipelines.incremental.carry._read_table

    def spy(url: str, columns: list[str] | None = None, filters: Any = None, footer: str = "") -> Any:
        opened.append(url)
        return real(url, columns, filters, footer)

    monkeypatch.setattr(pipelines.incremental.carry, "_read_table", spy)
    manifest = run(_argv(corpus, output, "--config", str(config), "--incremental"))
    touched = {index["q2"], index["q5"]}
    assert sorted(url.split("/out/", 1)[1] for url in opened if "density_bucket=" in url) == sorted(touched)
    assert manifest["changes"]["files_unchanged"] == 0 and manifest["changes"]["documents_unchanged"] == 16
    for path, inode in inodes.items():
        if path not in touched:
            assert (output / path).stat().st_ino == inode, path  # kept: the very file
    after = {row["doc_id"]: row["chunk_file"] for row in _table(output, "_index")}
    stayed = {d for d, path in index.items() if path in touched} - {"q2", "q5", "q6"}  # q6 moved up a line
    assert stayed and all(after[d] == index[d] for d in stayed)
    run(_argv(corpus, fresh, "--config", str(config)))
    assert _rows(output) == _rows(fresh)
    assert _index(output) == _index(fresh)


@pytest.mark.parametrize("how", ["older format", "a column gone"])
def test_an_index_of_an_older_format_or_edited_runs_in_full_against_nothing_and_says_why(
    tmp_path: Path, how: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """An index not written by partition (an older zerda's: neither read by source nor saying where a
    document's rows are) is found at launch; one edited by hand (a column gone, its size and hash recorded
    anew) fails the first read of it, and the launcher runs again in full. Both list changes against nothing."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    corpus.mkdir()
    _write_jsonl(corpus / "a.jsonl", [("a1", _doc(1)), ("a2", _doc(2))])
    run(_argv(corpus, output))
    manifest = read_manifest(output)
    for entry in manifest["output"]["files"]:
        if entry["path"].startswith("_index/"):
            index_file, path = entry["path"], output / entry["path"]
            if how == "older format":
                entry["path"] = "_index/part-00000.pq"
                path = path.rename(output / entry["path"])
            else:
                pq.write_table(pq.read_table(path).drop_columns(["chunk_file"]), path)
            entry["bytes"] = path.stat().st_size
    write_manifest(output, manifest)
    _write_jsonl(corpus / "a.jsonl", [("a1", _doc(1)), ("a3", _doc(3))])
    second = run(_argv(corpus, output, "--incremental"))
    run(_argv(corpus, fresh))
    why = {
        "older format": "full run: the previous index is of an older format",
        "a column gone": f"full run: a previous index file cannot be read: {index_file}",
    }[how]
    assert second["changes"]["reason"].startswith(why)
    assert second["changes"]["reason"].endswith("without its index every chunk is listed as added")
    assert second["changes"]["documents_added"] == 2 and second["changes"]["documents_removed"] == 0
    assert _rows(output) == _rows(fresh)
    assert _index(output) == _index(fresh)
    if how == "a column gone":
        assert f"cannot be read: {index_file}" in capfd.readouterr().err


@pytest.mark.parametrize(("before", "after"), [(1, 8), (8, 1), (4, 4)])
def test_an_index_of_another_partition_count_compares_alike(
    before: int, after: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is read by partition whatever the number the previous run chose (a corpus grew or shrank):
    the incremental run equals a full one, its changes and counts included, and writes its own partitions."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    _corpus_v1(corpus)
    _age(*corpus.iterdir())
    monkeypatch.setattr(pipelines.incremental.previous, "index_partitions", lambda documents, input_bytes: before)
    run(_argv(corpus, output))
    assert {p.name.split("-of-")[1] for p in (output / "_index").iterdir()} == {f"{before:05d}.pq"}
    _corpus_v2(corpus)
    monkeypatch.setattr(pipelines.incremental.previous, "index_partitions", lambda documents, input_bytes: after)
    manifest = run(_argv(corpus, output, "--incremental"))
    assert {p.name.split("-of-")[1] for p in (output / "_index").iterdir()} == {f"{after:05d}.pq"}
    assert manifest["changes"]["incremental"] is True and manifest["changes"]["files_unchanged"] == 1
    assert {k: v for k, v in manifest["changes"].items() if k.startswith("documents_")} == {
        "documents_added": 3,
        "documents_changed": 1,
        "documents_removed": 3,
        "documents_unchanged": 8,
    }
    full = run(_argv(corpus, fresh))
    assert manifest["counts"] == full["counts"] and manifest["counts"]["duplicate_doc_ids"] == 1  # d3: a and b
    assert {p.name.split("-of-")[1] for p in (output / "_ids").iterdir()} == {f"{after:05d}.pq"}
    assert _rows(output) == _rows(fresh)
    assert _index(output) == _index(fresh)
    for path in (output / "_index").iterdir():  # each file holds its partition's sources, sorted
        sources = pq.read_table(path, columns=["source"])["source"].to_pylist()
        partition = int(path.name.split("-")[1])
        assert sources == sorted(sources) and {pipelines.incremental.index.partition_of(s, after) for s in sources} == {
            partition
        }


def _sorted_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(map(str, row.values())) for row in rows)


def _age(*paths: Path) -> None:
    """Files last modified a minute ago: settled, so a rerun may skip them (one modified in the last
    seconds gets no stamp and is read again)."""
    old = time.time() - 60
    for path in paths:
        os.utime(path, (old, old))


def _spy_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The relative paths of the files the reader opens from now on (in-memory runner: this process)."""
    opened: list[str] = []
    real = pipelines.input.read.read_part

    def spy(part: Any, settings: Any) -> Any:
        opened.append(part.file.relative_path)
        return real(part, settings)

    monkeypatch.setattr(pipelines.input.read, "read_part", spy)
    return opened


def _with_rejects(corpus: Path) -> None:
    """Files whose records (or the whole file) are rejects, and a truncated gzip (an error mid-file)."""
    _write_jsonl(corpus / "r.jsonl", [("ok", _doc(5)), ("empty", ""), ("tiny", "x")])
    (corpus / "blob.bin").write_bytes(b"\x00\x01binary")
    whole = gzip.compress("".join(json.dumps({"id": f"g{n}", "text": _doc(n)}) + "\n" for n in range(40)).encode())
    (corpus / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])


def test_unchanged_files_are_not_read_and_give_the_rows_rejects_and_counts_of_a_full_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file listed with the size, times and inode it had at the previous run is not opened: its rows,
    rejects and report come from the previous output. What changed, what broke mid-file last time, and
    what was modified just before the previous run's listing (no stamp) are read."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    _corpus_v1(corpus)
    _with_rejects(corpus)
    _age(*corpus.iterdir())
    (corpus / "late.md").write_text("# Late\n\n" + _PROSE * 5, encoding="utf-8")  # written just now: no stamp
    first = run(_argv(corpus, output))
    assert [e["source"].rsplit("/", 1)[1] for e in first["inputs"] if not e["stamp"]] == ["late.md"]
    _corpus_v2(corpus)  # a.jsonl and b.jsonl rewritten, notes.md renamed
    opened = _spy_reads(monkeypatch)
    manifest = run(_argv(corpus, output, "--incremental"))
    assert sorted(opened) == ["a.jsonl", "b.jsonl", "cut.jsonl.gz", "late.md", "renamed.md"]
    assert manifest["changes"]["files_unchanged"] == 3  # blob.bin, keep.md, r.jsonl
    full = run(_argv(corpus, fresh))
    assert _rows(output) == _rows(fresh)
    assert _rejects(output) == _rejects(fresh)
    carried = {(r[0].rsplit("/", 1)[1], r[3]) for r in _rejects(output) if r[0].endswith(("r.jsonl", "blob.bin"))}
    assert carried == {("r.jsonl", "empty"), ("r.jsonl", "below_min_chunk_size"), ("blob.bin", "not_text")}
    assert manifest["counts"] == full["counts"]
    assert [{**e, "stamp": ""} for e in manifest["inputs"]] == [{**e, "stamp": ""} for e in full["inputs"]]
    listed = {r["source"].rsplit("/", 1)[1] for r in _table(output, "_changes")}
    assert listed.isdisjoint({"blob.bin", "keep.md", "r.jsonl"})

    _age(*(corpus / name for name in ("a.jsonl", "b.jsonl", "late.md")))  # settled now; renamed.md kept its mtime
    opened.clear()
    again = run(_argv(corpus, output, "--incremental"))
    assert sorted(opened) == ["a.jsonl", "b.jsonl", "cut.jsonl.gz", "late.md"]  # not stamped the last time
    opened.clear()
    third = run(_argv(corpus, output, "--incremental"))
    assert opened == ["cut.jsonl.gz"]  # it broke mid-file: read every time
    for result in (again, third):
        assert result["changes"]["chunks_added"] == result["changes"]["chunks_removed"] == 0
        assert result["counts"] == full["counts"]
    assert third["changes"]["files_unchanged"] == len(full["inputs"]) - 1
    assert _rows(output) == _rows(fresh)
    assert _rejects(output) == _rejects(fresh)


@pytest.mark.parametrize("how", ["same size, times put back", "replaced by a copy", "read from another root"])
def test_a_file_changed_behind_its_times_or_seen_from_another_root_is_read(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equal stamps must mean equal bytes and ids: an edit whose size and mtime are put back still moves
    ctime; a file replaced by another with the same size and times is another inode; a file under
    another glob root has other relative paths, so other ids."""
    root, output, fresh = tmp_path / "root", tmp_path / "out", tmp_path / "fresh"
    corpus = root / "corpus"
    _corpus_v1(corpus)
    _age(*corpus.iterdir())
    run(_argv(corpus, output))
    keep = corpus / "keep.md"
    text, stat = keep.read_text(encoding="utf-8"), keep.stat()
    if how != "read from another root":
        edited = text.replace("# Keep", "# Kept")
        assert len(edited) == len(text)
        (keep if how == "same size, times put back" else tmp_path / "copy.md").write_text(edited, encoding="utf-8")
        if how == "replaced by a copy":
            (tmp_path / "copy.md").replace(keep)
        os.utime(keep, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    where = root if how == "read from another root" else corpus
    opened = _spy_reads(monkeypatch)
    manifest = run(_argv(where, output, "--incremental"))
    run(_argv(where, fresh))
    assert "keep.md" in {path.rsplit("/", 1)[-1] for path in opened}
    assert manifest["changes"]["files_unchanged"] == (0 if how == "read from another root" else 3)
    assert _rows(output) == _rows(fresh)


@pytest.fixture(scope="module")
def settled_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(corpus v1, settled, never changed again; a full run of it into an empty OUTPUT). Read-only: a test
    copies the output before it edits or reruns it (its paths are relative); the run is its fresh run too."""
    root = tmp_path_factory.mktemp("settled")
    corpus, output = root / "corpus", root / "out"
    _corpus_v1(corpus)
    _age(*corpus.iterdir())
    run(_argv(corpus, output))
    return corpus, output


@pytest.mark.parametrize("edit", ["inputs null", "records a string", "bytes negative", "stamp a number"])
def test_previous_inputs_edited_by_hand_are_read_again(
    edit: str, settled_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """A previous manifest whose ``inputs`` were edited cannot vouch for a file: it is read, not trusted (a
    manifest of format 1, whose inputs were JSON, takes any type)."""
    corpus, fresh = settled_run  # the full run of the unchanged corpus
    output = tmp_path / "out"
    shutil.copytree(fresh, output)  # the previous run's output
    manifest = read_manifest(output)
    if edit == "inputs null":
        manifest["inputs"] = None
    else:
        key, value = {"records a string": ("records", "7"), "bytes negative": ("bytes", -1)}.get(edit, ("stamp", 7))
        for entry in manifest["inputs"]:
            entry[key] = value
    write_manifest(output, manifest, format=1)
    result = run(_argv(corpus, output, "--incremental"))
    assert result["changes"]["incremental"] is True and result["changes"]["files_unchanged"] == 0
    assert result["counts"]["records_read"] == 13
    assert _rows(output) == _rows(fresh)


def test_duplicate_ids_in_two_files_stay_distinct(tmp_path: Path) -> None:
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    corpus.mkdir()
    _write_jsonl(corpus / "x.jsonl", [("same", _doc(1))])
    _write_jsonl(corpus / "y.jsonl", [("same", _doc(1))])
    run(_argv(corpus, output))
    _write_jsonl(corpus / "y.jsonl", [("same", _doc(2))])  # one copy edited, the other not
    manifest = run(_argv(corpus, output, "--incremental"))
    run(_argv(corpus, fresh))
    assert _rows(output) == _rows(fresh)
    assert manifest["changes"]["documents_unchanged"] == 1 and manifest["changes"]["documents_changed"] == 1
    assert {r["source"].rsplit("/", 1)[1] for r in _table(output, "_changes")} == {"y.jsonl"}


def test_copies_of_one_id_in_one_file_change_only_what_the_dataset_gains_or_loses(tmp_path: Path) -> None:
    """Two identical lines (one id, one text) share chunk ids: deleting one lists no chunk as removed
    while the other still holds it; editing one lists only the edit's chunks."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    corpus.mkdir()
    twin = ("x", _doc(3))
    _write_jsonl(corpus / "a.jsonl", [("keep", _doc(2)), twin, twin, twin])
    run(_argv(corpus, output))
    _write_jsonl(corpus / "a.jsonl", [("keep", _doc(2)), twin, ("x", _doc(3) + " Edited.")])  # -1 copy, 1 edited
    manifest = run(_argv(corpus, output, "--incremental"))
    run(_argv(corpus, fresh))
    assert _rows(output) == _rows(fresh)
    live = {r["chunk_id"] for r in pq.read_table(output).to_pylist()}
    changes = _table(output, "_changes")
    removed = {r["chunk_id"] for r in changes if r["change"] == "removed"}
    added = {r["chunk_id"] for r in changes if r["change"] == "added"}
    assert not removed & live, "a chunk listed as removed is still in the output"
    assert added <= live and added, "the edited copy's new chunks are listed"
    edited = {r["chunk_id"] for r in pq.read_table(fresh).to_pylist() if r["record"] == 3}
    assert added == edited - {r["chunk_id"] for r in pq.read_table(fresh).to_pylist() if r["record"] == 2}
    assert manifest["changes"]["chunks_removed"] == len(removed) == 0  # the twin's chunks live on in line 2
    counts = {k: v for k, v in manifest["changes"].items() if k.startswith("documents_")}
    assert counts == {"documents_added": 0, "documents_changed": 1, "documents_removed": 1, "documents_unchanged": 2}


def test_documents_without_an_id_keep_their_identity_when_lines_move(tmp_path: Path) -> None:
    """A record without an id is named by its text: a line deleted above it and one added below change
    nothing of it (counts, ``_changes``), where a name by line number counted every line after as removed
    and added."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    corpus.mkdir()

    def write(numbers: range) -> None:
        lines = (json.dumps({"text": _doc(n, "prose" if n % 2 else "code")}) + "\n" for n in numbers)
        (corpus / "a.jsonl").write_text("".join(lines), encoding="utf-8")

    write(range(1, 7))
    run(_argv(corpus, output))
    before = {r["chunk_id"]: r["doc_id"] for r in pq.read_table(output).to_pylist()}
    write(range(2, 8))  # the first line gone, every other one line up, one new line at the end
    manifest = run(_argv(corpus, output, "--incremental"))
    run(_argv(corpus, fresh))
    assert _rows(output) == _rows(fresh)
    counts = {k: v for k, v in manifest["changes"].items() if k.startswith("documents_")}
    assert counts == {"documents_added": 1, "documents_changed": 0, "documents_removed": 1, "documents_unchanged": 5}
    changes = _table(output, "_changes")
    removed = {r["doc_id"] for r in changes if r["change"] == "removed"}
    added = {r["doc_id"] for r in changes if r["change"] == "added"}
    assert removed == {content_id(_doc(1, "prose"))} and added == {content_id(_doc(7, "prose"))}
    after = {r["chunk_id"] for r in pq.read_table(output).to_pylist()}
    assert {c for c, doc in before.items() if doc != content_id(_doc(1, "prose"))} <= after


@pytest.fixture(scope="module")
def edited_after_a_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(corpus, a full run of it as v1, a full run of it as v2): the corpus edited to v2 after its first run,
    then never changed again. Read-only: a test copies the first run's output (its paths are relative) and
    reruns the copy, as if that had been its own previous run."""
    root = tmp_path_factory.mktemp("edited")
    corpus, previous, fresh = root / "corpus", root / "previous", root / "fresh"
    _corpus_v1(corpus)
    run(_argv(corpus, previous))
    _corpus_v2(corpus)
    run(_argv(corpus, fresh))
    return corpus, previous, fresh


@pytest.mark.parametrize(
    ("gone", "how"),
    [
        ("density_bucket=", "deleted"),
        ("_index/", "deleted"),
        ("density_bucket=", "cut"),
        ("_index/", "garbage"),
        ("_index/", "flipped"),  # bytes changed, the size the same: known from the CRC of its pages when read
        ("_index/", "statistics"),  # a footer's statistics changed: known from its digest in the manifest
    ],
)
def test_a_previous_output_missing_or_changed_files_runs_in_full_and_says_why(
    gone: str, how: str, edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A file of the previous output deleted, cut short or overwritten by hand: the next runs are full ones
    (not failures, every night); a changed file is known from the size the manifest recorded."""
    corpus, previous, fresh = edited_after_a_run  # fresh: the full run of the corpus as it is now
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    victim = next(e["path"] for e in read_manifest(output)["output"]["files"] if e["path"].startswith(gone))
    if how == "deleted":
        (output / victim).unlink()
    else:
        data = (output / victim).read_bytes()
        damaged = {
            "cut": lambda: data[: len(data) // 2],
            "garbage": lambda: b"not parquet",
            "flipped": lambda: _flipped(data),
            "statistics": lambda: _lowered_statistics(data),
        }
        (output / victim).write_bytes(damaged[how]())
    manifest = run(_argv(corpus, output, "--incremental"))
    assert _rows(output) == _rows(fresh)
    assert manifest["changes"]["incremental"] is False
    why = (
        "a previous index file cannot be read"
        if how in ("flipped", "statistics")
        else "the previous output is incomplete (1 file(s)"
    )
    assert manifest["changes"]["reason"].startswith(f"full run: {why}")
    assert victim in manifest["changes"]["reason"]
    again = run(_argv(corpus, output, "--incremental"))["changes"]
    assert again["incremental"] is True, again["reason"]  # whole again


def test_the_runs_listings_outlive_its_staged_files_until_success_is_written(
    edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner that retries a failed commit, or restarts the steps before it (Flink), reads the run's listings
    of files (and its staged index rows and leaving rows) again: the commit deletes the staged data files before it
    publishes (a reader of ``**/*.parquet`` must not find them beside the committed ones) and what the workers read
    only after; the committed run leaves no staging."""
    corpus, previous, _ = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    seen: list[tuple[list[str], list[str]]] = []
    publish = pipelines.output.commit._publish

    def spy(fs: Any, root: str, files: Any, manifest: Any) -> Any:
        staged = sorted(str(p.relative_to(output)) for p in (output / "_staging").rglob("*") if p.is_file())
        read = [p for p in staged if any(f"/{folder}/" in p for folder in ("listing", "index_rows", "leaving"))]
        seen.append((read, [p for p in staged if p not in read]))
        return publish(fs, root, files, manifest)

    monkeypatch.setattr(pipelines.output.commit, "_publish", spy)
    manifest = run(_argv(corpus, output, "--incremental"))
    assert manifest["changes"]["incremental"] is True
    ((listings, others),) = seen
    assert any("/listing/previous/" in p for p in listings) and others == [], (listings, others)
    assert any("/index_rows/" in p for p in listings) and any("/leaving/" in p for p in listings), listings
    assert not (output / "_staging").exists()


def _flipped(data: bytes, column: str = "doc_id") -> bytes:
    """A Parquet file's ``data`` with the last 8 bytes of ``column``'s first column chunk inverted (a bad disk
    sector, a bit rot), the same size: bytes of a page's data, which its CRC covers. (Page headers and the
    footer have no CRC; a flip there either fails to decode or changes only statistics, which the run uses
    as a hint: see ``test_a_previous_index_with_wrong_statistics_costs_work_not_correctness``.)"""
    group = pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(0)
    (chunk,) = (group.column(j) for j in range(group.num_columns) if group.column(j).path_in_schema == column)
    end = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size
    return data[: end - 8] + bytes(b ^ 0xFF for b in data[end - 8 : end]) + data[end:]


def _lowered_statistics(data: bytes) -> bytes:
    """An index file's ``data`` with its footer's largest source replaced by one of the same length that sorts
    before every source: still a Parquet file, whose statistics now say no row group holds any source."""
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    largest = pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(0).column(0).statistics.max.encode()
    lowered = largest[: largest.rfind(b"/") + 1] + b"!" * (len(largest) - largest.rfind(b"/") - 1)
    changed = data[:footer] + data[footer:].replace(largest, lowered)
    assert changed != data and len(changed) == len(data)
    return changed


def _damaged_footer(output: Path, prefix: str) -> str:
    """The first file the manifest lists under ``prefix``, its footer overwritten in place (its size the same)."""
    victim = next(e["path"] for e in read_manifest(output)["output"]["files"] if e["path"].startswith(prefix))
    data = (output / victim).read_bytes()
    (output / victim).write_bytes(data[:-24] + bytes(b ^ 0xFF for b in data[-24:-8]) + data[-8:])
    return victim


def test_a_previous_manifest_unreadable_runs_in_full_and_says_why(
    edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A _manifest.json broken by hand: a full run (it crashed every run, incremental or not, at launch)."""
    corpus, previous, fresh = edited_after_a_run  # fresh: the full run of the corpus as it is now
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    (output / "_manifest.json").write_text('{"format": 1, "fingerp', encoding="utf-8")
    result = run(_argv(corpus, output, "--incremental"))
    assert _rows(output) == _rows(fresh)
    assert result["changes"]["incremental"] is False
    assert result["changes"]["reason"].startswith("full run: the previous _manifest.json is unreadable (")
    assert result["changes"]["chunks_removed"] == 0  # listed against nothing, as the reason says
    assert run(_argv(corpus, output, "--incremental"))["changes"]["incremental"] is True


def test_a_previous_reject_file_damaged_in_place_runs_in_full_and_says_why(
    edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A reject file's footer overwritten, its size the same: a full run that says why (it was a traceback at
    launch, every night); the next run is incremental again."""
    corpus, previous, fresh = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    victim = output / next(e["path"] for e in read_manifest(output)["output"]["files"] if e["path"].startswith("_rej"))
    data = victim.read_bytes()
    victim.write_bytes(data[:-24] + bytes(b ^ 0xFF for b in data[-24:-8]) + data[-8:])  # in the footer
    result = run(_argv(corpus, output, "--incremental"))
    assert _rows(output) == _rows(fresh)
    assert _rejects(output) == _rejects(fresh)
    assert result["changes"]["incremental"] is False
    assert result["changes"]["reason"].startswith("full run: a previous reject file does not decode (")
    assert run(_argv(corpus, output, "--incremental"))["changes"]["incremental"] is True


@pytest.mark.parametrize("victim", ["_index/", "density"])
def test_a_damaged_previous_file_run_again_in_full_logs_no_traceback(
    victim: str, edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A previous index or chunk file damaged in place is a full run that succeeds (exit 0), saying why in one
    warning line: the attempt that found the damage logged Beam's ERROR with a whole traceback, even with
    ``--quiet``, as if the run had crashed."""
    corpus, previous, _ = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    damaged = _damaged_footer(output, "density") if victim == "density" else None
    if damaged is None:
        index = next(e["path"] for e in read_manifest(output)["output"]["files"] if e["path"].startswith(victim))
        (output / index).write_bytes(_flipped((output / index).read_bytes()))
    capsys.readouterr()
    assert main(_argv(corpus, output, "--incremental")) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    assert read_manifest(output)["changes"]["reason"].startswith("full run: a previous ")


@pytest.mark.parametrize("workers", [[], MULTI_PROCESS], ids=["in memory", "2 processes"])
def test_a_previous_chunk_file_damaged_in_place_gives_a_full_run_that_says_why(
    workers: list[str], edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A chunk file's footer overwritten, its size the same (nothing at launch can tell without reading every
    footer): the carry fails on it, and the launcher runs again in full, which reads no previous chunk file,
    rather than fail every night. The rows are a full run's; the next run is incremental again."""
    corpus, previous, fresh = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    victim = _damaged_footer(output, "density")
    result = run(_argv(corpus, output, "--incremental", *workers))
    assert _rows(output) == _rows(fresh)
    assert result["changes"]["incremental"] is False
    assert result["changes"]["reason"].startswith(f"full run: a previous chunk file cannot be read: {victim} (")
    assert result["counts"] == read_manifest(fresh)["counts"]
    assert not (output / "_staging").exists() or not any((output / "_staging").iterdir())
    assert run(_argv(corpus, output, "--incremental"))["changes"]["incremental"] is True


def _twin_of_a_chunk_file(corpus: Path, output: Path, ours: dict[str, Any], config: Path) -> tuple[str, Path]:
    """(a chunk file of ``output``, another run's file of its bucket with its size and rows but other text): runs
    of a copy of ``corpus`` (its paths the same length) with one word edited to another of its length. A page's
    CRC is a varint in its header, so a size may differ by a byte: a few words are tried."""
    for n, word in enumerate(("fennek", "fennel", "fenner", "fennex", "fennez", "fennen", "fennem", "fenneb")):
        varied, other = corpus.with_name(f"varie{n}"), corpus.parent / f"other{n}"
        shutil.copytree(corpus, varied)
        text = (varied / "a.jsonl").read_text(encoding="utf-8")
        (varied / "a.jsonl").write_text(text.replace("fennec", word), encoding="utf-8")
        run(_argv(varied, other, "--config", str(config)))
        theirs = {e["path"].split("/")[0]: e for e in read_manifest(other)["output"]["files"]}
        for path, entry in sorted(ours.items()):
            twin = theirs.get(path.split("/")[0], {})
            same_size = (twin.get("bytes"), twin.get("rows")) == (entry["bytes"], entry["rows"])
            if same_size and pq.read_table(other / twin["path"])["text"] != pq.read_table(output / path)["text"]:
                return path, other / twin["path"]
    raise AssertionError("no run gave a chunk file of the size of one of the output's")


@pytest.mark.parametrize("kept", [True, False], ids=["kept-untouched", "rewritten"])
def test_a_previous_chunk_file_replaced_by_another_runs_file_of_its_size_gives_a_full_run(
    kept: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chunk file swapped for another run's file of the same size and rows (a restore or a copy gone wrong:
    uncompressed pages, a same-length edit): its pages' CRCs are whole, its size and rows those recorded. Kept
    untouched, its rows were committed again with ``_SUCCESS`` and ``--verify`` passed (rows of another corpus
    in the output); rewritten, the run failed with a traceback every time. Its footer, whose digest the
    manifest records, names another run's staged file: the run says so and runs in full."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    config = tmp_path / "plain.yaml"
    config.write_text("output:\n  compression: none\n", encoding="utf-8")
    _corpus_v1(corpus)
    _age(*corpus.iterdir())
    run(_argv(corpus, output, "--config", str(config)))
    ours = {e["path"]: e for e in read_manifest(output)["output"]["files"] if e["path"].startswith("density")}
    victim, twin = _twin_of_a_chunk_file(corpus, output, ours, config)
    shutil.copyfile(twin, output / victim)
    capsys.readouterr()
    assert report_main(["--verify", str(output)]) == 1
    assert victim in capsys.readouterr().out
    if not kept:  # a document whose rows are in the victim edited: the file is rewritten without them
        doc = next(r for r in _table(output, "_index") if r["chunk_file"] == victim and r["source"].endswith("jsonl"))
        source = Path(doc["source"])
        records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
        _write_jsonl(source, [(r["id"], r["text"] + (" Edited." if r["id"] == doc["doc_id"] else "")) for r in records])
    manifest = run(_argv(corpus, output, "--config", str(config), "--incremental"))
    run(_argv(corpus, fresh, "--config", str(config)))
    assert _rows(output) == _rows(fresh)
    assert manifest["changes"]["incremental"] is False
    assert manifest["changes"]["reason"].startswith(f"full run: a previous chunk file cannot be read: {victim} (")
    assert report_main(["--verify", str(output)]) == 0


def test_a_previous_reject_file_replaced_by_another_runs_file_of_its_size_gives_a_full_run(tmp_path: Path) -> None:
    """A reject file swapped for another run's of the same size (a corpus of the same paths, one reject's text
    another of its length): an unchanged file's rejects are carried from the reject files, so its two rejects
    were lost, silently, with ``_SUCCESS`` (records read 1 for a file of 3 lines). The launch reads the reject
    files whole: their footers are checked against the digests the manifest records, and the run is a full
    one that says why."""
    corpus, output, fresh = tmp_path / "vx" / "corpus", tmp_path / "out", tmp_path / "fresh"  # paths as long as
    config = tmp_path / "plain.yaml"  # those of the other runs' corpora below
    config.write_text("output:\n  compression: none\n", encoding="utf-8")
    corpus.mkdir(parents=True)
    _write_jsonl(corpus / "r.jsonl", [("a", _doc(3)), ("b", "x"), ("c", "")])
    _age(*corpus.iterdir())
    run(_argv(corpus, output, "--config", str(config)))
    (victim,) = [e for e in read_manifest(output)["output"]["files"] if e["path"].startswith("_rejects/")]
    for letter in "yzwvutsrqp":  # a page's CRC is a varint in its header: a size may differ by a byte
        varied, other = tmp_path / f"v{letter}" / "corpus", tmp_path / f"v{letter}" / "out"
        shutil.copytree(corpus, varied)
        _write_jsonl(varied / "r.jsonl", [("a", _doc(3)), ("b", letter), ("c", "")])
        run(_argv(varied, other, "--config", str(config)))
        (twin,) = [e for e in read_manifest(other)["output"]["files"] if e["path"].startswith("_rejects/")]
        if twin["bytes"] == victim["bytes"]:
            break
    else:
        raise AssertionError("no run gave a reject file of the size of the output's")
    shutil.copyfile(other / twin["path"], output / victim["path"])
    manifest = run(_argv(corpus, output, "--config", str(config), "--incremental"))
    run(_argv(corpus, fresh, "--config", str(config)))
    assert manifest["counts"]["records_read"] == 3
    assert _rejects(output) == _rejects(fresh)
    assert manifest["changes"]["reason"].startswith("full run: a previous reject file does not decode (")


@pytest.mark.parametrize(
    ("victim", "error"),
    [
        ("_manifest.json", PermissionError(13, "Permission denied")),
        ("_manifest.json", OSError(5, "Input/output error")),
        ("_rejects/", TimeoutError("read timed out")),
    ],
)
def test_a_previous_file_the_run_cannot_read_exits_2_naming_it(
    victim: str, error: OSError, edited_after_a_run: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Denied, an I/O error, a store that fails after its retries, reading the previous output at launch (root
    reads every file, so the error is injected): an OutputError naming the file (exit 2, nothing touched; the
    next run is right), in any mode. Not a traceback; and not a full run that would list changes against no
    index (every chunk added, none removed: a vector store would keep the removed ones)."""
    previous = edited_after_a_run[1]
    fingerprint = read_manifest(previous)["fingerprint"]  # the same settings: an incremental run reads the rejects
    real_open = LocalFileSystem._open

    def fail(self: LocalFileSystem, path: str, *args: Any, **kwargs: Any) -> Any:
        if victim in path:
            raise error
        return real_open(self, path, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "_open", fail)
    for incremental in (True, False):
        with pytest.raises(OutputError, match=rf"cannot read the previous output's \S+: {type(error).__name__}: "):
            read_previous(str(previous), fingerprint, incremental=incremental)
        if victim == "_rejects/":
            break  # read for an incremental run only


@pytest.mark.parametrize("error", [PermissionError(13, "Permission denied"), OSError(5, "Input/output error")])
def test_an_index_file_the_workers_cannot_read_fails_the_run_in_one_line_touching_nothing(
    error: OSError,
    edited_after_a_run: tuple[Path, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The index is read by the workers, by partition: a denied read, or an I/O error past the retries, is the
    storage's fault, not the index's. The run fails (exit 1) with one line naming the file, and OUTPUT keeps
    its previous output: a full run against no index would list no removed chunk."""
    corpus, previous, _ = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    before = {str(p.relative_to(output)): p.read_bytes() for p in output.rglob("*") if p.is_file()}
    real_open = LocalFileSystem._open

    def fail(self: LocalFileSystem, path: str, *args: Any, **kwargs: Any) -> Any:
        if "/_index/" in path:
            raise error
        return real_open(self, path, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "_open", fail)
    monkeypatch.setattr(pipelines.incremental.previous, "_READ_RETRY_SECONDS", (0.0, 0.0))
    capsys.readouterr()
    assert main(_argv(corpus, output, "--incremental")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert re.match(r"zerda: error: cannot read the previous output's _index/part-\d{5}-of-01024\.pq", err[-1])
    assert type(error).__name__ in err[-1] and "Traceback" not in "\n".join(err)
    after = {str(p.relative_to(output)): p.read_bytes() for p in output.rglob("*") if p.is_file()}
    assert after == before


def test_a_previous_manifest_of_a_newer_format_exits_2_naming_both_and_touches_nothing(
    edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An output a newer zerda wrote: its index and file list may mean otherwise, so neither an incremental run
    (which would carry rows on a guess) nor a full one (whose changes are listed against its index) reads it."""
    corpus, previous, _ = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    manifest = read_manifest(output)
    (output / "_manifest.json").write_text(json.dumps({**manifest, "format": 3}), encoding="utf-8")
    before = _snapshot(output)
    said = "written by a newer zerda (format 3; this zerda reads 2)"
    for extra in (["--incremental"], []):
        assert main(_argv(corpus, output, *extra)) == 2
        err = capsys.readouterr().err
        assert err.startswith("zerda: error: ") and said in err and err.count("\n") == 1, err
        assert _snapshot(output) == before
        with pytest.raises(NewerManifestError, match=re.escape(said)):
            read_previous(str(output), manifest["fingerprint"], incremental=bool(extra))


@pytest.mark.parametrize(
    "manifest",
    ["[]", '{"output": {"files": [{"rows": 3}]}}', '{"output": null}', "7", "{}", '{"format": "2"}', None],
)
def test_a_previous_manifest_missing_or_of_another_shape_is_no_previous_output(
    manifest: str | None, tmp_path: Path
) -> None:
    (tmp_path / "_SUCCESS").write_bytes(b"")
    if manifest is not None:
        (tmp_path / "_manifest.json").write_text(manifest, encoding="utf-8")
    previous = read_previous(str(tmp_path), "fingerprint", incremental=True)
    assert (previous.carry, previous.index_partitions, previous.chunk_files) == (False, 0, ())
    what = "unreadable (" if manifest is not None else "missing (FileNotFoundError)"
    assert previous.reason.startswith(f"full run: the previous _manifest.json is {what}")


def test_a_settings_change_runs_in_full_and_says_why(tmp_path: Path) -> None:
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    _corpus_v1(corpus)
    run(_argv(corpus, output))
    config = tmp_path / "small.yaml"
    config.write_text("chunking:\n  max_size: 300\n  overlap: 32\noutput:\n  incremental: true\n", encoding="utf-8")
    manifest = run(_argv(corpus, output, "--config", str(config)))
    run(_argv(corpus, fresh, "--config", str(config)))
    assert _rows(output) == _rows(fresh)
    assert manifest["changes"]["incremental"] is False
    assert "settings changed" in manifest["changes"]["reason"]
    # compared with the previous output all the same: a document whose chunks came out alike is unchanged
    changed = manifest["changes"]["documents_changed"]
    assert changed > 0 and changed + manifest["changes"]["documents_unchanged"] == 12
    assert manifest["changes"]["chunks_removed"] > 0
    again = run(_argv(corpus, output, "--config", str(config)))  # same settings now: incremental (from the YAML)
    assert again["changes"]["incremental"] is True and again["changes"]["documents_unchanged"] == 12
    assert again["changes"]["chunks_added"] == again["changes"]["chunks_removed"] == 0
    assert _table(output, "_changes") == []  # an empty file: the changes query still works
    assert _to_embed(output) == set()
    assert _rows(output) == _rows(fresh)


def test_a_failed_incremental_run_leaves_the_previous_output_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    _corpus_v1(corpus)
    run(_argv(corpus, output))
    committed = {k: v for k, v in _snapshot(output).items() if k != "_SUCCESS"}
    _corpus_v2(corpus)
    zerda_fault.arm(monkeypatch, "d9", tmp_path / "fault.marker")  # d9 is new: the chunker meets it
    with pytest.raises(RuntimeError, match="injected worker failure"):
        run(_argv(corpus, output, "--incremental"))
    after = _snapshot(output)
    assert {k: v for k, v in after.items() if k in committed} == committed, "a committed file changed"
    assert not any(k.startswith(("density_bucket=", "_index", "_changes")) for k in set(after) - set(committed))
    manifest = run(_argv(corpus, output, "--incremental"))  # the marker exists now: the fault does not fire
    run(_argv(corpus, fresh))
    assert _rows(output) == _rows(fresh)
    assert _rejects(output) == _rejects(fresh)
    assert manifest["counts"]["records_read"] == manifest["counts"]["documents_chunked"] + sum(
        manifest["counts"]["rejects"].values()
    )


def test_incremental_on_s3(s3_env: S3Env, tmp_path: Path) -> None:
    bucket = s3_env.new_bucket()
    fs = s3_env.filesystem()
    local = tmp_path / "corpus"
    _corpus_v1(local)
    fs.put(f"{local}/", f"s3://{bucket}/corpus/", recursive=True)
    output, fresh = f"s3://{bucket}/out", f"s3://{bucket}/fresh"
    run(_argv(f"s3://{bucket}/corpus", output))
    _corpus_v2(local)
    fs.rm(f"s3://{bucket}/corpus", recursive=True)
    fs.put(f"{local}/", f"s3://{bucket}/corpus/", recursive=True)
    manifest = run(_argv(f"s3://{bucket}/corpus", output, "--incremental"))
    run(_argv(f"s3://{bucket}/corpus", fresh))
    s3 = s3_env.filesystem()
    assert manifest["changes"]["incremental"] is True and manifest["changes"]["documents_unchanged"] == 8
    assert manifest["changes"]["files_unchanged"] == 1  # keep.md, uploaded again with the same bytes: its ETag
    assert _rows(f"{bucket}/out", s3) == _rows(f"{bucket}/fresh", s3)


def test_a_file_whose_document_failed_in_the_chunker_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``chunker_error`` may be the worker's (a MemoryError on a big document), not the file's: a full run
    chunks the document once the worker has the memory, so an incremental run must not carry the reject."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    _corpus_v1(corpus)
    _age(*corpus.iterdir())
    real = AdaptiveChunker.chunk

    def short_of_memory(self: AdaptiveChunker, text: str, doc_id: str = "", source: str = "") -> Any:
        if doc_id == "b1":
            raise MemoryError
        return real(self, text, doc_id, source)

    with monkeypatch.context() as patched:
        patched.setattr(AdaptiveChunker, "chunk", short_of_memory)
        first = run(_argv(corpus, output))
    assert first["counts"]["rejects"].get("chunker_error") == 1
    opened = _spy_reads(monkeypatch)
    manifest = run(_argv(corpus, output, "--incremental"))
    assert "b.jsonl" in opened
    full = run(_argv(corpus, fresh))
    assert _rows(output) == _rows(fresh)
    assert _rejects(output) == _rejects(fresh)
    assert manifest["counts"] == full["counts"]


def test_a_previous_input_count_edited_by_hand_gives_the_counts_of_a_full_run(
    settled_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """An unchanged file's ``records`` comes from the rows carried, not from the previous manifest's number:
    an edited count (1 -> 2) committed a manifest whose records read were not chunked + rejects."""
    corpus, fresh = settled_run  # the full run of the unchanged corpus
    output = tmp_path / "out"
    shutil.copytree(fresh, output)  # the previous run's output
    manifest = read_manifest(output)
    for entry in manifest["inputs"]:
        entry["records"] += 1
    write_manifest(output, manifest)
    run(_argv(corpus, output, "--incremental"))
    result, full = read_manifest(output), read_manifest(fresh)
    assert result["counts"] == full["counts"]
    assert [{**e, "stamp": ""} for e in result["inputs"]] == [{**e, "stamp": ""} for e in full["inputs"]]
    assert _rows(output) == _rows(fresh)


def test_two_files_redacted_to_one_source_are_read(tmp_path: Path) -> None:
    """Rows are carried by source; two paths redaction makes one (``Signature=...``) cannot be told apart,
    so neither is skipped: skipping the unchanged one skipped the edited one too, and kept its old rows."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    corpus.mkdir()
    _write_jsonl(corpus / "Signature=v1.jsonl", [("a", _doc(1))])
    _write_jsonl(corpus / "Signature=v2.jsonl", [("b", _doc(2))])
    _age(*corpus.iterdir())
    run(_argv(corpus, output))
    _write_jsonl(corpus / "Signature=v2.jsonl", [("b", _doc(3))])
    _age(corpus / "Signature=v2.jsonl")
    manifest = run(_argv(corpus, output, "--incremental"))
    full = run(_argv(corpus, fresh))
    assert manifest["changes"]["files_unchanged"] == 0
    assert _rows(output) == _rows(fresh)
    assert manifest["counts"] == full["counts"]


def _spy_outputs(monkeypatch: pytest.MonkeyPatch, cls: type, method: str = "process") -> list[Any]:
    """What ``cls.<method>`` receives and gives from now on (in-memory runner: this process), as (element,
    outputs) pairs."""
    seen: list[Any] = []
    real = getattr(cls, method)

    def spy(self: Any, element: Any) -> Any:
        outputs = list(real(self, element) or ())
        seen.append((element, outputs))
        return outputs

    monkeypatch.setattr(cls, method, spy)
    return seen


def test_a_many_document_unchanged_file_gives_its_counts_in_one_element(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unread file's documents reach the manifest as one sum from its index slice, not one summary a
    document (nor do the unchanged documents of a file read), and the counts are a full run's (documents,
    chunks and characters by bucket)."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    corpus.mkdir()
    many = [(f"m{n}", _doc(n, "prose" if n % 3 else "code")) for n in range(400)]
    _write_jsonl(corpus / "many.jsonl", many)
    _write_jsonl(corpus / "small.jsonl", [("s1", _doc(1)), ("s2", _doc(2))])
    _age(*corpus.iterdir())
    run(_argv(corpus, output))
    _write_jsonl(corpus / "small.jsonl", [("s1", _doc(1)), ("s3", _doc(3))])
    carried = _spy_outputs(monkeypatch, pipelines.incremental.carry._CarryFiles)
    classified = _spy_outputs(monkeypatch, pipelines.incremental.classify._Classify)
    manifest = run(_argv(corpus, output, "--incremental"))
    assert sum(len(outputs) for _, outputs in carried) == 2  # its report and its totals
    kept = [out for _, outputs in classified for out in outputs if getattr(out, "tag", None) != "hash"]
    assert [record.doc_id for record in kept] == ["s3"]  # s1 kept: a hash for the comparison, no summary of its own
    full = run(_argv(corpus, fresh))
    assert manifest["changes"]["files_unchanged"] == 1
    assert manifest["counts"] == full["counts"]
    assert len(manifest["counts"]["chunks_by_bucket"]) > 1
    assert _rows(output) == _rows(fresh)


def test_duplicate_ids_are_counted_from_the_previous_counts_and_what_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id counts once however many documents hold it, in an unread file or not: copies within the unread
    file, a copy added in a file read against one in the unread file, and one removed. Only the ids of the
    files read are sent to be counted."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    corpus.mkdir()
    kept = [("twice", _doc(1)), ("twice", _doc(2)), ("shared", _doc(3)), ("left", _doc(4))]
    kept += [(f"k{n}", _doc(n)) for n in range(30)]
    _write_jsonl(corpus / "kept.jsonl", kept)
    _write_jsonl(corpus / "read.jsonl", [("shared", _doc(5)), ("r1", _doc(6))])
    _age(*corpus.iterdir())
    first = run(_argv(corpus, output))
    assert first["counts"]["duplicate_doc_id_examples"] == ["shared", "twice"]
    _write_jsonl(corpus / "read.jsonl", [("left", _doc(7)), ("r1", _doc(6)), ("r2", _doc(8)), ("r2", _doc(9))])
    changes = _spy_outputs(monkeypatch, pipelines.incremental.compare._CountIds)
    manifest = run(_argv(corpus, output, "--incremental"))
    sent = {doc_id for (_, grouped), _ in changes for change in grouped["change"] for doc_id in change}
    full = run(_argv(corpus, fresh))
    assert manifest["changes"]["files_unchanged"] == 1
    assert manifest["counts"] == full["counts"]
    assert manifest["counts"]["duplicate_doc_id_examples"] == ["left", "r2", "twice"]
    assert sent == {"shared", "left", "r2"}  # r1 is in read.jsonl before and after: no change to send
    assert sorted(pq.read_table(output / "_ids").to_pylist(), key=str) == sorted(
        pq.read_table(fresh / "_ids").to_pylist(), key=str
    )


def test_a_previous_output_without_id_counts_counts_every_id(tmp_path: Path) -> None:
    """An output of a zerda from before ``_ids/``: its ids are all counted again, and the counts are a full
    run's; the run writes the id counts the next one starts from."""
    corpus, output, fresh = tmp_path / "corpus", tmp_path / "out", tmp_path / "fresh"
    _corpus_v1(corpus)
    _age(*corpus.iterdir())
    run(_argv(corpus, output))
    manifest = read_manifest(output)
    manifest["output"]["files"] = [e for e in manifest["output"]["files"] if not e["path"].startswith("_ids/")]
    write_manifest(output, manifest)
    shutil.rmtree(output / "_ids")
    _corpus_v2(corpus)
    second = run(_argv(corpus, output, "--incremental"))
    full = run(_argv(corpus, fresh))
    assert second["changes"]["incremental"] is True and second["changes"]["files_unchanged"] == 1
    assert second["counts"] == full["counts"] and second["counts"]["duplicate_doc_ids"] == 1
    assert pq.read_table(output / "_ids").sort_by("doc_id") == pq.read_table(fresh / "_ids").sort_by("doc_id")


def test_previous_id_counts_damaged_in_place_give_a_full_run_that_says_why(
    edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """An ``_ids`` file's footer overwritten, its size the same: the count of its partition fails on it, and
    the launcher runs again in full (as for a damaged index file), with a full run's counts."""
    corpus, previous, fresh = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    victim = _damaged_footer(output, "_ids/")
    result = run(_argv(corpus, output, "--incremental"))
    assert result["changes"]["reason"].startswith(f"full run: a previous index file cannot be read: {victim} (")
    assert result["counts"] == read_manifest(fresh)["counts"]
    assert _rows(output) == _rows(fresh)
    assert run(_argv(corpus, output, "--incremental"))["changes"]["incremental"] is True


def test_an_output_whose_manifest_is_of_format_1_is_reported_and_carried(
    settled_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An output of a zerda whose manifest held its lists in the JSON (format 1, no ``_manifest/``): zerda-report
    reads it, an incremental run carries its unchanged files from it and writes the lists as tables."""
    corpus, fresh = settled_run
    output = tmp_path / "out"
    shutil.copytree(fresh, output)
    manifest = read_manifest(output)
    manifest["output"]["files"] = [e for e in manifest["output"]["files"] if not e["path"].startswith("_manifest/")]
    shutil.rmtree(output / "_manifest")
    write_manifest(output, manifest, format=1)
    assert report_main([str(output)]) == 0 and "records read" in capsys.readouterr().out
    result = run(_argv(corpus, output, "--incremental"))
    assert result["changes"]["files_unchanged"] == len(manifest["inputs"]) == 4
    assert result["counts"] == manifest["counts"] and result["inputs"] == manifest["inputs"]
    written = json.loads((output / "_manifest.json").read_text(encoding="utf-8"))
    assert written["format"] == 2 and "inputs" not in written and "files" not in written["output"]
    assert report_main(["--verify", str(output)]) == 0


def _document_8_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, documents: int
) -> tuple[Path, Path, list[Any], dict[str, Any]]:
    """One JSONL file of ``documents`` documents run in full, its 8th document edited, then an incremental run
    whose partition comparisons are spied on: (corpus, output, what the comparisons were given, manifest)."""
    corpus, output = tmp_path / "corpus", tmp_path / "out"
    corpus.mkdir()
    docs = [(f"m{n}", _doc(n, "prose" if n % 3 else "code")) for n in range(documents)]
    _write_jsonl(corpus / "many.jsonl", docs)
    _age(*corpus.iterdir())
    run(_argv(corpus, output))
    docs[7] = ("m7", _doc(1000))
    _write_jsonl(corpus / "many.jsonl", docs)
    _age(*corpus.iterdir())
    compared = _spy_outputs(monkeypatch, pipelines.incremental.compare._ComparePartition)
    return corpus, output, compared, run(_argv(corpus, output, "--incremental"))


def test_the_unchanged_documents_of_a_file_read_reach_the_comparison_as_a_few_bytes_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed file is read whole, but its unchanged documents go to their partition's comparison as their
    record numbers, 8 bytes each (their key and hash are in the previous index the comparison reads): what the
    runner holds between the steps follows the change, not the size of the files read."""
    corpus, output, compared, manifest = _document_8_edited(tmp_path, monkeypatch, 300)
    fresh = tmp_path / "fresh"
    batches = [batch for (_, grouped), _ in compared for batch in grouped["hash"]]
    kept = [record for by_source, _ in batches for packed in by_source.values() for record in kept_records(packed)]
    chunked = [entry for _, entries in batches for entry in entries]
    assert sorted(kept) == [n for n in range(1, 301) if n != 8] and [record for _, (record, _) in chunked] == [8]
    assert len(pickle.dumps(batches)) < 8 * 300 + 600
    assert (manifest["changes"]["documents_changed"], manifest["changes"]["documents_unchanged"]) == (1, 299)
    full = run(_argv(corpus, fresh))
    assert manifest["counts"] == full["counts"]
    assert _rows(output) == _rows(fresh)


def test_a_chunked_documents_index_row_reaches_the_comparison_as_the_path_of_a_staged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunk writer stages the new index rows in files of their partition, in the run's staging, and the
    comparison is sent only the files' paths: the runner holds the elements of that shuffle (the DirectRunner in
    memory), so they are neither the rows nor their chunk ids, in a full run (every document chunked) as in an
    incremental one. The index written is a full run's, and the staged rows go with the staging."""
    corpus, output, compared, manifest = _document_8_edited(tmp_path, monkeypatch, 40)
    incremental = len(compared)
    fresh = tmp_path / "fresh"
    run(_argv(corpus, fresh))
    staged = re.compile(r"_staging/[0-9TZa-f-]+/index_rows/\d{5}/part-[0-9a-f]{32}\.pq")
    for spied, out in ((compared[:incremental], output), (compared[incremental:], fresh)):
        sent = [list(grouped["rows"]) for (_, grouped), _ in spied]
        paths = [path for paths in sent for path in paths]
        assert paths and all(staged.fullmatch(path) for path in paths), paths
        data = pickle.dumps(sent)
        chunk_ids = [chunk_id for row in _table(out, "_index") for chunk_id in row["chunk_ids"]]
        assert len(chunk_ids) >= 40 and not any(chunk_id.encode() in data for chunk_id in chunk_ids)
        assert not (out / "_staging").exists()
    assert manifest["changes"]["documents_changed"] == 1
    assert _index(output) == _index(fresh)


def test_the_documents_leaving_a_chunk_file_reach_its_carry_as_the_path_of_a_staged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison stages the previous documents that leave their chunk file (here the edited one) in a file of
    the run's staging, and the carry of a chunk file is sent that file's path, never the documents' keys: they
    grow with the change, and the runner holds the shuffle between the two. The rows are a full run's."""
    carried = _spy_outputs(monkeypatch, pipelines.incremental.carry._CarryChunkFile)
    corpus, output, _, manifest = _document_8_edited(tmp_path, monkeypatch, 40)
    sent = [(path, list(grouped["leaving"])) for (path, grouped), _ in carried]
    naming = [staged for _, paths in sent for staged in paths]
    assert len(naming) == 1 and re.fullmatch(r"_staging/[0-9TZa-f-]+/leaving/\d{5}/part-[0-9a-f]{32}\.pq", naming[0])
    assert b"m7" not in pickle.dumps(sent)  # the edited document's id
    assert manifest["changes"]["documents_changed"] == 1 and not (output / "_staging").exists()
    fresh = tmp_path / "fresh"
    run(_argv(corpus, fresh))
    assert _rows(output) == _rows(fresh)


def test_staged_index_rows_come_back_whole_however_many_partitions_a_bundle_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle writes few staged files at once (an object store buffers a block for each) and holds few rows:
    a partition whose file was closed for another's goes on in a new file. Every row staged is read back once,
    in its partition, with the values every row of the run shares added."""
    monkeypatch.setattr(pipelines.incremental.rows, "_OPEN_FILES", 2)
    monkeypatch.setattr(pipelines.incremental.rows, "_BUFFERED_ROWS", 3)
    stage = pipelines.incremental.rows.StageIndexRows(str(tmp_path), "run1", "zstd")
    stage.setup()
    stage.start_bundle()
    chunk_file = "density_bucket=0/part-a.parquet"
    rows = [(n % 3, (f"s{n % 3}", n, f"d{n}", 1, 0, 9, 9, 0, [f"{n:032x}"], chunk_file)) for n in range(12)]
    files = [out for element in rows for out in stage.process(element)]
    files += [out.value for out in stage.finish_bundle()]
    assert len(files) > 3 and len(set(files)) == len(files)
    columns = pipelines.incremental.rows._STAGED_COLUMNS
    for partition in range(3):
        read = pipelines.incremental.rows.read_rows(str(tmp_path), [p for n, p in files if n == partition], "fp")
        back = sorted(read, key=lambda row: row["record"])
        assert [tuple(row[name] for name in columns) for row in back] == [v for n, v in rows if n == partition]
        assert {(row["config_fingerprint"], row["zerda_version"]) for row in back} == {("fp", zerda_core.__version__)}


def test_an_index_is_planned_from_its_documents_or_its_bytes_whichever_asks_more() -> None:
    """A comparing task holds one partition's chunk ids: large documents (many chunks each) count by their
    bytes, not their number. Powers of two, so that partitions of two runs map onto each other."""
    assert index_partitions(0) == 1
    assert (index_partitions(50_000), index_partitions(50_001)) == (1, 2)
    assert index_partitions(3_000, 100 * 2**20) == 4  # 100 MB of 30 kB documents: 4 tasks, not 1
    assert index_partitions(10**6, 2**20) == 32
    assert index_partitions(10**12) == index_partitions(10, 10**15) == MAX_INDEX_PARTITIONS
    # a first run lists no input at launch: it plans for 10^8 documents; later runs, from the manifest's counts
    assert planned_partitions(Previous()) == 1024
    assert planned_partitions(Previous(documents=10, input_bytes=2**20)) == 1


def test_a_previous_inputs_table_damaged_in_place_gives_a_full_run_that_says_why(
    edited_after_a_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The previous inputs table (a row a file read) is read by the workers, part by part, where the files they
    match are judged, not at launch: a part with a page flipped, its size the same, fails that step, and the
    launcher runs again in full, saying why, with a full run's counts and rows; the next run is incremental."""
    corpus, previous, fresh = edited_after_a_run
    output = tmp_path / "out"
    shutil.copytree(previous, output)
    (part,) = (output / "_manifest" / "inputs").glob("*.pq")
    part.write_bytes(_flipped(part.read_bytes(), "source"))
    result = run(_argv(corpus, output, "--incremental"))
    victim = part.relative_to(output).as_posix()
    assert result["changes"]["reason"].startswith(f"full run: a previous inputs table cannot be read: {victim} (")
    assert result["counts"] == read_manifest(fresh)["counts"]
    assert _rows(output) == _rows(fresh)
    assert run(_argv(corpus, output, "--incremental"))["changes"]["incremental"] is True
