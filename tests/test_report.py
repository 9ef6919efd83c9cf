"""The report: read back a finished output (built here with pyarrow, not by the pipeline) and show it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.output.schema import CHUNK_SCHEMA, REJECT_SCHEMA
from pipelines.report import load_report, main, percentile, render_html, render_svg_histogram
from pipelines.terminal_table import bucket_label, render_histogram, render_table
from tests.browser import png_pixels, screenshot
from tests.common import REPO

# bucket -> documents, each (doc_id, language, chunk sizes)
DOCUMENTS = {
    1: [("story/a", "en", [1400, 1200, 300]), ("story/b", "en", [1000])],
    3: [("مقال/c", "ar", [600, 500])],
    7: [("code/d", "en", [150] * 8), ("code/e", "mixed", [120, 130])],
}
REJECTS = ["empty", "empty", "invalid_json"]
REJECT_SOURCES = ["corpus.jsonl", "corpus.jsonl", "bad.jsonl"]


def source_of(bucket: int) -> str:
    return "code.jsonl" if bucket == 7 else "corpus.jsonl"


def chunk_rows(bucket: int) -> list[dict]:
    rows = []
    for record, (doc_id, language, sizes) in enumerate(DOCUMENTS[bucket], start=1):
        start = 0
        for index, size in enumerate(sizes):
            rows.append(
                {
                    "chunk_id": f"{doc_id}#{index}",
                    "doc_id": doc_id,
                    "source": source_of(bucket),
                    "record": record,
                    "chunk_index": index,
                    "text": f"{doc_id} chunk {index} " + "x" * (size - len(f"{doc_id} chunk {index} ")),
                    "char_count": size,
                    "start_char": start,
                    "end_char": start + size,
                    "density": bucket / 10 + 0.05,
                    "target_size": 500,
                    "chunk_type": "ADAPTIVE",
                    "language": language,
                    "config_fingerprint": "0123456789abcdef",
                    "keywords": None,
                }
            )
            start += size
    return rows


def manifest() -> dict:
    chunks = {str(b): sum(len(sizes) for _, _, sizes in docs) for b, docs in DOCUMENTS.items()}
    return {
        "format": 1,
        "fingerprint": "0123456789abcdef",
        "settings": {"output": {"bucket_width": 0.1}},
        "inputs": [{"source": "corpus.jsonl", "bytes": 20000, "records": 8, "error": None}],
        "counts": {
            "files_read": 1,
            "records_read": 8,
            "documents_chunked": 5,
            "rejects": {"empty": 2, "invalid_json": 1},
            "chunks": sum(chunks.values()),
            "chunks_by_bucket": chunks,
        },
        "timings": {"started": "2026-01-02T03:04:00+00:00", "finished": "2026-01-02T03:04:12+00:00", "seconds": 12.0},
        "versions": {"zerda": "0.1.0"},
    }


def write_output(url: str, *, success: bool = True, drop_text: bool = False) -> str:
    """A finished output as the contract describes it: Parquet per bucket, rejects, manifest, then _SUCCESS."""
    fs, root = fsspec.core.url_to_fs(url)
    for bucket in DOCUMENTS:
        table = pa.Table.from_pylist(chunk_rows(bucket), schema=CHUNK_SCHEMA)
        if drop_text:
            table = table.drop_columns(["text"])
        fs.makedirs(f"{root}/density_bucket={bucket}", exist_ok=True)
        with fs.open(f"{root}/density_bucket={bucket}/part-00000-of-00001.parquet", "wb") as f:
            pq.write_table(table, f)
    rejects = [
        {"source": src, "record": i, "doc_id": f"r{i}", "reason": r, "message": f"{r} at {i}", "excerpt": ""}
        | {"count": 1}
        for i, (r, src) in enumerate(zip(REJECTS, REJECT_SOURCES, strict=True))
    ]
    fs.makedirs(f"{root}/_rejects", exist_ok=True)
    with fs.open(f"{root}/_rejects/part-00000.pq", "wb") as f:
        pq.write_table(pa.Table.from_pylist(rejects, schema=REJECT_SCHEMA), f)
    fs.pipe(f"{root}/_manifest.json", json.dumps(manifest()).encode())
    if success:
        fs.pipe(f"{root}/_SUCCESS", b"")
    return url


@pytest.fixture
def output(tmp_path: Path) -> str:
    return write_output(str(tmp_path / "out"))


def report_text(url: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main([url]) == 0
    return capsys.readouterr().out


def table_row(text: str, first_cells: str) -> list[str]:
    """The cells of the table line that starts with ``first_cells`` (cells are separated by 2+ spaces)."""
    line = next(line for line in text.splitlines() if re.match(rf"\s*{re.escape(first_cells)}\s", line))
    return re.split(r"\s{2,}", line.strip())


# The text report


def test_bucket_rows_count_chunks_characters_documents_and_sizes(output: str, capsys) -> None:
    text = report_text(output, capsys)
    assert table_row(text, "1  0.1–0.2") == ["1", "0.1–0.2", "2", "4", "3,900", "300", "1,000", "1,400", "1,400"]
    assert table_row(text, "3  0.3–0.4") == ["3", "0.3–0.4", "1", "2", "1,100", "500", "500", "600", "600"]
    assert table_row(text, "7  0.7–0.8") == ["7", "0.7–0.8", "2", "10", "1,450", "120", "150", "150", "150"]
    assert table_row(text, "all") == ["all", "5", "16", "6,450", "120", "150", "1,400", "1,400"]
    assert not re.search(r"^\s*2\s+0\.2–0\.3", text, re.M), "empty buckets have no table row"


def test_headline_languages_and_rejects(output: str, capsys) -> None:
    text = report_text(output, capsys)
    assert "fingerprint 0123456789abcdef" in text
    assert "records read 8 · documents chunked 5 · rejected 3 · chunks 16 · characters 6,450" in text
    assert table_row(text, "en") == ["en", "3", "12", "75.00"]
    assert table_row(text, "ar") == ["ar", "1", "2", "12.50"]
    assert table_row(text, "mixed") == ["mixed", "1", "2", "12.50"]
    assert table_row(text, "empty") == ["empty", "2"]
    assert table_row(text, "invalid_json") == ["invalid_json", "1"]


def histogram(text: str) -> dict[str, tuple[float, int]]:
    """Density label -> (bar length in cells, count) from the printed histogram."""
    bars = {}
    for label, bar, count in re.findall(r"^\s*(\d\.\d–\d\.\d) │([█▏▎▍▌▋▊▉]*)\s*([\d,]+)$", text, re.M):
        eighths = 8 * bar.count("█") + sum(" ▏▎▍▌▋▊▉".index(c) for c in bar if c != "█")
        bars[label] = (eighths / 8, int(count.replace(",", "")))
    return bars


def test_histogram_draws_a_bar_per_bucket_proportional_to_chunks(output: str, capsys) -> None:
    bars = histogram(report_text(output, capsys))
    assert list(bars) == ["0.1–0.2", "0.2–0.3", "0.3–0.4", "0.4–0.5", "0.5–0.6", "0.6–0.7", "0.7–0.8"]
    assert bars["0.7–0.8"] == (40, 10)
    assert bars["0.1–0.2"] == (16, 4)
    assert bars["0.3–0.4"] == (8, 2)
    assert bars["0.5–0.6"] == (0, 0)


def test_reads_only_the_columns_it_needs(tmp_path: Path, capsys) -> None:
    """No ``text`` column at all gives the same report but for the samples: only they read it."""
    full = report_text(write_output(str(tmp_path / "full")), capsys)
    lean = report_text(write_output(str(tmp_path / "lean"), drop_text=True), capsys)
    assert full.split("\n", 1)[1].split("Sample chunks")[0] == lean.split("\n", 1)[1].split("Sample chunks")[0]
    assert lean.endswith("Sample chunks\n(none)\n")


def test_sources_count_documents_chunks_characters_and_rejects(output: str, capsys) -> None:
    text = report_text(output, capsys).split("\nSources\n", 1)[1]
    assert table_row(text, "corpus.jsonl") == ["corpus.jsonl", "3", "6", "5,000", "2"]
    assert table_row(text, "code.jsonl") == ["code.jsonl", "2", "10", "1,450", "0"]
    assert table_row(text, "bad.jsonl") == ["bad.jsonl", "0", "0", "0", "1"]


def test_many_sources_are_listed_up_to_a_limit_then_summed(tmp_path: Path, capsys) -> None:
    out = write_output(str(tmp_path / "out"))
    rows = [{**row, "source": f"f{i:03d}.jsonl"} for i, row in enumerate(chunk_rows(7) * 3)]
    pq.write_table(pa.Table.from_pylist(rows, schema=CHUNK_SCHEMA), f"{out}/density_bucket=7/part-extra.parquet")
    report = load_report(out)
    assert len(report.sources) == 3 + 30
    text = report_text(out, capsys).split("\nSources\n", 1)[1].split("\n\n")[0]
    listed = [line for line in text.splitlines()[2:] if not line.startswith("…")]
    assert len(listed) == 20
    rest = report.sources[20:]
    assert table_row(text, f"… {len(rest)} more sources")[1:] == [
        str(sum(s.documents for s in rest)),
        str(sum(s.chunks for s in rest)),
        f"{sum(s.characters for s in rest):,}",
        str(sum(s.rejects for s in rest)),
    ]


def test_rejects_by_file_with_their_reasons(output: str, capsys) -> None:
    text = report_text(output, capsys).split("\nRejects by file\n", 1)[1]
    assert table_row(text, "corpus.jsonl") == ["corpus.jsonl", "2", "empty 2", "empty at 0"]
    assert table_row(text, "bad.jsonl") == ["bad.jsonl", "1", "invalid_json 1", "invalid_json at 2"]


def test_sample_chunks_of_every_bucket(output: str, capsys) -> None:
    text = report_text(output, capsys).split("\nSample chunks\n", 1)[1]
    headings = [line for line in text.splitlines() if line.startswith("bucket ")]
    assert headings == [
        "bucket 1 (0.1–0.2) · corpus.jsonl · record 1 · chunk 0 · en · 1,400 characters",
        "bucket 1 (0.1–0.2) · corpus.jsonl · record 2 · chunk 0 · en · 1,000 characters",
        "bucket 3 (0.3–0.4) · corpus.jsonl · record 1 · chunk 0 · ar · 600 characters",
        "bucket 7 (0.7–0.8) · code.jsonl · record 1 · chunk 0 · en · 150 characters",
        "bucket 7 (0.7–0.8) · code.jsonl · record 2 · chunk 0 · mixed · 120 characters",
    ]
    assert "    story/a chunk 0 xxx" in text and "…" in text  # cut to a few hundred characters
    assert max(len(line) for line in text.splitlines() if line.startswith("    ")) <= 4 + 281


def test_files_outside_the_bucket_folders_are_not_counted(output: str) -> None:
    stray = Path(output) / "beam-temp-123" / "part-0.parquet"
    stray.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(chunk_rows(1), schema=CHUNK_SCHEMA), stray)
    assert load_report(output).stats().chunks == 16


def test_an_output_of_rejects_only_still_reports(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "_manifest.json").write_text(json.dumps(manifest()))
    (out / "_SUCCESS").write_text("")
    text = report_text(str(out), capsys)
    assert table_row(text, "all") == ["all", "0", "0", "0", "–", "–", "–", "–"]
    assert "(no chunks)" in text
    assert "No chunks." in render_html(load_report(str(out)))


def test_memory_url(capsys) -> None:
    url = write_output(f"memory://zerda-report-{uuid.uuid4().hex}/out")
    try:
        text = report_text(url, capsys)
    finally:
        fsspec.filesystem("memory").rm(url.removeprefix("memory://").split("/")[0], recursive=True)
    assert table_row(text, "7  0.7–0.8")[3] == "10"


# Refusals


def test_refuses_an_output_without_success(tmp_path: Path, capsys) -> None:
    url = write_output(str(tmp_path / "out"), success=False)
    assert main([url]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "_SUCCESS" in captured.err and "partial" in captured.err


def test_refuses_a_missing_directory(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_refuses_success_without_manifest(tmp_path: Path, capsys) -> None:
    (tmp_path / "_SUCCESS").write_text("")
    assert main([str(tmp_path)]) == 2
    assert "_manifest.json" in capsys.readouterr().err


def listing(url: str) -> str:
    """``write_output``'s output with its files listed in the manifest, path and size, as the commit writes them."""
    root = Path(url)
    files = sorted(f for f in root.rglob("*") if f.is_file() and not f.name.startswith("_"))
    entries = [{"path": f.relative_to(root).as_posix(), "rows": 0, "bytes": f.stat().st_size} for f in files]
    (root / "_manifest.json").write_text(json.dumps({**manifest(), "output": {"root": url, "files": entries}}))
    return url


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a refused report: exit code 2, nothing on stdout, no traceback."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("zerda-report: "), captured.err
    assert "Traceback" not in captured.err
    return captured.err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{bad", "not zerda's JSON"),
        ("", "not zerda's JSON"),
        ("[1, 2]", "its JSON is an array, not an object"),
        ("null", "its JSON is null, not an object"),
        ('{"counts": 5}', "'counts' is not an object"),
        ('{"settings": {"output": {"bucket_width": 0}}}', "bucket_width 0 is not a number in [0.001, 1]"),
        ('{"settings": {"output": []}}', "'settings.output' is not an object"),
        ('{"timings": {"seconds": "soon"}}', "timings.seconds is not a number"),
        ('{"output": {"files": [{"path": "../../etc/passwd"}]}}', "output.files is not a list of files"),
    ],
)
def test_refuses_a_manifest_that_is_not_zerdas(output: str, content: str, says: str, capsys) -> None:
    (Path(output) / "_manifest.json").write_text(content)
    assert says in refusal([output], capsys)


@pytest.mark.parametrize("verify", [[], ["--verify"]])
def test_refuses_a_manifest_of_a_newer_format_naming_both(output: str, verify: list[str], capsys) -> None:
    """A newer zerda's output is not read on a guess (its keys may mean otherwise), by the report or --verify."""
    listing(output)
    path = Path(output) / "_manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 3}))
    said = refusal([*verify, output], capsys)
    assert "written by a newer zerda (format 3; this zerda reads 2)" in said, said


def test_refuses_an_output_missing_or_changing_a_file_its_manifest_lists(output: str, capsys) -> None:
    listing(output)
    part = Path(output) / "density_bucket=3" / "part-00000-of-00001.parquet"
    kept = part.read_bytes()
    part.unlink()  # a partial copy: the report used to sum the buckets that were left, with exit code 0
    err = refusal([output], capsys)
    assert "incomplete: 1 file(s) its manifest lists are gone or changed (e.g. density_bucket=3/part-" in err
    part.write_bytes(kept[: len(kept) // 2])  # cut short
    assert "incomplete" in refusal([output], capsys)
    part.write_bytes(kept)
    assert main([output]) == 0


def test_counts_only_the_files_its_manifest_lists(output: str) -> None:
    listing(output)
    stray = Path(output) / "density_bucket=1" / "part-99999.parquet"  # another run's file, copied in by hand
    pq.write_table(pa.Table.from_pylist(chunk_rows(1), schema=CHUNK_SCHEMA), stray)
    assert load_report(output).stats().chunks == 16


def test_a_broken_parquet_file_is_one_line(output: str, capsys) -> None:
    part = Path(output) / "density_bucket=7" / "part-00000-of-00001.parquet"
    part.write_bytes(b"\0" * part.stat().st_size)  # same size: only reading it can tell
    listing(output)
    assert "cannot read the output" in refusal([output], capsys)


def test_a_file_or_an_unknown_filesystem_is_one_line(output: str, capsys) -> None:
    assert "is a file, not an output folder" in refusal([f"{output}/_manifest.json"], capsys)
    assert "Protocol not known" in refusal(["notes::nosuchfs"], capsys)


def test_credentials_in_the_url_stay_out_of_the_error(monkeypatch, capsys) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    err = refusal(["s3://AKIAEXAMPLEKEY00000:wJalrXUtnFEMIsecret@bucket/out"], capsys)
    assert "AKIAEXAMPLEKEY00000" not in err and "wJalrXUtnFEMIsecret" not in err


def test_an_html_page_that_cannot_be_written_is_one_line_and_prints_nothing(output: str, tmp_path, capsys) -> None:
    assert "cannot write --html" in refusal([output, "--html", str(tmp_path)], capsys)


# The shared rendering helpers


def test_percentile_is_nearest_rank_over_a_size_histogram() -> None:
    sizes = Counter({100: 1, 200: 2, 900: 1})
    assert [percentile(sizes, p) for p in (5, 25, 50, 75, 95, 100)] == [100, 100, 200, 200, 900, 900]
    assert percentile(Counter(), 50) is None


def test_render_table_aligns_numbers_right_and_text_left() -> None:
    lines = render_table(["reason", "records"], [["empty", 1234], ["invalid_json", 5]]).splitlines()
    assert lines == [
        "reason        records",
        "────────────  ───────",
        "empty           1,234",
        "invalid_json        5",
    ]


def test_render_histogram_takes_manifest_keys_and_any_bucket_width() -> None:
    text = render_histogram({"0": 2, "2": 1}, 8, bucket_width=0.05)
    assert text.splitlines() == ["0.00–0.05 │████████ 2", "0.05–0.10 │         0", "0.10–0.15 │████     1"]
    assert bucket_label(9, 0.1) == "0.9–1.0"
    assert bucket_label(3, 0.3) == "0.9–1.0", "the last bucket stops at density 1"
    assert render_histogram({}, 10) == "(no chunks)"


def test_a_tiny_count_still_gets_a_visible_bar() -> None:
    assert "│▏" in render_histogram({0: 1, 1: 10_000}, 10)


# The HTML page


def test_html_page_is_self_contained_and_holds_the_numbers(output: str) -> None:
    page = render_html(load_report(output))
    assert "<svg" in page and "<style>" in page
    assert not re.search(r"<script|<link|<img|@import|url\(", page)
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"], "only the SVG namespace"
    for label, count in [("0.1–0.2", 4), ("0.3–0.4", 2), ("0.7–0.8", 10)]:
        assert f"{label}: {count:,} chunks" in page
    assert "<td class=num>3,900</td>" in page and "<td class=num>6,450</td>" in page
    assert "invalid_json" in page
    assert "<td>bad.jsonl</td><td class=num>1</td><td>invalid_json 1</td><td>invalid_json at 2</td>" in page
    assert page.count("<figure class=sample>") == 5 and '<blockquote dir="auto">مقال/c chunk 0' in page


def test_svg_histogram_thins_labels_when_buckets_are_many() -> None:
    svg = render_svg_histogram({bucket: bucket + 1 for bucket in range(50)}, bucket_width=0.02)
    assert svg.count("<rect") == 50 and "0.98–1.00: 50 chunks" in svg, "every bar, each with its tooltip"
    labels = re.findall(r">(\d\.\d\d–\d\.\d\d)</text>", svg)
    assert 1 < len(labels) <= 12 and labels[0] == "0.00–0.02"


def test_html_escapes_the_output_name(tmp_path: Path) -> None:
    page = render_html(load_report(write_output(str(tmp_path / "<b>&out"))))
    assert "&lt;b&gt;&amp;out" in page and "<b>&out" not in page


def test_html_page_renders_in_headless_chromium(output: str, tmp_path: Path, capsys) -> None:
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    assert main([output, "--html", str(page)]) == 0
    assert f"wrote {page}" in capsys.readouterr().err
    data = screenshot(page, png, TALL)
    assert len(data) > 5_000
    width, height, pixels = png_pixels(data)
    assert (width, height) == (1200, TALL)
    top = pixels[: 900 * width]
    colours = Counter(top)
    assert len(colours) > 50, "text, bars in several colours and tables, not a blank page"
    assert colours.most_common(1)[0][1] < 0.9 * len(top)
    # below the first screen: sources, rejects by file and the sample chunks, each band with ink in it
    background = Counter(pixels).most_common(1)[0][0]
    for y in range(900, 1900, 200):
        band = pixels[y * width : (y + 200) * width]
        assert sum(p != background for p in band) > 0.05 * len(band), f"nothing drawn at y={y}"


TALL = 2400


def test_a_reader_that_stops_early_gets_no_traceback(output: str) -> None:
    """``zerda-report OUTPUT | head``: the pipe closes before the report is written."""
    command = [sys.executable, "-m", "pipelines.report", output]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line
    error = process.stderr.read()
    assert process.wait(timeout=120) == 0
    assert "Traceback" not in error and "BrokenPipe" not in error
