"""Files in OUTPUT that zerda did not write (issue 9): never deleted by a commit; where the dataset's readers
would read them (a dataset folder), the run refuses at launch naming them, or the commit refuses if they
appear while the run runs. Hidden names stay, untouched and allowed."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from pipelines.cli.rechunk import main
from pipelines.errors import NewerManifestError
from pipelines.output import ownership
from pipelines.output.ownership import dataset_files
from pipelines.output.schema import CHUNK_SCHEMA
from pipelines.output.write import StagedFile, new_run_id
from tests.common import most_at_once
from tests.output_checks import read_manifest
from tests.test_reliability_ops import _finished, _snapshot
from tests.test_write import chunk_row, corpus, run_write

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures


def _a_chunk_parquet(path: Path) -> None:
    """A Parquet file of zerda's chunk schema, as a user's own export or another tool's would be."""
    pq.write_table(pa.Table.from_pylist([chunk_row(99, 0)], schema=CHUNK_SCHEMA), path)


@pytest.mark.parametrize(
    "planted",
    [
        "density_bucket=3/notes.txt",  # pyarrow.dataset(OUTPUT) and Spark would fail on it
        "density_bucket=3/extra.parquet",  # would be read as chunks
        "density_bucket=3/part-00042.parquet",  # zerda's name, not zerda's footer
        "density_bucket=99/part-00000.parquet",  # a bucket folder no run wrote
        "_rejects/stray.pq",  # read_parquet('OUTPUT/_rejects/*') would read it
        "_changes/notes.txt",
    ],
)
def test_a_foreign_file_in_a_dataset_folder_refuses_the_run_naming_it(
    planted: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = _finished(tmp_path / "out")
    path = output / planted
    path.parent.mkdir(exist_ok=True)
    _a_chunk_parquet(path) if planted.endswith("parquet") else path.write_text("mine", encoding="utf-8")
    before = _snapshot(output)
    capsys.readouterr()
    assert main(["--output", str(output), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zerda: error: ") and len(err.strip().splitlines()) == 1, err
    assert f"1 file(s) zerda did not write in its dataset folders ({planted})" in err
    assert "move them out of OUTPUT" in err
    assert _snapshot(output) == before  # the file, _SUCCESS and the rows as they were; no lease, no staging


def test_the_commit_deletes_only_zerdas_files_and_keeps_hidden_ones(tmp_path: Path) -> None:
    """A hidden file keeps its folder; a committed file a commit stopped halfway left (a part name and zerda's
    footer, the manifest not listing it) goes like the previous output's own files."""
    output = _finished(tmp_path / "out")
    hidden = ["density_bucket=3/.DS_Store", "density_bucket=9/.keep", "_rejects/_notes.txt", "density_bucket=3/.a/b"]
    for name in hidden:
        (output / name).parent.mkdir(parents=True, exist_ok=True)
        (output / name).write_text("mine", encoding="utf-8")
    shutil.copy(next(output.glob("density_bucket=3/part-*.parquet")), output / "density_bucket=3/part-00042.parquet")
    listed = {entry["path"] for entry in read_manifest(output)["output"]["files"]}

    assert main(["--output", str(output), "--quiet"]) == 0

    for name in hidden:
        assert (output / name).read_text(encoding="utf-8") == "mine", name
    assert not (output / "density_bucket=3/part-00042.parquet").exists()
    files = {str(p.relative_to(output)) for p in output.rglob("*") if p.is_file()} - set(hidden)
    now = {entry["path"] for entry in read_manifest(output)["output"]["files"]}
    assert files == {*now, "_manifest.json", "_manifest/files.pq", "_SUCCESS"}
    partitioned = ("_index/", "_ids/", "_manifest/files.pq")  # named by partition, or the manifest's own table
    assert {path for path in files & listed if not path.startswith(partitioned)} == set()


class _Plant(beam.DoFn):
    """A user's file dropped into a bucket folder while the run runs (after the launch checked OUTPUT)."""

    def __init__(self, output: str) -> None:
        self._output = output

    def process(self, staged: StagedFile) -> Iterator[StagedFile]:
        (Path(self._output) / "density_bucket=4").mkdir(exist_ok=True)
        (Path(self._output) / "density_bucket=4" / "notes.txt").write_text("mine", encoding="utf-8")
        yield staged


def test_a_foreign_file_put_there_during_the_run_fails_the_commit_before_it_changes_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    run_write(str(out), corpus(4))
    import tests.test_write as write_tests

    original = write_tests.WriteChunks

    class PlantingChunks(original):  # type: ignore[misc,valid-type]
        def expand(self, rows):  # the staged files go through _Plant on their way to the commit
            return super().expand(rows) | "Plant" >> beam.ParDo(_Plant(str(out)))

    before = _snapshot(out)
    monkeypatch.setattr(write_tests, "WriteChunks", PlantingChunks)
    with pytest.raises(Exception, match=r"zerda did not write .*density_bucket=4/notes.txt\), put there while"):
        run_write(str(out), corpus(6, densities=(0.42,)), run_id=new_run_id())
    after = _snapshot(out)
    assert after.pop("density_bucket=4/notes.txt") == b"mine"
    assert {k: v for k, v in after.items() if not k.startswith("_staging/")} == before  # still finished


def test_folder_markers_on_an_object_store_are_no_ones_files(s3_env: S3Env) -> None:
    """A zero-byte ``density_bucket=3/`` object (the S3 console's "Create folder", Hadoop's S3A, ``aws s3api
    put-object --key dir/``) is a folder, not a file zerda did not write: the run goes on and leaves it."""
    bucket = s3_env.new_bucket()
    output = f"s3://{bucket}/out"
    assert main(["--output", output, "--quiet"]) == 0
    markers = ["out/density_bucket=3/", "out/_rejects/"]
    for key in markers:
        s3_env.client().put_object(Bucket=bucket, Key=key, Body=b"")
    assert dataset_files(s3_env.filesystem(), f"{bucket}/out").foreign == ()
    assert main(["--output", output, "--quiet"]) == 0
    assert s3_env.filesystem().exists(f"{bucket}/out/_SUCCESS")


def test_a_file_deleted_after_the_listing_is_not_called_foreign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch while another run commits (the lease is taken after the launch checks): that commit retracted
    its manifest and deletes the previous files, some just after this listing. A file gone is no one's file
    to move out of OUTPUT (the launch said ``1 file(s) zerda did not write ... move them out``, naming it)."""
    output = _finished(tmp_path / "out")
    (output / "_manifest.json").unlink()  # the other run's commit retracted it
    fs = LocalFileSystem()
    listed = LocalFileSystem.find

    def find_then_delete(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        found = listed(fs, path, *args, **kwargs)
        for name in found:  # the other run's commit deletes them as soon as they are listed here
            os.remove(name)
        return found

    monkeypatch.setattr(LocalFileSystem, "find", find_then_delete)
    assert dataset_files(fs, str(output)).foreign == ()


def test_without_a_manifest_the_footers_are_read_in_parallel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a commit stopped halfway (its manifest retracted), the launch and the commit read the footer of
    every file of the dataset: on an object store a few round trips each, hours for a large output one by one."""
    output = _finished(tmp_path / "out")
    (output / "_manifest.json").unlink()
    most = most_at_once(monkeypatch, ownership, "staged_as")
    files = dataset_files(LocalFileSystem(), str(output))
    assert files.foreign == () and len(files.ours) > 2
    assert most[0] > 1, "the footers were read one after another"


def test_a_manifest_of_a_newer_format_is_refused_not_read_as_no_manifest(tmp_path: Path) -> None:
    """A newer zerda's manifest says whose files are whose in a way this zerda may misread: refused, where a
    broken one only sends the launch to the footers."""
    output = _finished(tmp_path / "out")
    manifest = read_manifest(output)
    (output / "_manifest.json").write_text(json.dumps({**manifest, "format": 3}), encoding="utf-8")
    with pytest.raises(NewerManifestError, match=r"format 3; this zerda reads 2"):
        dataset_files(LocalFileSystem(), str(output))
    (output / "_manifest.json").write_text(json.dumps({**manifest, "output": []}), encoding="utf-8")
    assert dataset_files(LocalFileSystem(), str(output)).foreign == ()
