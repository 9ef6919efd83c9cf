"""What zerda prints to a terminal cannot act on it (issue 24): control characters in chunk text, file names,
ids, reasons, languages, paths and error messages are shown escaped in the report, the run summary, the log
and every error line. And ``zerda-report --html`` never writes into the output it reports, nor over a file
that is not a zerda report unless ``--force``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.cli.rechunk import main as rechunk_main
from pipelines.report import main as report_main
from pipelines.settings import main as check_config
from pipelines.terminal_table import render_table, visible, visible_line
from tests.test_report import write_output

# Retitle, clear the screen, a one-character CSI, DEL, a bidi override and an isolate, a bell, a carriage return
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\x7f\u202eevil\u2066x\u2069\r"
# What a terminal acts on: C0 but newline, DEL, C1, the bidi overrides and isolates
ACTED_ON = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _hostile_output(tmp_path: Path) -> str:
    """A finished output whose chunk text, sources, languages and rejects all carry escape sequences."""
    url = write_output(str(tmp_path / "out"))
    for path in (tmp_path / "out").rglob("*.p*q*"):
        table = pq.read_table(path)
        for name in ("text", "source", "language", "reason", "message", "doc_id"):
            if name in table.column_names:
                values = [f"{value}{HOSTILE}" for value in table.column(name).to_pylist()]
                table = table.set_column(table.column_names.index(name), name, pa.array(values, pa.string()))
        pq.write_table(table, path)
    manifest_path = tmp_path / "out" / "_manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["fingerprint"] = f"f{HOSTILE}"
    manifest["versions"]["zerda"] = f"0.1{HOSTILE}"
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return url


def test_visible_escapes_every_control_character_and_keeps_the_rest() -> None:
    assert visible(HOSTILE + "\n") == r"\x1b]0;pwned\x07\x1b[2J\x9b31m\x7f\u202eevil\u2066x\u2069\x0d" + "\n"
    assert visible_line("a\nb") == r"a\x0ab"
    kept = "Arabic مقال, emoji 👩‍💻, accents é, box ─│█, tab-free text"
    assert visible(kept) == kept
    assert not ACTED_ON.search(visible("".join(map(chr, range(0x110)))).replace("\n", ""))


def test_table_columns_stay_aligned_with_escaped_cells() -> None:
    lines = render_table(["name", "n"], [[f"a{HOSTILE}", 1], ["b", 22]]).splitlines()
    assert len({len(line) for line in lines}) == 1  # every line as wide: escapes measured, not raw characters


def test_the_report_shows_escape_sequences_and_never_prints_them(tmp_path: Path, capsys) -> None:
    url = _hostile_output(tmp_path)
    assert report_main([url]) == 0
    out = capsys.readouterr().out
    assert not ACTED_ON.search(out), repr(ACTED_ON.search(out))
    assert r"\x1b]0;pwned\x07" in out  # shown, so a reader sees what the corpus holds
    for section in ("Sources", "Rejects by reason", "Languages", "Sample chunks", "Rejects by file"):
        block = out.split(f"\n{section}\n", 1)[1].split("\n\n", 1)[0]
        assert r"\u202eevil" in block, section


def test_error_lines_of_both_commands_are_escaped(tmp_path: Path, capsys) -> None:
    hostile = tmp_path / f"o{HOSTILE.replace(chr(0), '')}ut"
    assert report_main([str(hostile)]) == 2
    assert rechunk_main(["--config", str(hostile / "run.yaml"), "--output", str(tmp_path / "x")]) == 2
    assert check_config([str(hostile / "run.yaml")]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 3 and all(r"\x1b]0;pwned" in line for line in lines), err
    assert not ACTED_ON.search(err.replace("\n", "")), err


def test_the_run_summary_and_log_are_escaped(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / f"a{HOSTILE}.txt").write_text("A sentence of plain text for the chunker to cut. " * 4, encoding="utf-8")
    (corpus / f"e{HOSTILE}.txt").write_text("", encoding="utf-8")  # a reject naming its file
    output = tmp_path / f"out{HOSTILE}"
    assert rechunk_main(["--input", str(corpus), "--output", str(output)]) == 0
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert not ACTED_ON.search(stream.replace("\n", "")), repr(stream[:2000])
    assert r"out\x1b]0;pwned" in captured.out  # the summary names the output


# --html


@pytest.fixture
def output(tmp_path: Path) -> Path:
    return Path(write_output(str(tmp_path / "out")))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("target", ["_manifest.json", "report.html", "density_bucket=1/page.html"])
def test_html_is_never_written_inside_the_output(output: Path, target: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "alias").symlink_to(output, target_is_directory=True)
    before = _snapshot(output)
    for page in (output / target, tmp_path / "alias" / target):
        for force in ([], ["--force"]):
            assert report_main([str(output), "--html", str(page), *force]) == 2
            captured = capsys.readouterr()
            assert "is inside the output being reported" in captured.err and not captured.out
    assert _snapshot(output) == before


def test_html_overwrites_another_file_only_with_force(output: Path, tmp_path: Path, capsys) -> None:
    notes = tmp_path / "notes.html"
    notes.write_text("<p>my own notes</p>", encoding="utf-8")
    assert report_main([str(output), "--html", str(notes)]) == 2
    captured = capsys.readouterr()
    assert "exists and is not a zerda report" in captured.err and "--force" in captured.err and not captured.out
    assert notes.read_text(encoding="utf-8") == "<p>my own notes</p>"
    assert report_main([str(output), "--html", str(notes), "--force"]) == 0
    assert 'content="zerda-report"' in notes.read_text(encoding="utf-8")


def test_html_replaces_a_previous_report_and_writes_a_new_path(output: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert report_main([str(output), "--html", str(page)]) == 0
    first = page.read_text(encoding="utf-8")
    page.write_text(first.replace("zerda report", "zerda report (old)", 1), encoding="utf-8")
    assert report_main([str(output), "--html", str(page)]) == 0  # a previous report: replaced without --force
    assert page.read_text(encoding="utf-8") == first


def test_worker_processes_log_lines_are_escaped(tmp_path: Path) -> None:
    """A local worker process logs through the handler its ``sitecustomize`` sets up (as the DirectRunner's
    workers start): a file name's escape sequences in its line are shown, not acted on."""
    import os
    import subprocess
    import sys

    from tests.common import REPO

    settings = {"format": "%(levelname)s %(name)s: %(message)s", "beam": "ERROR", "zerda": "INFO"}
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "pipelines" / "cli" / "worker_site"),
        "ZERDA_WORKER_LOG": json.dumps(settings),
    }
    code = "import logging, sys; logging.getLogger('pipelines.input.source').warning('cannot read %s', sys.argv[1])"
    done = subprocess.run(
        [sys.executable, "-c", code, f"a{HOSTILE}.jsonl"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert r"cannot read a\x1b]0;pwned" in done.stderr, done.stderr
    assert not ACTED_ON.search(done.stderr.replace("\n", "")), repr(done.stderr)
