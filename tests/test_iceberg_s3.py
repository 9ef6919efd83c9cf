"""An Iceberg table whose warehouse is on S3 (moto's server), its SQLite catalog on local disk: the workers
write the data files to S3 through fsspec, pyiceberg commits and reads them, and every endpoint and
credential comes from the ordinary AWS environment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyiceberg.catalog import load_catalog

from pipelines.cli.rechunk import run

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures


def test_a_table_with_its_warehouse_on_s3(s3_env: S3Env, tmp_path: Path) -> None:
    bucket = s3_env.new_bucket()
    warehouse, catalog_file = f"s3://{bucket}/warehouse", tmp_path / "catalog.db"
    config = tmp_path / "s3.yaml"
    config.write_text(
        f"output:\n  table: corpus.chunks\n  catalog:\n    uri: sqlite:///{catalog_file}\n    warehouse: {warehouse}\n",
        encoding="utf-8",
    )
    first = run(["--config", str(config), "--quiet"])
    second = run(["--config", str(config), "--quiet"])
    fsspec_io = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}  # reads the endpoint from the environment
    catalog = load_catalog("zerda", uri=f"sqlite:///{catalog_file}", warehouse=warehouse, **fsspec_io)
    table = catalog.load_table("corpus.chunks")
    assert table.location().startswith(f"{warehouse}/")
    assert table.scan().to_arrow().num_rows == second["counts"]["chunks"] == first["counts"]["chunks"] > 0
    files = [task.file.file_path for task in table.scan().plan_files()]
    assert files and all(path.startswith(f"{table.location()}/data/") for path in files)
    fs = s3_env.filesystem()
    on_s3 = {f"s3://{path}" for path in fs.find(f"{bucket}/warehouse/corpus/chunks/") if path.endswith(".parquet")}
    previous = {task.file.file_path for task in table.scan(snapshot_id=table.snapshots()[0].snapshot_id).plan_files()}
    assert on_s3 == set(files) | previous, "no copy: the files the workers wrote, named by the two snapshots"

    # incremental: nothing changed, so the third snapshot names the second's files, and its changes are empty
    third = run(["--config", str(config), "--quiet", "--incremental"])
    assert third["changes"]["incremental"] is True and third["counts"] == second["counts"]
    table = catalog.load_table("corpus.chunks")
    assert {task.file.file_path for task in table.scan().plan_files()} == set(files)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.snapshot_id == third["output"]["snapshot_id"]
    side = f"{bucket}/warehouse/corpus/chunks__zerda/{snapshot.summary['zerda.run-id']}"  # the run's side folder
    assert fs.find(f"{side}/_index") and fs.find(f"{side}/_changes")
    assert third["changes"]["chunks_added"] == third["changes"]["chunks_removed"] == 0
