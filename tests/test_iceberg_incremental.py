"""Incremental runs into an Iceberg table, on a real SQLite catalog: one snapshot deletes the rows of changed and
removed documents and adds the new ones; the data files of unchanged documents stay in it untouched; the run's
``_changes`` is the diff of the two snapshots; the rows equal a full run's. A table another program committed
to refuses an incremental run; a damaged index gives a full run that says why."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Table

from pipelines.cli.local_runner import FnApiDirectRunner
from pipelines.cli.rechunk import build_pipeline, main, run
from pipelines.errors import TableConflict
from pipelines.output import iceberg
from pipelines.output.iceberg import (
    RUN_ID_KEY,
    SIDE_SUFFIX,
    TABLE_CHUNK_SCHEMA,
    _check_base,
    committed_manifest,
    open_table,
)
from pipelines.output.iceberg_incremental import read_previous_table
from pipelines.output.layout import STAGING_DIR
from pipelines.output.ownership import STAGED_KEY
from pipelines.output.write import new_run_id
from pipelines.settings import load_settings
from tests.common import MULTI_PROCESS
from tests.test_iceberg import TABLE, as_directory_rows, load_table, sorted_rows, write_config
from tests.test_incremental import _corpus_v1, _corpus_v2, _doc, _flipped, _lowered_statistics, _write_jsonl

SMALL_FILES = "  max_rows_per_file: 8\n"  # many data files, each of few documents: most stay untouched


def _argv(corpus: Path, config: Path, *extra: str) -> list[str]:
    return ["--input", str(corpus), "--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet", *extra]


def _files(table: Table, snapshot_id: int) -> dict[str, pa.Table]:
    """Each data file of a snapshot (its path) with its rows."""
    paths = sorted(task.file.file_path for task in table.scan(snapshot_id=snapshot_id).plan_files())
    return {path: pq.read_table(path.removeprefix("file://")) for path in paths}


def _side(table: Table, snapshot_id: int) -> Path:
    """The side folder of the run that committed a snapshot."""
    snapshot = table.snapshot_by_id(snapshot_id)
    assert snapshot is not None and snapshot.summary is not None
    return Path(table.location().removeprefix("file://") + SIDE_SUFFIX) / snapshot.summary[RUN_ID_KEY]


def _changes(table: Table, snapshot_id: int) -> dict[str, set[str]]:
    rows = pq.read_table(_side(table, snapshot_id) / "_changes").to_pylist()
    return {kind: {r["chunk_id"] for r in rows if r["change"] == kind} for kind in ("added", "removed")}


def _chunk_ids(table: Table, snapshot_id: int) -> set[str]:
    return set(table.scan(snapshot_id=snapshot_id, selected_fields=("chunk_id",)).to_arrow()["chunk_id"].to_pylist())


_KEY = ("source", "record", "doc_id")  # a document: its id in its source, at its line or row


def _documents(rows: pa.Table) -> set[tuple[Any, ...]]:
    return set(zip(*(rows[c].to_pylist() for c in _KEY), strict=True))


@pytest.fixture
def edited(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, Any]]:
    """A corpus run into a table, then edited (``_corpus_v2``: an edit, a deletion, an addition, a rename, a
    reject that became valid and a document that became one): (corpus, warehouse, config, first manifest)."""
    corpus, warehouse = tmp_path / "corpus", tmp_path / "warehouse"
    _corpus_v1(corpus)
    for n in range(6):  # files no edit touches, one with a reject: not read again, their rows and rejects carried
        _write_jsonl(corpus / f"more-{n}.jsonl", [(f"m{n}-{k}", _doc(40 + n * 5 + k)) for k in range(5)])
    _write_jsonl(corpus / "more-0.jsonl", [("m0-short", "too short"), *[(f"m0-{k}", _doc(40 + k)) for k in range(5)]])
    settled = time.time() - 60  # modified a minute ago: the run's listing stamps them (docs/incremental.md)
    for path in corpus.iterdir():
        os.utime(path, (settled, settled))
    config = write_config(tmp_path / "a.yaml", warehouse, SMALL_FILES)
    first = run(_argv(corpus, config))
    _corpus_v2(corpus)
    return corpus, warehouse, config, first


def _full_run_rows(corpus: Path, tmp_path: Path, table: str = TABLE) -> list[dict[str, Any]]:
    """The rows of a full run of ``corpus`` into a table of its own (``table``: the chunks or the rejects)."""
    warehouse = tmp_path / "fresh"
    if not warehouse.exists():
        run(_argv(corpus, write_config(tmp_path / "fresh.yaml", warehouse, SMALL_FILES)))
    return _rows(warehouse, table)


def _rows(warehouse: Path, table: str = TABLE) -> list[dict[str, Any]]:
    return sorted_rows(
        as_directory_rows(load_table(warehouse, table).scan().to_arrow()), "chunk_id" if table == TABLE else "source"
    )


@pytest.mark.parametrize("workers", [[], MULTI_PROCESS], ids=["in memory", "2 processes"])
def test_an_incremental_run_is_one_snapshot_that_touches_only_the_files_of_changed_documents(
    workers: list[str], edited: tuple[Path, Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    corpus, warehouse, config, first = edited
    second = run(_argv(corpus, config, "--incremental", *workers))
    table = load_table(warehouse)
    one, two = first["output"]["snapshot_id"], second["output"]["snapshot_id"]
    assert [s.snapshot_id for s in table.snapshots()] == [one, two], "one snapshot"
    assert second["changes"]["incremental"] is True and second["changes"]["files_unchanged"] >= 6
    assert _rows(warehouse) == _full_run_rows(corpus, tmp_path)
    rejects = f"{TABLE}__rejects"
    assert _rows(warehouse, rejects) == _full_run_rows(corpus, tmp_path, rejects)
    assert any(r["doc_id"] == "m0-short" for r in _rows(warehouse, rejects)), "a reject of a file not read again"

    before, after = _files(table, one), _files(table, two)
    old, now = _by_document(before.values()), _by_document(after.values())
    changed = {doc for doc in old if now.get(doc) != old[doc]}  # edited or removed
    assert changed and len(changed) < len(old)
    touched = {path for path, rows in before.items() if _documents(rows) & changed}
    new = {path: rows for path, rows in after.items() if path not in before}
    assert set(before) - touched and touched, "some files hold changed documents, the others none"
    assert set(before) - touched <= set(after), "the files of unchanged documents stay in the new snapshot"
    assert not touched & set(after), "a file holding a changed document is written again without it"
    new_ids = {chunk_id for rows in new.values() for chunk_id in rows["chunk_id"].to_pylist()}
    for path in set(before) - touched:
        assert not set(before[path]["chunk_id"].to_pylist()) & new_ids, f"rows of {path} in a new file"
    assert new and all(f"/data/{_side(table, two).name}/" in path for path in new), "new files in this run's folder"
    assert second["changes"]["documents_changed"] >= 1 and second["changes"]["documents_removed"] >= 1


def _by_document(files: Any) -> dict[tuple[Any, ...], set[str]]:
    """Each document's chunk ids, over the rows of ``files``."""
    found: dict[tuple[Any, ...], set[str]] = {}
    for rows in files:
        for *key, chunk_id in zip(*(rows[c].to_pylist() for c in (*_KEY, "chunk_id")), strict=True):
            found.setdefault(tuple(key), set()).add(chunk_id)
    return found


def test_the_changes_of_an_incremental_run_are_the_diff_of_its_two_snapshots(
    edited: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    corpus, warehouse, config, first = edited
    second = run(_argv(corpus, config, "--incremental"))
    table = load_table(warehouse)
    one, two = first["output"]["snapshot_id"], second["output"]["snapshot_id"]
    before, after = _chunk_ids(table, one), _chunk_ids(table, two)
    changes = _changes(table, two)
    assert changes == {"added": after - before, "removed": before - after}
    assert changes["added"] and changes["removed"]
    assert (second["changes"]["chunks_added"], second["changes"]["chunks_removed"]) == (
        len(changes["added"]),
        len(changes["removed"]),
    )
    assert _changes(table, one) == {"added": before, "removed": set()}, "a first run adds every chunk"
    side = _side(table, two)
    for path in (side / "_changes").iterdir():  # written where they are: the commit copies no change file
        written_as = pq.read_metadata(path).metadata[STAGED_KEY].decode()
        assert written_as == str(path.relative_to(side.parent))
    unchanged = run(_argv(corpus, config, "--incremental"))
    three = unchanged["output"]["snapshot_id"]
    assert _changes(load_table(warehouse), three) == {"added": set(), "removed": set()}
    assert _files(load_table(warehouse), three).keys() == _files(table, two).keys(), "nothing changed: no file"


def test_a_snapshot_another_program_committed_refuses_an_incremental_run_with_exit_2(
    edited: tuple[Path, Path, Path, dict[str, Any]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Rows appended by another writer are in no zerda index: carrying would give a table that is neither a full
    run nor theirs, and a full run would drop them unasked. An incremental run exits 2 saying so; a full run
    (asked for) replaces them."""
    corpus, warehouse, config, _ = edited
    table = load_table(warehouse)
    foreign = table.scan(limit=1).to_arrow().cast(TABLE_CHUNK_SCHEMA)
    table.append(foreign)
    appended = load_table(warehouse).current_snapshot()
    assert appended is not None
    assert main(_argv(corpus, config, "--incremental")) == 2
    err = capsys.readouterr().err
    assert f"its current snapshot {appended.snapshot_id} (append) is not a zerda run's" in err, err
    assert "Run once without --incremental" in err and len(err.strip().splitlines()) == 1
    assert load_table(warehouse).current_snapshot().snapshot_id == appended.snapshot_id  # type: ignore[union-attr]
    full = run(_argv(corpus, config))
    assert _rows(warehouse) == _full_run_rows(corpus, tmp_path)
    assert full["changes"]["reason"].startswith("the current snapshot is not a zerda run's")
    assert run(_argv(corpus, config, "--incremental"))["changes"]["incremental"] is True


def test_a_commit_refuses_a_table_that_changed_since_the_launch(
    edited: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    """The files an incremental run keeps and the changes it lists were decided against the snapshot it read at
    launch: another snapshot current at commit is a conflict (exit code 2), never a mix."""
    _, warehouse, _, first = edited
    table = load_table(warehouse)
    _check_base(table, first["output"]["snapshot_id"])
    with pytest.raises(TableConflict, match=r"changed while this run wrote .* not \d+ as at launch"):
        _check_base(table, 42)


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("flipped", "a previous index file cannot be read"),
        ("statistics", "a previous index file cannot be read"),
        ("deleted", "the previous output is incomplete"),
        ("manifest edited", "the _manifest.json of corpus.chunks's snapshot"),
        ("side folder gone", "the side folder of corpus.chunks's snapshot"),
        ("data file gone", "the previous output is incomplete (1 file(s)"),
    ],
)
def test_a_damaged_index_gives_a_full_run_that_says_why(
    how: str, why: str, edited: tuple[Path, Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """An index file with a byte changed (its size the same: its pages' CRC or its footer's digest tell) or
    gone, the run's side manifest edited, its side folder deleted, a data file of the snapshot deleted by hand:
    the run is a full one that says why, its rows a full run's; the next run is incremental again."""
    corpus, warehouse, config, first = edited
    side = _side(load_table(warehouse), first["output"]["snapshot_id"])
    victim = sorted((side / "_index").iterdir())[0]  # a first run writes a file per partition holding documents
    if how == "flipped":
        victim.write_bytes(_flipped(victim.read_bytes()))
    elif how == "statistics":
        victim.write_bytes(_lowered_statistics(victim.read_bytes()))
    elif how == "deleted":
        victim.unlink()
    elif how == "data file gone":
        data = load_table(warehouse).scan().plan_files()
        Path(next(iter(data)).file.file_path.removeprefix("file://")).unlink()
    elif how == "manifest edited":
        (side / "_manifest.json").write_text('{"format": 1, "fingerp', encoding="utf-8")
    else:
        shutil.rmtree(side)
    second = run(_argv(corpus, config, "--incremental"))
    assert _rows(warehouse) == _full_run_rows(corpus, tmp_path)
    assert second["changes"]["incremental"] is False
    assert second["changes"]["reason"].startswith(f"full run: {why}"), second["changes"]["reason"]
    assert run(_argv(corpus, config, "--incremental"))["changes"]["incremental"] is True


def test_the_runs_listings_outlive_its_commit_and_go_once_the_job_is_over(
    edited: tuple[Path, Path, Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner that retries the commit, or restarts the steps before it (Flink), reads the run's listings
    again: publishing the side files must not delete the staging they are in; the launcher deletes it once the
    job is over, and the committed run leaves none."""
    corpus, warehouse, config, _ = edited
    side = Path(load_table(warehouse).location().removeprefix("file://") + SIDE_SUFFIX)
    listings: list[list[Path]] = []
    publish = iceberg.publish_side_files

    def spy(target: Any, run_id: str, staged: Any, manifest: Any) -> None:
        publish(target, run_id, staged, manifest)
        listings.append(sorted((side / STAGING_DIR / run_id / "listing").rglob("*.jsonl")))

    monkeypatch.setattr(iceberg, "publish_side_files", spy)
    manifest = run(_argv(corpus, config, "--incremental"))
    assert manifest["changes"]["incremental"] is True
    (after_publish,) = listings
    assert any(path.parent.name == "previous" for path in after_publish), after_publish
    assert not (side / STAGING_DIR).exists()


def _written_as_named(table: Table, run_id: str) -> dict[Path, tuple[int, int]]:
    """The data files in ``run_id``'s folder that the table's current snapshot names, with their sizes and the
    times they were last written."""
    folder = Path(table.location().removeprefix("file://")) / "data" / run_id
    paths = (Path(task.file.file_path.removeprefix("file://")) for task in table.scan().plan_files())
    return {path: (path.stat().st_size, path.stat().st_mtime_ns) for path in paths if folder in path.parents}


def test_the_steps_run_again_after_the_commit_leave_the_committed_run_as_it_was(
    edited: tuple[Path, Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """A runner may run a job's steps again once its commit is done: Flink restarts every task of a failed task's
    region, and the commit shares one with the step reading the run's listing of the previous snapshot's data
    files. Here the whole incremental job runs twice under one run id, both graphs built (their listings
    written) before the first runs: the second reads the listings, commits nothing more and deletes the files
    it wrote again; the table and its side folder are the first's, and the next run is incremental. A data file
    the first wrote again without the changed documents' rows (under its name in the run's folder) is named by
    the committed snapshot: the second does not write it again (a reader in that moment would read a partial
    file), it describes the file as it is."""
    corpus, warehouse, config, _ = edited
    settings = load_settings(str(config))
    target = open_table(TABLE, settings.output.catalog)
    previous, snapshot_id = read_previous_table(target, settings.fingerprint, incremental=True)
    target = replace(target, snapshot_id=snapshot_id)
    run_id, started = new_run_id(), datetime.now(timezone.utc)
    jobs = [beam.Pipeline(runner=FnApiDirectRunner()) for _ in range(2)]
    for job in jobs:
        build_pipeline(job, [str(corpus)], settings, target, started, run_id=run_id, previous=previous)
    jobs[0].run().wait_until_finish()
    named = _written_as_named(load_table(warehouse), run_id)
    previous_names = {path.split("/")[-1] for path, _, _ in previous.chunk_files}
    assert any(path.name in previous_names for path in named), "a file of the previous snapshot written again"
    jobs[1].run().wait_until_finish()
    assert _written_as_named(load_table(warehouse), run_id) == named, "no file the snapshot names written again"

    table = load_table(warehouse)
    ours = [s.snapshot_id for s in table.snapshots() if s.summary and s.summary[RUN_ID_KEY] == run_id]
    assert ours == [s.snapshot_id for s in table.snapshots()][-1:], "one snapshot of the run, the current one"
    assert _rows(warehouse) == _full_run_rows(corpus, tmp_path)
    manifest = committed_manifest(target, run_id)
    assert manifest["changes"]["incremental"] is True
    changes = pq.read_table(_side(table, ours[0]) / "_changes")
    assert changes.num_rows == manifest["changes"]["chunks_added"] + manifest["changes"]["chunks_removed"] > 0
    for name in (TABLE, f"{TABLE}__rejects"):
        named = {task.file.file_path for task in load_table(warehouse, name).scan().plan_files()}
        location = load_table(warehouse, name).location().removeprefix("file://")
        written = {f"file://{p}" for p in (Path(location) / "data" / run_id).rglob("*") if p.is_file()}
        assert written and written <= named, f"{name}: the files written again under new names are deleted"

    staged = {o.url for o in iceberg.orphan_files(target, older_than_hours=0)}
    assert all(f"/{STAGING_DIR}/{run_id}/" in url for url in staged), "only the staging: the launcher's to delete"
    assert any(f"/{STAGING_DIR}/{run_id}/listing/previous/" in url for url in staged), staged
    iceberg.remove_staging(target, run_id)
    again = run(_argv(corpus, config, "--incremental"))
    assert again["changes"]["incremental"] is True, again["changes"]["reason"]
    assert again["changes"]["documents_changed"] == 0 and _rows(warehouse) == _full_run_rows(corpus, tmp_path)


def test_a_data_file_written_again_is_kept_when_whole_and_written_over_when_partial(
    edited: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    """A rewritten data file's step run again finds the file: whole (the same rows, perhaps named by the run's
    snapshot), it is described as it is and not written again; the start of one (an attempt that failed while
    writing, which no snapshot names), it is written whole."""
    _, warehouse, _, _ = edited
    target = open_table(TABLE, {"warehouse": str(warehouse)})
    rows = load_table(warehouse).scan(limit=3).to_arrow().select(TABLE_CHUNK_SCHEMA.names).cast(TABLE_CHUNK_SCHEMA)
    run_id = new_run_id()
    path = f"data/{run_id}/density_bucket=0/part-0.parquet"
    first = iceberg.write_data_file(target.chunk_files, run_id, path, rows, "zstd")
    full = Path(target.chunks_location.removeprefix("file://")) / path
    written = full.stat().st_mtime_ns
    again = iceberg.write_data_file(target.chunk_files, run_id, path, rows, "zstd")
    assert full.stat().st_mtime_ns == written, "a whole file is not written again"
    assert again.data_file == first.data_file and again.bytes == first.bytes == full.stat().st_size
    full.write_bytes(full.read_bytes()[: first.bytes // 2])
    whole = iceberg.write_data_file(target.chunk_files, run_id, path, rows, "zstd")
    assert whole.bytes == first.bytes == full.stat().st_size and pq.read_table(full).num_rows == 3
    assert whole.data_file == first.data_file
