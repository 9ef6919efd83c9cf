"""``zerda-report --verify`` (issue 24): a byte flipped inside a data page of a committed chunk file keeps its
size and footer, so a run (and an incremental one, which keeps the file) cannot see it; zerda writes a CRC per
page, and --verify reads every file whole against them and the manifest: exit 1 naming the file, 0 when intact."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.rechunk import main as rechunk_main
from pipelines.report import main as report_main
from pipelines.schema import CHUNK_SCHEMA


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
    manifest_path = output / "_manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    entry = next(e for e in manifest["output"]["files"] if e["path"].startswith("density_bucket="))
    entry["rows"] += 1
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
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
