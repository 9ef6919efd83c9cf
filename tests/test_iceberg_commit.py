"""The table commit's cost is metadata: the workers describe each data file (its Iceberg ``DataFile``, statistics
included) from the footer they wrote, and the commit reads no data file and computes no statistic. The
statistics in the snapshot are those pyiceberg computes from the files' footers, and a filtered scan prunes
files on them. A table whose metrics settings change while the run writes is not committed to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyiceberg.io.pyarrow as pyiceberg_arrow
import pytest
from pyiceberg.expressions import EqualTo, GreaterThan
from pyiceberg.io.pyarrow import compute_statistics_plan, parquet_path_to_id_mapping

from pipelines.cli.rechunk import main, run
from pipelines.output import iceberg
from tests.test_iceberg import TABLE, load_table, write_config

STATISTICS = "data_file_statistics_from_parquet_metadata"


def _data_files(warehouse: Path) -> list[Path]:
    """Both tables' data files: ``data/<run id>/density_bucket=K/`` and ``data/<run id>/rejects/``."""
    return sorted(warehouse.rglob("data/*/*/*.parquet"))


def test_the_commit_reads_no_data_file_and_computes_no_statistic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the commit runs, every data file the run wrote holds zeros (its size kept: the commit's listing
    still finds it whole), so any read of a footer would fail; the statistics are computed once per file, by
    the workers, none in the commit."""
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse, "  max_rows_per_file: 5\n")
    computed = {"workers": 0, "commit": 0}
    where = ["workers"]
    statistics = getattr(pyiceberg_arrow, STATISTICS)

    def counted(*args: Any, **kwargs: Any) -> Any:
        computed[where[0]] += 1
        return statistics(*args, **kwargs)

    commit = iceberg._CommitTable.process

    def blanked(self: Any, *args: Any) -> Iterator[Any]:
        files = {path: path.read_bytes() for path in _data_files(warehouse)}
        for path, data in files.items():
            path.write_bytes(bytes(len(data)))
        where[0] = "commit"
        try:
            yield from commit(self, *args)
        finally:
            where[0] = "workers"
            for path, data in files.items():
                path.write_bytes(data)

    monkeypatch.setattr(pyiceberg_arrow, STATISTICS, counted)
    monkeypatch.setattr(iceberg._CommitTable, "process", blanked)
    manifest = run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    monkeypatch.undo()

    table = load_table(warehouse)
    assert table.scan().to_arrow().num_rows == manifest["counts"]["chunks"]
    written = _data_files(warehouse)
    assert len(written) > len(manifest["counts"]["chunks_by_bucket"]), "several files a bucket"
    assert computed == {"workers": len(written), "commit": 0}


def test_the_snapshots_statistics_are_those_of_the_files_footers_and_a_filtered_scan_prunes_on_them(
    tmp_path: Path,
) -> None:
    warehouse = tmp_path / "warehouse"
    config = write_config(tmp_path / "a.yaml", warehouse, "  max_rows_per_file: 5\n")
    run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    table = load_table(warehouse)
    schema = table.schema()
    plan, mapping = compute_statistics_plan(schema, table.properties), parquet_path_to_id_mapping(schema)
    files = [task.file for task in table.scan().plan_files()]
    for data_file in files:
        footer = pq.read_metadata(data_file.file_path.removeprefix("file://"))
        expected = pyiceberg_arrow.data_file_statistics_from_parquet_metadata(footer, plan, mapping)
        assert {key: getattr(data_file, key) for key in expected.to_serialized_dict()} == expected.to_serialized_dict()
        assert data_file.partition == expected.partition(table.spec(), schema)
        assert data_file.file_size_in_bytes == Path(data_file.file_path.removeprefix("file://")).stat().st_size
    bucket = files[0].partition[0]
    in_bucket = [task.file for task in table.scan(row_filter=EqualTo("density_bucket", bucket)).plan_files()]
    assert in_bucket and len(in_bucket) < len(files) and all(f.partition[0] == bucket for f in in_bucket)
    longest = max(row["char_count"] for row in table.scan(selected_fields=("char_count",)).to_arrow().to_pylist())
    assert list(table.scan(row_filter=GreaterThan("char_count", longest)).plan_files()) == [], "pruned on bounds"
    assert len(list(table.scan(row_filter=GreaterThan("char_count", longest - 1)).plan_files())) >= 1


def test_a_table_whose_metrics_settings_change_while_the_run_writes_is_not_committed_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The workers described the files with the settings the launch read; committing them under others would
    give the snapshot statistics the table does not ask for. Exit code 2, one line; the previous snapshot stays
    and the run's files are deleted."""
    warehouse = tmp_path / "warehouse"
    argv = ["--output", f"iceberg://{TABLE}", "--config", str(write_config(tmp_path / "a.yaml", warehouse))]
    first = run([*argv, "--quiet"])
    before = set(_data_files(warehouse))
    commit = iceberg._CommitTable.process

    def changed_first(self: Any, *args: Any) -> Iterator[Any]:
        with load_table(warehouse).transaction() as transaction:
            transaction.set_properties({"write.metadata.metrics.default": "counts"})
        yield from commit(self, *args)

    monkeypatch.setattr(iceberg._CommitTable, "process", changed_first)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "changed while this run wrote" in err and "metrics settings" in err, err
    table = load_table(warehouse)
    assert [s.snapshot_id for s in table.snapshots()] == [first["output"]["snapshot_id"]]
    assert set(_data_files(warehouse)) == before
