"""``zerda-report --verify`` (issue 24): a byte flipped inside a data page of a committed chunk file keeps its
size and footer, so a run (and an incremental one, which keeps the file) cannot see it; zerda writes a CRC per
page, and --verify reads every file whole against them and the manifest: exit 1 naming the file, 0 when intact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from pipelines.cli.rechunk import main as rechunk_main
from pipelines.output.schema import CHUNK_SCHEMA
from pipelines.report import main as report_main
from tests.output_checks import read_manifest, write_manifest

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures


def _run(tmp_path: Path, compression: str) -> Path:
    """A finished output of the sample corpus, written with ``compression``."""
    config = tmp_path / "run.yaml"
    config.write_text(f"output:\n  compression: {compression}\n", encoding="utf-8")
    output = tmp_path / "out"
    assert rechunk_main(["--output", str(output), "--config", str(config), "--quiet"]) == 0
    return output


def _verify(output: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = report_main(["--verify", str(output)])
    return code, capsys.readouterr().out


def _flip_inside_a_text_page(path: Path) -> None:
    """XOR four bytes near the end of the ``text`` column's last data page: the size and footer stay."""
    metadata = pq.read_metadata(path)
    column = next(
        metadata.row_group(0).column(i)
        for i in range(metadata.num_columns)
        if metadata.row_group(0).column(i).path_in_schema == "text"
    )
    at = column.data_page_offset + column.total_compressed_size - 24
    data = bytearray(path.read_bytes())
    size = len(data)
    for i in range(at, at + 4):
        data[i] ^= 0x01
    path.write_bytes(bytes(data))
    assert path.stat().st_size == size
    assert pq.read_metadata(path).num_rows == metadata.num_rows  # the footer a run reads is intact


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_flipped_byte_in_a_chunk_page_is_named_and_an_intact_output_verifies(
    compression: str, tmp_path: Path, capsys
) -> None:
    output = _run(tmp_path, compression)
    code, out = _verify(output, capsys)
    assert code == 0 and out.startswith(f"verified {output}: ") and "page checksums" in out, out
    damaged = sorted(output.glob("density_bucket=*/part-*.parquet"))[1]
    _flip_inside_a_text_page(damaged)
    code, out = _verify(output, capsys)
    relative = str(damaged.relative_to(output))
    assert code == 1, out
    assert out.startswith(f"damaged {output}: ")
    assert any(line.strip().startswith(f"{relative}: unreadable") for line in out.splitlines()), out
    assert "CRC" in out or "checksum" in out.lower(), out
    others = [line for line in out.splitlines()[1:] if not line.strip().startswith(relative.split("/")[0])]
    assert not others, out  # only the damaged file and its folder's count are named


def test_rows_sizes_and_unlisted_files_are_checked_against_the_manifest(tmp_path: Path, capsys) -> None:
    output = _run(tmp_path, "zstd")
    manifest = read_manifest(output)
    entry = next(e for e in manifest["output"]["files"] if e["path"].startswith("density_bucket="))
    entry["rows"] += 1
    write_manifest(output, manifest)
    stray = output / "density_bucket=0" / "extra.parquet"
    stray.parent.mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist([], schema=CHUNK_SCHEMA), stray)
    rejects = sorted(output.glob("_rejects/*.pq"))[0]
    rejects.write_bytes(rejects.read_bytes()[:-10])  # cut short: its footer is gone
    code, out = _verify(output, capsys)
    assert code == 1
    assert f"{entry['path']}: {entry['rows'] - 1:,} rows, the manifest says {entry['rows']:,}" in out, out
    assert "density_bucket=0/extra.parquet: not listed in _manifest.json" in out, out
    assert f"{rejects.relative_to(output)}: unreadable" in out, out


def test_verify_refuses_what_is_not_a_finished_output(tmp_path: Path, capsys) -> None:
    assert report_main(["--verify", str(tmp_path / "nowhere")]) == 2
    captured = capsys.readouterr()
    assert "no output at" in captured.err and not captured.out


def test_verify_and_html_are_one_or_the_other(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        report_main(["--verify", str(tmp_path), "--html", str(tmp_path / "page.html")])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "page.html").exists()


def test_an_output_whose_rejects_were_bounded_verifies(tmp_path: Path, capsys) -> None:
    """A reject flood leaves fewer reject rows than rejects (a summary row counts the rest): --verify checks
    the rows against the rows the manifest counts, not against the rejects they stand for."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text('{"text": "' + "The fennec fox sleeps by day. " * 20 + '"}\n' + "{}\n" * 9)
    config = tmp_path / "run.yaml"
    config.write_text("input:\n  max_reject_rows: 2\n", encoding="utf-8")
    output = tmp_path / "out"
    assert rechunk_main(["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet"]) == 0
    counts = json.loads((output / "_manifest.json").read_text(encoding="utf-8"))["counts"]
    assert counts["rejects"]["missing_text"] == 9 and counts["reject_rows"] == 3
    code, out = _verify(output, capsys)
    assert code == 0 and out.startswith(f"verified {output}: "), out


def test_a_listing_error_is_one_line_and_exit_2(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset folder that cannot be listed (a denied prefix) leaves nothing verified: one line, exit 2, no
    traceback (it escaped ``--verify`` whole)."""
    output = _run(tmp_path, "zstd")

    def denied(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(f"Access Denied: {path}")

    monkeypatch.setattr(LocalFileSystem, "find", denied)
    capsys.readouterr()
    assert report_main(["--verify", str(output)]) == 2
    captured = capsys.readouterr()
    assert not captured.out
    assert captured.err.startswith(f"zerda-report: cannot read the output {output}: Access Denied")
    assert captured.err.count("\n") == 1, captured.err


def test_a_file_is_opened_and_read_without_asking_its_size(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size compared with the manifest's is the opened file's: no request a file for it alone."""
    output = _run(tmp_path, "zstd")
    asked: list[str] = []
    size = LocalFileSystem.size

    def counted(self: Any, path: str) -> Any:
        asked.append(path)
        return size(self, path)

    monkeypatch.setattr(LocalFileSystem, "size", counted)
    code, out = _verify(output, capsys)
    assert code == 0 and not asked, (out, asked)
    manifest = read_manifest(output)
    entry = next(e for e in manifest["output"]["files"] if e["path"].startswith("density_bucket="))
    entry["bytes"] += 1
    write_manifest(output, manifest)
    code, out = _verify(output, capsys)
    assert code == 1 and f"{entry['path']}: {entry['bytes'] - 1:,} bytes, the manifest says {entry['bytes']:,}" in out


def test_folder_markers_on_an_object_store_are_not_unlisted_files(s3_env: S3Env, capsys) -> None:
    """A zero-byte ``density_bucket=3/`` object (the S3 console's "Create folder") is a folder, as the commit
    takes it, not a file the manifest fails to list."""
    bucket = s3_env.new_bucket()
    output = f"s3://{bucket}/out"
    assert rechunk_main(["--output", output, "--quiet"]) == 0
    for key in ["out/density_bucket=3/", "out/_rejects/"]:
        s3_env.client().put_object(Bucket=bucket, Key=key, Body=b"")
    s3_env.filesystem().invalidate_cache()
    capsys.readouterr()
    code = report_main(["--verify", output])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"verified {output}: "), out
