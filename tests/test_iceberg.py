"""The Iceberg output (``--output iceberg://NAMESPACE.TABLE``) on a real SQLite catalog: the rows of a run into
a table are those of the same run into a Parquet directory, read back by pyiceberg and by DuckDB's iceberg
extension; a second run is a second snapshot and the first stays readable by id and by time; a run that fails
leaves the table at its previous snapshot and deletes its data files; bad table settings exit 2 before anything
is written."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

import pipelines.output.write as write_module
from pipelines.cli.rechunk import main, run
from pipelines.errors import CommitError, JobError
from pipelines.output.iceberg import (
    MANIFEST_KEY,
    REJECTS_SNAPSHOT_KEY,
    RUN_ID_KEY,
    SIDE_SUFFIX,
    _replace_data,
    open_table,
    orphan_files,
    undo_snapshot,
)
from pipelines.report import load_report
from pipelines.report import main as report_main
from pipelines.report.table import load_table_report
from tests.common import MULTI_PROCESS, REPO
from tests.fault_injection import zerda_fault
from tests.output_checks import read_chunks, read_manifest

if TYPE_CHECKING:
    from tests.postgres_server import PostgresServer

pytest_plugins = ["tests.postgres_server"]  # the postgres_server fixture

TABLE = "corpus.chunks"
BIN = Path(sys.executable).parent


def write_config(path: Path, warehouse: Path, extra: str = "") -> Path:
    path.write_text(f"output:\n  catalog:\n    warehouse: {warehouse}\n{extra}", encoding="utf-8")
    return path


def load_table(warehouse: Path, name: str = TABLE) -> Table:
    catalog = load_catalog(
        "zerda", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    return catalog.load_table(name)


def sorted_rows(table: pa.Table, key: str = "chunk_id") -> list[dict[str, Any]]:
    return table.sort_by(
        [(name, "ascending") for name in [key, "source", "record"] if name in table.schema.names]
    ).to_pylist()


def as_directory_rows(table: pa.Table) -> pa.Table:
    """A table's rows with the types a Hive directory read gives (pyiceberg reads strings as large_string).

    pyiceberg's scan reads a null ``list<struct>`` as an empty list (apache/iceberg-python#3833, open): the
    null ``keywords`` of a run without enrichment come back as ``[]``. The files hold nulls (DuckDB and pyarrow
    read them so: see the DuckDB test), so an empty ``keywords`` list is read here as the null it is."""
    table = table.cast(pa.schema([pa.field(f.name, _small(f.type), f.nullable) for f in table.schema]))
    if "keywords" in table.schema.names:
        keywords = table["keywords"]
        empty = pc.equal(pc.list_value_length(keywords), 0)
        nulls = pa.nulls(len(table), keywords.type)
        table = table.set_column(
            table.schema.get_field_index("keywords"), "keywords", pc.if_else(empty, nulls, keywords)
        )
    return table


def _small(type_: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(type_):
        return pa.string()
    if pa.types.is_large_list(type_) or pa.types.is_list(type_):
        return pa.list_(_small(type_.value_type))
    if pa.types.is_struct(type_):
        return pa.struct([pa.field(f.name, _small(f.type), f.nullable) for f in type_])
    return type_


@pytest.fixture(scope="module")
def two_outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The sample corpus run into a Parquet directory and into a table: (directory, warehouse, table manifest)."""
    root = tmp_path_factory.mktemp("iceberg")
    directory, warehouse = root / "dir", root / "warehouse"
    run(["--output", str(directory), "--quiet"])
    config = write_config(root / "table.yaml", warehouse)
    manifest = run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    return directory, warehouse, manifest


def test_a_table_holds_the_rows_of_the_same_run_into_a_directory(two_outputs: tuple[Path, Path, dict]) -> None:
    directory, warehouse, manifest = two_outputs
    table = load_table(warehouse)
    rows = as_directory_rows(table.scan().to_arrow())
    expected = read_chunks(directory)
    expected = expected.select(rows.schema.names).cast(rows.schema)  # the hive partition column reads as int32
    assert rows.num_rows == expected.num_rows == manifest["counts"]["chunks"] > 0
    assert sorted_rows(rows) == sorted_rows(expected)
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("density_bucket", "identity")]
    rejects = as_directory_rows(load_table(warehouse, f"{TABLE}__rejects").scan().to_arrow())
    expected_rejects = pa.concat_tables(
        pa.parquet.read_table(path) for path in sorted((directory / "_rejects").glob("*.pq"))
    ).cast(rejects.schema)
    assert sorted_rows(rejects, "source") == sorted_rows(expected_rejects, "source")
    assert rejects.num_rows == manifest["counts"]["reject_rows"] > 0


def test_the_data_files_are_where_the_workers_wrote_them_and_one_snapshot_names_them(
    two_outputs: tuple[Path, Path, dict],
) -> None:
    _, warehouse, manifest = two_outputs
    table = load_table(warehouse)
    (snapshot,) = table.snapshots()
    files = [task.file for task in table.scan().plan_files()]
    location = table.location().removeprefix("file://")
    on_disk = {str(p) for p in Path(location, "data").rglob("*.parquet")}
    assert {f.file_path.removeprefix("file://") for f in files} == on_disk, "no file copied, none left over"
    assert all(f"/data/{snapshot.summary[RUN_ID_KEY]}/density_bucket={f.partition[0]}/" in f.file_path for f in files)
    assert sum(f.record_count for f in files) == manifest["counts"]["chunks"]
    assert manifest["output"]["snapshot_id"] == snapshot.snapshot_id


def test_the_snapshot_summary_holds_the_manifest_and_names_the_rejects_snapshot(
    two_outputs: tuple[Path, Path, dict],
) -> None:
    directory, warehouse, _ = two_outputs
    snapshot = load_table(warehouse).current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    summary = snapshot.summary.additional_properties
    manifest = json.loads(summary[MANIFEST_KEY])
    counts, expected = manifest["counts"], read_manifest(directory)["counts"]
    assert counts == expected
    assert counts["records_read"] == counts["documents_chunked"] + sum(counts["rejects"].values())
    settings = read_manifest(directory)["settings"]
    settings["output"]["catalog"] = {"warehouse": str(warehouse)}
    assert manifest["settings"] == settings
    assert manifest["fingerprint"] == read_manifest(directory)["fingerprint"] == summary["zerda.fingerprint"]
    assert manifest["versions"]["zerda"] == summary["zerda.version"]
    assert {k.removeprefix("zerda.rejects."): int(v) for k, v in summary.items() if k.startswith("zerda.rejects.")} == (
        counts["rejects"]
    )
    rejects = load_table(warehouse, f"{TABLE}__rejects")
    rejects_snapshot = rejects.current_snapshot()
    assert rejects_snapshot is not None and str(rejects_snapshot.snapshot_id) == summary[REJECTS_SNAPSHOT_KEY]
    assert rejects_snapshot.summary is not None
    assert rejects_snapshot.summary.additional_properties[RUN_ID_KEY] == summary[RUN_ID_KEY]


def duckdb_with_iceberg() -> duckdb.DuckDBPyConnection:
    """DuckDB with its iceberg extension (and the avro one it needs) loaded from their PyPI packages: the
    connection may download nothing."""
    connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in ("avro", "iceberg"):
        package = importlib.import_module(f"duckdb_extension_{name}")
        (binary,) = Path(package.__file__ or "").parent.rglob(f"v{duckdb.__version__}/{name}.duckdb_extension")
        connection.execute(f"LOAD '{binary}'")
    return connection


def test_duckdb_reads_the_table_with_its_iceberg_extension(two_outputs: tuple[Path, Path, dict]) -> None:
    directory, warehouse, _ = two_outputs
    table = load_table(warehouse)
    query = "SELECT density_bucket, count(*), sum(char_count), min(density), max(density) FROM {} GROUP BY 1 ORDER BY 1"
    found = duckdb_with_iceberg().sql(query.format(f"iceberg_scan('{table.metadata_location}')")).fetchall()
    expected = duckdb.sql(query.format(f"read_parquet('{directory}/**/*.parquet', hive_partitioning=true)")).fetchall()
    assert found == expected and len(found) > 3
    at_rest = f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}') WHERE keywords IS NULL"
    assert duckdb_with_iceberg().sql(at_rest).fetchone() == (sum(row[1] for row in expected),), "nulls, not []"


def test_a_second_run_is_a_second_snapshot_and_the_first_stays_readable_by_id_and_time(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse)
    smaller = write_config(tmp_path / "b.yaml", warehouse, "chunking:\n  base_size: 256\n  max_size: 600\n")
    output = ["--output", f"iceberg://{TABLE}", "--quiet"]
    first = run([*output, "--config", str(config)])
    second = run([*output, "--config", str(smaller)])
    assert second["counts"]["chunks"] > first["counts"]["chunks"]
    table = load_table(warehouse)
    one, two = table.snapshots()
    assert (one.snapshot_id, two.snapshot_id) == (first["output"]["snapshot_id"], second["output"]["snapshot_id"])
    assert two.parent_snapshot_id == one.snapshot_id
    assert table.scan().to_arrow().num_rows == second["counts"]["chunks"], "replaced, not appended"
    by_id = table.scan(snapshot_id=one.snapshot_id).to_arrow()
    assert by_id.num_rows == first["counts"]["chunks"]
    fingerprints = set(pc.unique(by_id["config_fingerprint"]).to_pylist())  # the first run's chunk settings
    assert len(fingerprints) == 1 and fingerprints != set(
        pc.unique(table.scan().to_arrow()["config_fingerprint"]).to_pylist()
    )
    as_of = table.snapshot_as_of_timestamp(two.timestamp_ms - 1)
    assert as_of is not None and as_of.snapshot_id == one.snapshot_id
    assert table.scan(snapshot_id=as_of.snapshot_id).to_arrow().sort_by("chunk_id").equals(by_id.sort_by("chunk_id"))
    # DuckDB's time travel, by snapshot id and by time (UTC)
    scan = f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}'{{}})"
    at_one = datetime.fromtimestamp(one.timestamp_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    db = duckdb_with_iceberg()
    assert db.sql(scan.format("")).fetchone() == (second["counts"]["chunks"],)
    assert db.sql(scan.format(f", snapshot_from_id={one.snapshot_id}")).fetchone() == (first["counts"]["chunks"],)
    assert db.sql(scan.format(f", snapshot_from_timestamp=TIMESTAMP '{at_one}'")).fetchone() == (
        first["counts"]["chunks"],
    )
    rejects = load_table(warehouse, f"{TABLE}__rejects")
    assert len(rejects.snapshots()) == 2
    assert rejects.scan().to_arrow().num_rows == second["counts"]["reject_rows"]

    earlier = load_table_report(f"iceberg://{TABLE}", str(config), one.snapshot_id)  # zerda-report --snapshot
    assert (
        earlier.manifest["counts"] == first["counts"]
        and sum(g.chunks for g in earlier.groups) == first["counts"]["chunks"]
    )

    # expired (docs/iceberg.md), the first run's files are named by no snapshot: orphans, listed for deletion
    target = open_table(TABLE, {"warehouse": str(warehouse)})
    assert orphan_files(target, older_than_hours=0) == []
    first_files = {task.file.file_path for task in table.scan(snapshot_id=one.snapshot_id).plan_files()}
    table.maintenance.expire_snapshots().older_than(
        datetime.fromtimestamp(two.timestamp_ms / 1000, timezone.utc)
    ).commit()
    assert [s.snapshot_id for s in load_table(warehouse).snapshots()] == [two.snapshot_id]
    orphans = orphan_files(target, older_than_hours=0)
    assert {o.run_id for o in orphans} == {one.summary[RUN_ID_KEY]}
    assert first_files == {o.url for o in orphans if "/chunks/data/" in o.url}
    assert any("/chunks__zerda/" in o.url for o in orphans), "its index and changes with it"
    assert not any("/chunks__rejects/" in o.url for o in orphans), "the rejects table's snapshots are not expired"
    assert orphan_files(target) == [], "younger than the default age: maybe a run's that is writing now"
    assert table.scan().to_arrow().num_rows == second["counts"]["chunks"]


def test_a_failed_run_leaves_the_table_at_its_previous_snapshot_and_deletes_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse)
    argv = ["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"]
    first = run(argv)
    before = load_table(warehouse)
    files_before = sorted(p for p in Path(before.location().removeprefix("file://")).rglob("*") if p.is_file())
    zerda_fault.arm(monkeypatch, "data-beam-model", tmp_path / "fault.marker")  # a sample document
    with pytest.raises(RuntimeError, match="injected worker failure"):
        run(argv)
    after = load_table(warehouse)
    assert after.metadata_location == before.metadata_location
    assert [s.snapshot_id for s in after.snapshots()] == [first["output"]["snapshot_id"]]
    assert sorted(p for p in Path(after.location().removeprefix("file://")).rglob("*") if p.is_file()) == files_before
    assert after.scan().to_arrow().num_rows == first["counts"]["chunks"]


def test_a_table_commit_refuses_an_inputs_table_short_of_a_file_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table commit makes the directory commit's checks before anything changes: here the inputs table
    (in the run's side folder: the next incremental run skips the files it lists as unchanged) lacks the row
    of one file read. The table keeps its previous snapshot."""
    warehouse = tmp_path / "warehouse"
    argv = ["--output", f"iceberg://{TABLE}", "--config", str(write_config(tmp_path / "a.yaml", warehouse)), "--quiet"]
    first = run(argv)
    monkeypatch.setattr(write_module.WriteInputs, "expand", _inputs_short_of_one_file)
    with pytest.raises(JobError, match=r"_manifest/inputs: 14 rows, manifest 15 files read"):
        run(argv)
    assert [s.snapshot_id for s in load_table(warehouse).snapshots()] == [first["output"]["snapshot_id"]]


def _inputs_short_of_one_file(self: Any, reports: Any) -> Any:
    """``WriteInputs.expand`` that loses one file's report on its way (the sample's fennec_fox.md)."""
    kept = reports | "Lose" >> beam.Filter(lambda report: not report.source.endswith("fennec_fox.md"))
    return super(write_module.WriteInputs, self).expand(kept | "InputRows" >> beam.Map(write_module.input_rows))


@pytest.mark.parametrize(
    ("output", "catalog", "message"),
    [
        ("iceberg://chunks", "", "is not NAMESPACE.TABLE"),
        ("iceberg://corpus.9chunks", "", "is not NAMESPACE.TABLE"),
        ("iceberg://corpus.chunks", "    type: nonesuch\n", "cannot be opened"),
        ("iceberg://corpus.chunks", "    uri: postgresql+psycopg2://u:secret@127.0.0.1:9/db\n", "cannot be opened"),
    ],
    ids=["no-namespace", "bad-name", "unknown-catalog-type", "unreachable-catalog"],
)
def test_bad_table_settings_exit_2_with_one_line_and_write_nothing(
    output: str, catalog: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "bad.yaml", warehouse, catalog)
    assert main(["--input", str(REPO / "tests/data"), "--output", output, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert "secret" not in err
    assert not list(warehouse.rglob("*.parquet")) and not list(warehouse.rglob("*.json"))


def test_a_table_with_other_columns_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = load_catalog(
        "zerda", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    catalog.create_namespace("corpus")
    catalog.create_table(TABLE, schema=pa.schema([pa.field("id", pa.int64())]))
    config = write_config(tmp_path / "c.yaml", warehouse)
    assert main(["--output", f"iceberg://{TABLE}", "--config", str(config)]) == 2
    assert "has columns zerda does not write" in capsys.readouterr().err
    assert not list(warehouse.rglob("*.parquet"))


def test_output_table_in_the_settings_names_the_table(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "t.yaml", warehouse, f"  table: {TABLE}\n")
    manifest = run(["--config", str(config), "--quiet"])
    assert load_table(warehouse).scan().to_arrow().num_rows == manifest["counts"]["chunks"] > 0


def test_a_commit_that_meets_another_commit_fails_naming_the_conflict(tmp_path: Path) -> None:
    """Two runs committing at once: the catalog takes one snapshot whole; the other commit, made from the
    table as it was before, fails and changes nothing."""
    warehouse = tmp_path / "warehouse"
    argv = ["--output", f"iceberg://{TABLE}", "--config", str(write_config(tmp_path / "a.yaml", warehouse)), "--quiet"]
    run(argv)
    stale = load_table(warehouse)  # as a commit that loaded it before the other run's commit sees it
    second = run(argv)
    with pytest.raises(CommitError, match="changed while this run wrote"):
        _replace_data(stale, [], {RUN_ID_KEY: "another-run"})
    table = load_table(warehouse)
    assert table.current_snapshot().snapshot_id == second["output"]["snapshot_id"]  # type: ignore[union-attr]
    assert table.scan().to_arrow().num_rows == second["counts"]["chunks"]


def test_concurrent_runs_end_as_whole_snapshots_or_exit_2_naming_the_conflict(tmp_path: Path) -> None:
    """Three jobs into one table at once: each ends as one whole snapshot (in some order) or exits 2 naming
    the conflict; the table holds one run's rows, never a mix."""
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse)
    argv = [str(BIN / "zerda-rechunk"), "--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"]
    first = run(argv[1:])
    jobs = [subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    ended = [(job.wait(timeout=300), job.stderr.read() if job.stderr else "") for job in jobs]
    for code, err in ended:
        assert code == 0 or (code == 2 and "changed while this run wrote (another run committed?)" in err), err
        assert code != 2 or len([line for line in err.splitlines() if line.startswith("zerda: ")]) == 1, err
    table = load_table(warehouse)
    assert len(table.snapshots()) == 1 + sum(code == 0 for code, _ in ended)
    rows = table.scan().to_arrow()
    assert rows.num_rows == first["counts"]["chunks"] and len(set(rows["chunk_id"].to_pylist())) == rows.num_rows
    committed = {s.summary[RUN_ID_KEY] for s in table.snapshots()}
    assert orphan_files(open_table(TABLE, {"warehouse": str(warehouse)}), 0) == [], "the losers' files deleted"
    assert len(committed) == len(table.snapshots())


def test_a_locked_catalog_at_launch_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse)
    run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    lock = sqlite3.connect(warehouse / "catalog.db", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # another program holds the catalog file: no one reads or writes it
    try:
        assert main(["--output", f"iceberg://{TABLE}", "--config", str(config)]) == 2
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    err = capsys.readouterr().err
    assert "database is locked" in err and len(err.strip().splitlines()) == 1, err


def test_a_catalog_locked_at_commit_fails_the_run_with_one_line_and_keeps_the_previous_snapshot(
    tmp_path: Path,
) -> None:
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse, "  max_rows_per_file: 100\n")
    first = run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    data = Path(load_table(warehouse).location().removeprefix("file://")) / "data"
    (first_run,) = [p.name for p in data.iterdir()]
    corpus = write_corpus(tmp_path / "big.jsonl", 12_000)  # long enough to be stopped while it writes, under load
    command = [str(BIN / "zerda-rechunk"), "--input", str(corpus), "--output", f"iceberg://{TABLE}"]
    job = subprocess.Popen([*command, "--config", str(config), "--quiet"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not [p for p in data.rglob("*.parquet") if first_run not in p.parts] and job.poll() is None:
        assert time.monotonic() < deadline, "the job wrote no data file"
        time.sleep(0.01)
    assert job.poll() is None, "the job ended before the catalog could be locked: give it a larger corpus"
    lock = sqlite3.connect(warehouse / "catalog.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # another writer holds the catalog: reads go on, no commit can be made
    try:
        _, err = job.communicate(timeout=300)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert job.returncode == 1, err
    (line,) = [line for line in err.splitlines() if line.startswith("zerda: ")]
    assert "the commit to Iceberg table 'corpus.chunks' failed" in line and "keeps its previous snapshot" in line
    table = load_table(warehouse)
    assert [s.snapshot_id for s in table.snapshots()] == [first["output"]["snapshot_id"]]
    assert [p.name for p in data.iterdir()] == [first_run], "the failed run deleted its data files"


def write_corpus(path: Path, documents: int) -> Path:
    """A JSONL corpus of ``documents`` narrative and technical documents of about 4,000 characters each."""
    words = "density chunk corpus record worker bucket table snapshot commit catalog manifest reject".split()
    with path.open("w", encoding="utf-8") as f:
        for n in range(documents):
            sentences = [
                " ".join(words[(n * 7 + i * 3 + j) % len(words)] for j in range(8 + (i + n) % 9)).capitalize() + "."
                for i in range(60)
            ]
            f.write(json.dumps({"id": f"doc-{n}", "text": " ".join(sentences)}) + "\n")
    return path


def _a_second_run_writing(
    tmp_path: Path, warehouse: Path
) -> tuple[dict[str, Any], Table, Path, str, subprocess.Popen[str]]:
    """A first run's manifest, its table and data folder and its run's folder name, and a second job (its own
    process group, stderr piped) caught while its workers write data files: to be stopped by the test."""
    config = write_config(tmp_path / "a.yaml", warehouse, "  max_rows_per_file: 100\n")
    first = run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    before = load_table(warehouse)
    data = Path(before.location().removeprefix("file://")) / "data"
    (first_run,) = [p.name for p in data.iterdir()]
    corpus = write_corpus(tmp_path / "big.jsonl", 12_000)  # long enough to be stopped while it writes, under load
    command = [str(BIN / "zerda-rechunk"), "--input", str(corpus), "--output", f"iceberg://{TABLE}"]
    job = subprocess.Popen(
        [*command, "--config", str(config), "--quiet"], start_new_session=True, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not [p for p in data.rglob("*.parquet") if first_run not in p.parts] and job.poll() is None:
            assert time.monotonic() < deadline, "the job wrote no data file"
            time.sleep(0.01)
        assert job.poll() is None, "the job ended before it could be stopped: give it a larger corpus"
    except BaseException:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
        raise
    return first, before, data, first_run, job


def test_a_killed_run_leaves_the_table_at_its_previous_snapshot(tmp_path: Path) -> None:
    """``kill -9`` of the whole job while its workers write: no snapshot names what it wrote, and the table
    reads as the previous run left it (the killed run's folder stays, for cleanup: docs/iceberg.md)."""
    warehouse = tmp_path / "warehouse"
    first, before, data, first_run, job = _a_second_run_writing(tmp_path, warehouse)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate()
    after = load_table(warehouse)
    assert after.metadata_location == before.metadata_location
    assert [s.snapshot_id for s in after.snapshots()] == [first["output"]["snapshot_id"]]
    assert after.scan().to_arrow().num_rows == first["counts"]["chunks"]
    named = {task.file.file_path.removeprefix("file://") for task in after.scan().plan_files()}
    orphans = [p for p in data.rglob("*.parquet") if first_run not in p.parts]
    assert orphans and not named & {str(p) for p in orphans}, "the killed run's files: in its folder, in no snapshot"
    (killed,) = {p.relative_to(data).parts[0] for p in orphans}
    listed = orphan_files(open_table(TABLE, {"warehouse": str(warehouse)}), older_than_hours=0)
    assert {o.run_id for o in listed} == {killed}
    assert {str(p) for p in orphans} <= {o.url.removeprefix("file://") for o in listed}


def test_zerda_report_orphans_lists_and_removes_a_killed_runs_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kill -9`` of a job while it writes, then ``zerda-report iceberg://... --orphans``: its files are listed
    (only with an age limit the killed run passes: a younger run may be writing still), ``--remove`` deletes
    them, and the table reads as before."""
    warehouse = tmp_path / "warehouse"
    first, before, data, first_run, job = _a_second_run_writing(tmp_path, warehouse)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate()
    killed = sorted(str(p) for p in data.rglob("*") if p.is_file() and first_run not in p.parts)
    assert killed
    argv = [f"iceberg://{TABLE}", "--config", str(tmp_path / "a.yaml"), "--orphans"]
    assert report_main(argv) == 0
    assert capsys.readouterr().out.endswith(
        "0 file(s) of 0 run(s) started more than 72 hour(s) ago that no snapshot "
        f"of {TABLE} names: kept (--remove deletes them)\n"
    )
    assert report_main([*argv, "--older-than", "0"]) == 0
    *listed, last = capsys.readouterr().out.splitlines()
    assert set(killed) <= {url.removeprefix("file://") for url in listed}
    assert last.startswith(f"{len(listed)} file(s) of 1 run(s) started more than 0 hour(s) ago")
    assert report_main([*argv, "--older-than", "0", "--remove"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("names: removed")
    assert [p.name for p in data.iterdir()] == [first_run]
    side = Path(before.location().removeprefix("file://") + SIDE_SUFFIX)
    assert [p.name for p in side.iterdir()] == [first_run], "its staging gone too"
    assert orphan_files(open_table(TABLE, {"warehouse": str(warehouse)}), 0) == []
    after = load_table(warehouse)
    assert after.metadata_location == before.metadata_location
    assert after.scan().to_arrow().num_rows == first["counts"]["chunks"]


def test_zerda_report_reads_a_table_as_it_reads_a_directory(
    two_outputs: tuple[Path, Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory, warehouse, manifest = two_outputs
    config = str(write_config(tmp_path / "r.yaml", warehouse))
    of_table, of_directory = load_table_report(f"iceberg://{TABLE}", config), load_report(str(directory))
    assert of_table.output == f"iceberg://{TABLE} (snapshot {manifest['output']['snapshot_id']})"
    assert of_table.groups == of_directory.groups and of_table.groups
    assert (of_table.rejects, of_table.sources, of_table.rejected_files) == (
        of_directory.rejects,
        of_directory.sources,
        of_directory.rejected_files,
    )
    assert of_table.manifest["counts"] == of_directory.manifest["counts"]
    assert [s.bucket for s in of_table.samples] == [s.bucket for s in of_directory.samples]
    assert report_main([f"iceberg://{TABLE}", "--config", config]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"zerda report · iceberg://{TABLE} (snapshot ") and "Chunks by density bucket" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--snapshot", "42"], "has no snapshot 42"),
        (["--verify"], "--verify reads a directory output"),
        (["--remove"], "--remove goes with --orphans"),
    ],
)
def test_zerda_report_on_a_table_refuses_what_it_cannot_read_with_exit_2(
    argv: list[str], message: str, two_outputs: tuple[Path, Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    _, warehouse, _ = two_outputs
    config = str(write_config(tmp_path / "r.yaml", warehouse))
    assert report_main([f"iceberg://{TABLE}", "--config", config, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "settings",
    ["  catalog: [warehouse]\n", "  catalog:\n    uri: [1]\n", "  table: 7\n"],
    ids=["catalog-not-a-mapping", "property-not-a-string", "table-not-a-string"],
)
def test_bad_table_keys_in_the_settings_exit_2(settings: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(f"output:\n{settings}", encoding="utf-8")
    assert main(["--config", str(config), "--output", f"iceberg://{TABLE}"]) == 2
    assert "output." in capsys.readouterr().err


# ---- a PostgreSQL catalog, on a real server the tests start ---------------------------------------------------


def test_a_postgresql_catalog_holds_the_table_and_its_password_is_never_printed(
    postgres_server: PostgresServer,
    two_outputs: tuple[Path, Path, dict],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The catalog's uri, password included, from the environment as pyiceberg reads it; the warehouse from
    the settings. The rows are those of the SQLite-catalog run; the tables are rows of PostgreSQL."""
    _, sqlite_warehouse, _ = two_outputs
    warehouse = tmp_path / "warehouse"
    monkeypatch.setenv("PYICEBERG_CATALOG__ZERDA__URI", postgres_server.uri())
    config = write_config(tmp_path / "pg.yaml", warehouse)
    manifest = run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--verbose"])
    out, err = capfd.readouterr()
    assert postgres_server.password not in out + err
    catalog = load_catalog("zerda", uri=postgres_server.uri(), warehouse=f"file://{warehouse}")
    table = catalog.load_table(TABLE)
    assert table.location().startswith(f"file://{warehouse}/")
    rows = as_directory_rows(table.scan().to_arrow())
    assert sorted_rows(rows) == sorted_rows(as_directory_rows(load_table(sqlite_warehouse).scan().to_arrow()))
    assert rows.num_rows == manifest["counts"]["chunks"]
    engine = sqlalchemy.create_engine(postgres_server.uri())
    with engine.connect() as connection:
        names = connection.execute(sqlalchemy.text("SELECT table_namespace, table_name FROM iceberg_tables")).all()
    engine.dispose()
    assert {("corpus", "chunks"), ("corpus", "chunks__rejects")} <= set(names)


def test_a_wrong_postgresql_password_exits_2_without_printing_it(
    postgres_server: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "warehouse"
    uri = postgres_server.uri(password="not-the-password-42")
    config = write_config(tmp_path / "pg.yaml", warehouse, f"    uri: {uri}\n")
    assert main(["--output", f"iceberg://{TABLE}", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "cannot be opened" in err and len(err.strip().splitlines()) == 1, err
    assert "not-the-password-42" not in err
    assert not list(warehouse.rglob("*.parquet"))


def test_worker_processes_write_the_table_as_one_process_does(
    two_outputs: tuple[Path, Path, dict], tmp_path: Path
) -> None:
    """Two worker processes write the data files and one of them commits, loading the catalog itself."""
    _, sqlite_warehouse, _ = two_outputs
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse)
    manifest = run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet", *MULTI_PROCESS])
    rows = as_directory_rows(load_table(warehouse).scan().to_arrow())
    assert rows.num_rows == manifest["counts"]["chunks"]
    assert sorted_rows(rows) == sorted_rows(as_directory_rows(load_table(sqlite_warehouse).scan().to_arrow()))


def test_a_run_that_chunks_nothing_names_the_rejects_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "short.txt").write_text("Too short.", encoding="utf-8")
    config = write_config(tmp_path / "a.yaml", tmp_path / "warehouse")
    assert main(["--input", str(corpus), "--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"]) == 1
    assert f"the rejects are in {TABLE}__rejects" in capsys.readouterr().err
    rejects = load_table(tmp_path / "warehouse", f"{TABLE}__rejects").scan().to_arrow().to_pylist()
    assert [r["reason"] for r in rejects] == ["below_min_chunk_size"]
    assert load_table(tmp_path / "warehouse").scan().to_arrow().num_rows == 0


def test_ctrl_c_while_the_workers_write_leaves_the_previous_snapshot_and_deletes_the_runs_files(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    first, _, data, first_run, job = _a_second_run_writing(tmp_path, warehouse)
    os.killpg(job.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the whole process group
    _, err = job.communicate(timeout=120)
    assert job.returncode == 130, err
    assert f"zerda: interrupted; {TABLE} keeps its previous snapshot" in err
    after = load_table(warehouse)
    assert [s.snapshot_id for s in after.snapshots()] == [first["output"]["snapshot_id"]]
    assert [p.name for p in data.iterdir()] == [first_run], "the stopped run deleted its data files"
    assert after.scan().to_arrow().num_rows == first["counts"]["chunks"]


def test_the_summary_ends_with_a_duckdb_query_that_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "a.yaml", tmp_path / "warehouse")
    assert main(["--output", f"iceberg://{TABLE}", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    (query,) = [line.removeprefix("query:").strip() for line in out.splitlines() if line.startswith("query:")]
    rows = duckdb_with_iceberg().sql(query).fetchall()
    assert sum(n for _, n in rows) == load_table(tmp_path / "warehouse").scan().to_arrow().num_rows > 0
    assert f"output:  iceberg://{TABLE} (snapshot " in out and f"rejects: {TABLE}__rejects (snapshot " in out


def test_a_password_in_the_configs_catalog_uri_is_in_no_log_and_no_snapshot(
    postgres_server: PostgresServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A reviewed YAML file should not hold a password (docs/iceberg.md); one that does still has it hidden."""
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "pg.yaml", warehouse, f"    uri: {postgres_server.uri()}\n")
    manifest = run(["--output", "iceberg://secret.chunks", "--config", str(config), "--verbose"])
    out, err = capfd.readouterr()
    assert postgres_server.password not in out + err
    table = load_catalog("zerda", uri=postgres_server.uri(), warehouse=f"file://{warehouse}").load_table(
        "secret.chunks"
    )
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert postgres_server.password not in json.dumps(snapshot.summary.additional_properties)
    side = Path(table.location().removeprefix("file://") + SIDE_SUFFIX)
    (manifest_file,) = side.glob("*/_manifest.json")
    assert postgres_server.password not in manifest_file.read_text(encoding="utf-8"), "nor in the side folder"
    assert json.loads(snapshot.summary[MANIFEST_KEY])["counts"] == manifest["counts"]


def test_the_rejects_snapshot_of_a_run_whose_chunk_commit_failed_is_undone(tmp_path: Path) -> None:
    """The rejects table is committed first; if the chunk table's commit then fails, the rejects table goes back
    to its previous snapshot (the rows the current chunk snapshot's manifest counts)."""
    warehouse = tmp_path / "warehouse"
    argv = ["--output", f"iceberg://{TABLE}", "--config", str(write_config(tmp_path / "a.yaml", warehouse)), "--quiet"]
    first, second = run(argv), run(argv)
    rejects = load_table(warehouse, f"{TABLE}__rejects")
    ours, previous = second["output"]["rejects_snapshot_id"], first["output"]["rejects_snapshot_id"]
    assert undo_snapshot(rejects, ours, previous)
    rejects = load_table(warehouse, f"{TABLE}__rejects")
    assert rejects.current_snapshot().snapshot_id == previous  # type: ignore[union-attr]
    assert [s.snapshot_id for s in rejects.snapshots()] == [previous, ours], "kept for time travel"
    assert not undo_snapshot(rejects, ours, previous), "only while the run's snapshot is the current one"


def test_without_pyiceberg_a_table_output_exits_2_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """zerda installed without the ``iceberg`` extra: directory runs work, a table run says what to install."""
    monkeypatch.setitem(sys.modules, "pyiceberg", None)  # as if it were not installed: its import fails
    assert main(["--output", str(tmp_path / "out"), "--quiet"]) == 0
    assert main(["--output", f"iceberg://{TABLE}", "--config", str(write_config(tmp_path / "a.yaml", tmp_path))]) == 2
    assert "pip install 'zerda[iceberg]'" in capsys.readouterr().err


def test_a_table_holds_the_rows_of_a_directory_run_with_every_optional_column_filled(tmp_path: Path) -> None:
    """Keywords, section density, headings and embed_text on: the table's chunk job is the directory's."""
    settings = (
        '  embed_text: "{section}\\n\\n{text}"\n'
        "chunking:\n  density_scope: section\nenrich:\n  keywords: true\n  top_k: 3\n"
    )
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "full.yaml", warehouse, settings)
    directory = tmp_path / "dir"
    run(["--output", str(directory), "--config", str(config), "--quiet"])
    run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    rows = as_directory_rows(load_table(warehouse).scan().to_arrow())
    expected = read_chunks(directory)
    expected = expected.select(rows.schema.names).cast(rows.schema)
    assert rows["keywords"].null_count == 0 and rows["embed_text"].null_count == 0
    assert rows["local_density"].null_count == 0
    assert sorted_rows(rows) == sorted_rows(expected)
