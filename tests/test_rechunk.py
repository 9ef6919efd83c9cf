"""The rechunk entry point end to end on the DirectRunner: in memory and in worker processes."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import apache_beam
import duckdb
import pyarrow.compute as pc
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, WorkerOptions

import zerda_core
from pipelines.cli.rechunk import _worker_logging, main, run
from pipelines.input.expand import sample_corpus_glob
from pipelines.output.manifest import footer_digest
from pipelines.report import main as report_main
from tests.common import MULTI_PROCESS, REPO
from tests.output_checks import assert_chunks_are_slices, read_chunks, read_manifest, source_texts


@pytest.fixture(scope="module")
def sample_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("sample") / "out"
    run(["--output", str(output), "--quiet"])
    return output


def test_sample_run_is_complete_and_accounted(sample_output: Path) -> None:
    manifest = read_manifest(sample_output)
    counts = manifest["counts"]
    assert (sample_output / "_SUCCESS").exists()
    assert counts["records_read"] == counts["documents_chunked"] + sum(counts["rejects"].values())
    assert counts["documents_chunked"] > 10
    table = read_chunks(sample_output)
    assert table.num_rows == counts["chunks"]
    by_bucket = table.group_by("density_bucket").aggregate([("chunk_id", "count")]).to_pylist()
    assert {str(r["density_bucket"]): r["chunk_id_count"] for r in by_bucket} == counts["chunks_by_bucket"]
    assert len(set(table["chunk_id"].to_pylist())) == table.num_rows
    assert set(table["language"].to_pylist()) >= {"en", "ar"}


def test_every_chunk_is_a_slice_of_its_source_document(sample_output: Path) -> None:
    assert_chunks_are_slices(read_chunks(sample_output), source_texts([sample_corpus_glob()]))


def test_output_reads_in_duckdb_with_the_partition_column(sample_output: Path) -> None:
    glob = f"{sample_output}/**/*.parquet"
    rows = duckdb.sql(
        f"SELECT density_bucket, count(*) AS n, min(density) AS lo, max(density) AS hi "
        f"FROM read_parquet('{glob}', hive_partitioning=true) GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert rows
    for bucket, n, lo, hi in rows:
        assert n > 0 and bucket / 10 <= lo <= hi <= (bucket + 1) / 10


def test_rejects_say_where_the_record_was(sample_output: Path) -> None:
    rejects = duckdb.sql(f"SELECT * FROM read_parquet('{sample_output}/_rejects/*')").fetchall()
    manifest = read_manifest(sample_output)
    assert len(rejects) == sum(manifest["counts"]["rejects"].values()) > 0
    described = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{sample_output}/_rejects/*')").fetchall()
    columns = [c[0] for c in described]
    assert columns == ["source", "record", "doc_id", "reason", "message", "excerpt", "count"]


def test_a_run_without_rejects_writes_an_empty_rejects_file_the_documented_query_reads(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The river rises in the hills and runs to the sea. " * 8, encoding="utf-8")
    output = tmp_path / "out"
    assert main(["--input", str(corpus), "--output", str(output)]) == 0
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{output}/_rejects/*')").fetchall() == [(0,)]
    described = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{output}/_rejects/*')").fetchall()
    assert [c[0] for c in described] == ["source", "record", "doc_id", "reason", "message", "excerpt", "count"]
    manifest = read_manifest(output)
    (entry,) = [e for e in manifest["output"]["files"] if e["path"].startswith("_rejects/")]
    with (output / entry["path"]).open("rb") as f:
        footer = footer_digest(f)
    assert entry == {
        "path": entry["path"],
        "rows": 0,
        "bytes": (output / entry["path"]).stat().st_size,
        "footer": footer,
    }
    assert sum(manifest["counts"]["rejects"].values()) == 0


def test_multi_processing_rerun_replaces_output_with_identical_rows(
    sample_output: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    output = tmp_path / "out"
    run(["--output", str(output), "--quiet", "--config", str(REPO / "configs/default.yaml")])
    first_files = sorted(p.relative_to(output) for p in output.rglob("*.parquet"))
    run(["--output", str(output), "--quiet", *MULTI_PROCESS])
    table = read_chunks(output)
    expected = read_chunks(sample_output)
    assert sorted(table["chunk_id"].to_pylist()) == sorted(expected["chunk_id"].to_pylist())
    assert sorted(table["text"].to_pylist()) == sorted(expected["text"].to_pylist())
    manifest = read_manifest(output)
    listed = sorted(Path(f["path"]) for f in manifest["output"]["files"] if f["path"].endswith(".parquet"))
    assert sorted(p.relative_to(output) for p in output.rglob("*.parquet")) == listed
    assert first_files, "the first run wrote files"
    assert not (output / "_staging").exists()


def test_keywords_column_when_enrichment_is_on(tmp_path: Path) -> None:
    config = tmp_path / "enrich.yaml"
    config.write_text("enrich:\n  keywords: true\n  top_k: 3\n", encoding="utf-8")
    output = tmp_path / "out"
    run(["--input", str(REPO / "tests/data"), "--output", str(output), "--config", str(config), "--quiet"])
    keywords = read_chunks(output)["keywords"].to_pylist()
    assert keywords and all(0 < len(k) <= 3 for k in keywords)
    assert all(set(k[0]) == {"term", "score"} for k in keywords)


def test_section_density_scope_fills_local_density_and_markdown_chunks_their_section(
    tmp_path: Path, sample_output: Path
) -> None:
    config = tmp_path / "section.yaml"
    config.write_text("chunking:\n  density_scope: section\n", encoding="utf-8")
    output = tmp_path / "out"
    run(["--input", str(REPO / "tests/data"), "--output", str(output), "--config", str(config), "--quiet"])
    table = read_chunks(output)
    local = table["local_density"].to_pylist()
    assert local and all(0.0 <= d <= 1.0 for d in local)
    sections = set(table.filter(pc.equal(table["doc_id"], "guide.md"))["section"].to_pylist())
    assert "Deploying the ingestion API > Configuration" in sections
    assert set(read_chunks(sample_output)["local_density"].to_pylist()) == {None}, "document scope: no local density"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "/nonexistent/zerda/*.jsonl"], "matches no file"),
        (["--config", "/nonexistent/zerda.yaml"], "cannot read config"),
        (["--config", "BAD_CONFIG"], "chunking.overlap"),
        (["--output", "A_FILE"], "file"),
    ],
)
def test_bad_usage_exits_2_and_writes_nothing(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_config = tmp_path / "bad.yaml"
    bad_config.write_text("chunking:\n  overlap: -1\n", encoding="utf-8")
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory", encoding="utf-8")
    output = tmp_path / "out"
    args = [str(bad_config) if a == "BAD_CONFIG" else str(a_file) if a == "A_FILE" else a for a in args]
    full = ["--input", str(REPO / "tests/data"), *([] if "--output" in args else ["--output", str(output)]), *args]
    assert main(full) == 2
    assert message in capsys.readouterr().err
    assert not output.exists()
    assert a_file.read_text(encoding="utf-8") == "not a directory"


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--input", "--output", "--config", "--quiet", "--verbose", "--runner"):
        assert option in out


def test_version_prints_zerdas_version_and_touches_nothing(tmp_path: Path, capsys) -> None:
    # It used to be refused as an unknown option, "did you mean --spark_version?"
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["--output", str(output), "--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"zerda-rechunk {zerda_core.__version__}\n"
    assert not output.exists()
    with pytest.raises(SystemExit) as exit_info:
        report_main(["--version"])
    assert (exit_info.value.code, capsys.readouterr().out) == (0, f"zerda-report {zerda_core.__version__}\n")


def test_summary_tells_counts_buckets_and_how_to_query(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "out"
    manifest = run(["--input", str(REPO / "tests/data"), "--output", str(output)])
    out = capsys.readouterr().out
    counts = manifest["counts"]
    header = next(line for line in out.splitlines() if line.startswith("records read"))
    values = out.splitlines()[out.splitlines().index(header) + 2].split()
    assert values[:4] == [str(counts["records_read"]), str(counts["documents_chunked"]), "1", str(counts["chunks"])]
    assert "not_text" in out
    for bucket, n in counts["chunks_by_bucket"].items():
        assert f"0.{bucket}–" in out and str(n) in out
    assert f"output:  {output}" in out
    assert f"report:  zerda-report {output}" in out
    query = out.split("query:", 1)[1].strip()
    assert duckdb.sql(query).fetchall()


def test_summary_counts_text_read_and_overlap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """MB/s is text characters chunked per second (not compressed bytes on disk); overlap is told apart."""
    output = tmp_path / "out"
    manifest = run(["--input", str(REPO / "tests/data"), "--output", str(output)])
    out = capsys.readouterr().out
    counts = manifest["counts"]
    texts = {p.name: p.read_text(encoding="utf-8") for p in (REPO / "tests/data").iterdir() if p.suffix != ".sql"}
    assert counts["text_chars"] == sum(len(text.rstrip()) for text in texts.values())
    rows = duckdb.sql(
        f"SELECT doc_id, start_char, end_char FROM read_parquet('{output}/**/*.parquet') ORDER BY doc_id, start_char"
    ).fetchall()
    overlap = sum(max(0, a[2] - b[1]) for a, b in itertools.pairwise(rows) if a[0] == b[0])
    assert counts["overlap_chars"] == overlap > 0
    header = next(line for line in out.splitlines() if line.startswith("records read"))
    assert header.split()[-2:] == ["text", "MB/s"]
    speed = float(out.splitlines()[out.splitlines().index(header) + 2].split()[-1])
    assert speed == round(counts["text_chars"] / 1e6 / manifest["timings"]["seconds"], 2)
    chunk_chars = sum(counts["chars_by_bucket"].values())
    assert f"{counts['text_chars']:,} characters chunked into chunks holding {chunk_chars:,}" in out
    assert f"{overlap:,} ({overlap / chunk_chars:.1%}) of those are overlap" in out


def test_report_on_a_real_output_agrees_with_the_manifest(
    sample_output: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_main([str(sample_output)]) == 0
    out = capsys.readouterr().out
    counts = read_manifest(sample_output)["counts"]
    rejected = sum(counts["rejects"].values())
    assert f"rejected {rejected}" in out and f"chunks {counts['chunks']:,}" in out
    rejects_table = out.split("Rejects by reason", 1)[1]
    for reason, n in counts["rejects"].items():
        if n:
            assert re.search(rf"^{reason}\s+{n}$", rejects_table, flags=re.M), reason


@pytest.mark.parametrize(
    ("flag", "expect_summary", "expect_in_log", "not_in_log"),
    [
        ("--quiet", False, [], ["INFO", "WARNING"]),
        (None, True, ["INFO zerda: reading"], ["DEBUG"]),
        ("--verbose", True, ["INFO zerda: reading", "DEBUG"], []),
    ],
)
def test_quiet_and_verbose(
    flag: str | None,
    expect_summary: bool,
    expect_in_log: list[str],
    not_in_log: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--input", str(REPO / "tests/data"), "--output", str(tmp_path / "out")]
    assert main(args + ([flag] if flag else [])) == 0
    out, err = capsys.readouterr()
    assert ("records read" in out) is expect_summary
    for text in expect_in_log:
        assert text in err
    for text in not_in_log:
        assert text not in err


@pytest.mark.parametrize(
    ("flags", "progress_expected"), [(["--quiet"], False), (["--progress-seconds", "0.001"], True)]
)
def test_worker_processes_log_like_the_launcher(flags: list[str], progress_expected: bool, tmp_path: Path) -> None:
    """Beam's worker start-up chatter stays out of the terminal (it printed "apitools not found" and "Logging
    handler created." from each worker, in Python's default format, even with --quiet); zerda's progress lines
    from workers do not."""
    command = [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(REPO / "tests/data/english_prose.txt")]
    command += ["--output", str(tmp_path / "out"), *flags, *MULTI_PROCESS]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=True)
    assert "Pipeline_options" not in done.stderr and "sdk harness" not in done.stderr
    assert "semi_persistent_directory" not in done.stderr
    assert ("zerda.progress" in done.stderr) is progress_expected
    if "--quiet" in flags:
        assert done.stderr == ""  # nothing but errors, and there were none
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO"
    assert all(re.match(rf"{stamp} ", line) for line in done.stderr.splitlines()), done.stderr  # one format
    zerda_lines = [line for line in done.stderr.splitlines() if "zerda" in line]
    assert all(re.match(rf"{stamp} zerda(\.progress)?: ", line) for line in zerda_lines), zerda_lines
    if progress_expected:  # the launcher's line and the workers' progress lines, one format
        assert any(re.match(rf"{stamp} zerda: reading the files of 1 input", line) for line in zerda_lines)
        assert any(re.match(rf"{stamp} zerda.progress: progress \(pid \d+\): 1 files", line) for line in zerda_lines)


def test_the_direct_runner_never_hands_the_job_to_prism(tmp_path: Path) -> None:
    """Beam's DirectRunner runs a pipeline on Prism when it finds the binary in its cache (or downloads it):
    a machine that once ran Beam online has it. zerda's job stays on the FnApiRunner the tests exercise."""
    name, called = f"apache_beam-v{apache_beam.__version__}-prism-linux-amd64", tmp_path / "prism-was-run"
    fake = tmp_path / name
    fake.write_text(f'#!/bin/sh\necho "$@" > {called}\nexit 1\n')
    fake.chmod(0o755)
    cache = tmp_path / "home/.apache_beam/cache/prism/bin"
    cache.mkdir(parents=True)
    with zipfile.ZipFile(cache / f"{name}.zip", "w") as bundle:
        bundle.write(fake, name)
    command = [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(REPO / "tests/data/english_prose.txt")]
    command += ["--output", str(tmp_path / "out"), "--quiet", *MULTI_PROCESS]
    env = {**os.environ, "HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not called.exists(), "the job started Prism"
    assert "prism" not in done.stderr.lower(), done.stderr[-3000:]
    assert read_manifest(tmp_path / "out")["counts"]["documents_chunked"] == 1


@pytest.mark.parametrize("runner", [["--runner", "PortableRunner"], ["--runner=PortableRunner"]])
def test_worker_logging_leaves_other_runners_alone(runner: list[str]) -> None:
    options = PipelineOptions(runner)
    assert _worker_logging(options, quiet=True, verbose=False) is None
    assert options.view_as(WorkerOptions).default_sdk_harness_log_level is None


def test_worker_logging_on_the_direct_runner_keeps_a_level_the_user_gave() -> None:
    chosen = PipelineOptions(["--default_sdk_harness_log_level=INFO"])
    assert _worker_logging(chosen, quiet=True, verbose=False) is None
    assert chosen.view_as(WorkerOptions).default_sdk_harness_log_level == "INFO"
    options = PipelineOptions([])
    assert _worker_logging(options, quiet=True, verbose=False) == ("ERROR", "ERROR")
    quiet = options.view_as(WorkerOptions)
    assert quiet.default_sdk_harness_log_level == "ERROR"
    assert quiet.sdk_harness_log_level_overrides == {"zerda": "ERROR", "pipelines": "ERROR"}


def test_a_run_that_chunks_nothing_says_why_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    page = "<p>" + (REPO / "tests/data/english_prose.txt").read_text(encoding="utf-8") + "</p>"
    (corpus / "page.html").write_text(page, encoding="utf-8")
    (corpus / "notes.xml").write_text("<notes>" + "word " * 200 + "</notes>", encoding="utf-8")
    output = tmp_path / "out"
    assert main(["--input", str(corpus), "--output", str(output)]) == 1
    err = capsys.readouterr().err
    assert "zerda: error: read 2 file(s) and 2 record(s) but chunked none (rejects: 2 not_text)" in err
    assert f"{output}/_rejects/" in err and "input.formats" in err
    assert read_manifest(output)["counts"]["rejects"]["not_text"] == 2  # the rejects are there to look at

    config = tmp_path / "formats.yaml"
    config.write_text("input:\n  formats: {.HTML: text}\n", encoding="utf-8")
    assert main(["--input", str(corpus), "--output", str(output), "--config", str(config)]) == 0
    manifest = read_manifest(output)
    assert manifest["counts"]["documents_chunked"] == 1 and manifest["counts"]["rejects"]["not_text"] == 1
    table = read_chunks(output)
    assert set(table["doc_id"].to_pylist()) == {"page.html"}
    assert_chunks_are_slices(table, {(str(corpus / "page.html"), 0): page})


PROSE = "A short paragraph of plain prose, long enough to be chunked. " * 20
UNKNOWN_TYPE_HINT = "a file type zerda does not know can be read as text with input.formats in the config"


@pytest.mark.parametrize(
    ("files", "hints"),
    [
        ({"a.txt": PROSE.encode("utf-16")}, ["UTF-16 file(s): convert them to UTF-8 (iconv -f UTF-16 -t UTF-8)"]),
        ({"a.jsonl": ("\n" + PROSE).encode("utf-32")}, ["UTF-32 file(s): convert them to UTF-8 (iconv -f UTF-32"]),
        ({"a.txt": b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)) * 4}, ["binary file(s) matched the input"]),
        ({"a.jsonl": b'{"text": "a text with a \\u0000 in it"}\n'}, ["NUL characters (U+0000)"]),
        (
            {"a.html": PROSE.encode(), "b.txt": PROSE.encode("utf-16-le").join([b"\xff\xfe", b""])},
            ["UTF-16 file(s)", UNKNOWN_TYPE_HINT],
        ),
    ],
    ids=["utf-16", "utf-32", "binary", "nul-in-json", "unknown-and-utf-16"],
)
def test_a_run_that_chunks_nothing_hints_at_the_cause_of_its_not_text_rejects(
    files: dict[str, bytes], hints: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The input.formats hint only for an unknown file type: a UTF-16 file needs iconv, a binary one a narrower glob."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, data in files.items():
        (corpus / name).write_bytes(data)
    output = tmp_path / "out"
    assert main(["--input", str(corpus), "--output", str(output)]) == 1
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if line.startswith("zerda: error: "))
    assert f"chunked none (rejects: {len(files)} not_text)" in line
    for hint in hints:
        assert hint in line
    assert (UNKNOWN_TYPE_HINT in line) == (UNKNOWN_TYPE_HINT in hints)
    assert len(line) < 600


@pytest.mark.parametrize(("argv", "code"), [([], 0), (["--input", "nothing-here/*.jsonl"], 2)], ids=["run", "usage"])
def test_the_command_leaves_without_the_interpreters_teardown(argv: list[str], code: int, tmp_path: Path) -> None:
    """Arrow's thread pools, torn down at interpreter exit, abort a process now and then after a committed run
    (exit 134: a scheduler counts it failed): ``zerda-rechunk`` ends its process once its work is done, with
    its exit code and its streams flushed, and no teardown (an ``atexit`` hook stands for it) runs."""
    script = (
        "import atexit, sys; atexit.register(lambda: print('teardown ran')); print('before the run');"
        " from pipelines.cli.rechunk import cli; cli(sys.argv[1:])"
    )
    output = tmp_path / "out"
    command = [sys.executable, "-c", script, "--input", str(REPO / "tests/data"), "--output", str(output), *argv]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == code, done.stderr[-2000:]
    assert "before the run" in done.stdout and "teardown ran" not in done.stdout
    assert (output / "_SUCCESS").exists() == (code == 0)
    if code:
        assert done.stderr.strip().splitlines()[-1].startswith("zerda: error: input"), done.stderr
