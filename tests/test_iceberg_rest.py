"""An Iceberg table whose catalog is a REST server (Iceberg's own ``RESTCatalogServer``, started by the
``iceberg_rest_server`` fixture): the same rows as a Parquet directory, the run's manifest in the snapshot,
an incremental run that carries the unchanged files, and an unreachable server refused at launch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from pipelines.cli.rechunk import main, run
from pipelines.input.expand import sample_corpus_glob
from pipelines.output.iceberg import MANIFEST_KEY
from tests.common import REPO
from tests.output_checks import read_chunks
from tests.test_iceberg import TABLE, as_directory_rows, sorted_rows

if TYPE_CHECKING:
    from tests.iceberg_rest_server import RestServer

pytest_plugins = ["tests.iceberg_rest_server"]  # the iceberg_rest_server fixture


def _config(path: Path, uri: str) -> Path:
    path.write_text(f"output:\n  catalog:\n    type: rest\n    uri: {uri}\n", encoding="utf-8")
    return path


def _table(server: RestServer, name: str = TABLE) -> Table:
    return load_catalog("rest", type="rest", uri=server.uri).load_table(name)


def _same_rows(table: Table, directory: Path) -> None:
    rows = as_directory_rows(table.scan().to_arrow())
    expected = read_chunks(directory)
    assert rows.num_rows == expected.num_rows > 0
    assert sorted_rows(rows) == sorted_rows(expected.select(rows.schema.names).cast(rows.schema))


def test_a_rest_catalog_holds_the_rows_a_directory_run_writes(iceberg_rest_server: RestServer, tmp_path: Path) -> None:
    """The server places the table in its warehouse; zerda's workers write the data files there, one commit
    names them: the rows of the same run into a directory, rejects in their own table, the manifest in the
    snapshot's summary."""
    config = _config(tmp_path / "rest.yaml", iceberg_rest_server.uri)
    manifest = run(["--output", f"iceberg://{TABLE}", "--config", str(config), "--quiet"])
    run(["--output", str(tmp_path / "dir"), "--quiet"])
    table = _table(iceberg_rest_server)
    assert table.location().startswith(f"file://{iceberg_rest_server.warehouse}/")
    _same_rows(table, tmp_path / "dir")
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.snapshot_id == manifest["output"]["snapshot_id"]
    assert json.loads(snapshot.summary[MANIFEST_KEY])["counts"] == manifest["counts"]
    rejects = _table(iceberg_rest_server, f"{TABLE}__rejects").scan().to_arrow()
    assert rejects.num_rows == manifest["counts"]["reject_rows"] > 0


def test_an_incremental_run_through_a_rest_catalog_reads_only_the_changed_file(
    iceberg_rest_server: RestServer, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(sample_corpus_glob(), corpus)
    config = _config(tmp_path / "rest.yaml", iceberg_rest_server.uri)
    argv = ["--input", str(corpus), "--output", "iceberg://corpus.edited", "--config", str(config), "--quiet"]
    first = run(argv)
    edited = corpus / "en" / "fennec_fox.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n\nA paragraph added since the first run.\n", "utf-8")
    second = run([*argv, "--incremental"])
    changes = second["changes"]
    assert changes["incremental"] is True and changes["files_unchanged"] == first["counts"]["files_read"] - 1
    assert changes["documents_changed"] == 1 and changes["documents_added"] == changes["documents_removed"] == 0
    run(["--input", str(corpus), "--output", str(tmp_path / "dir"), "--quiet"])
    table = _table(iceberg_rest_server, "corpus.edited")
    _same_rows(table, tmp_path / "dir")
    assert [s.snapshot_id for s in table.snapshots()][-2:] == [
        first["output"]["snapshot_id"],
        second["output"]["snapshot_id"],
    ]


def test_an_unreachable_rest_catalog_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path / "rest.yaml", "http://127.0.0.1:9")
    assert main(["--input", str(REPO / "tests/data"), "--output", f"iceberg://{TABLE}", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "cannot be opened" in err and len(err.strip().splitlines()) == 1, err


def test_rows_read_back_as_arrow_match_their_schema(iceberg_rest_server: RestServer, tmp_path: Path) -> None:
    """A reader's view through the REST catalog: pyiceberg's scan to Arrow, filtered by the partition column."""
    config = _config(tmp_path / "rest.yaml", iceberg_rest_server.uri)
    manifest = run(["--output", "iceberg://corpus.filtered", "--config", str(config), "--quiet"])
    table = _table(iceberg_rest_server, "corpus.filtered")
    bucket, count = max(manifest["counts"]["chunks_by_bucket"].items(), key=lambda item: item[1])
    rows = table.scan(row_filter=f"density_bucket == {bucket}").to_arrow()
    assert rows.num_rows == count and pa.types.is_string(as_directory_rows(rows).schema.field("text").type)
