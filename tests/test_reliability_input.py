"""Issue 4 end to end through the CLI: bad input, bad settings and paths, security.

One run of ``main()`` over a corpus holding every kind of bad input (``tests/bad_corpus.py``)
is shared by the bad-input and security checks; the reader's per-file rules are unit-tested in
``tests/test_read.py``. The 200 MB document runs in a subprocess, to measure its memory.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pipelines.cli.rechunk import main
from pipelines.records import EXCERPT_CHARS, REJECT_REASONS
from tests.bad_corpus import (
    CONFIG,
    MEGABYTE_LINE_CHARS,
    MIN_CHUNK_SIZE,
    PATH_TRICKS,
    TRICKY_TEXT,
    BadCorpus,
    Planted,
    build_bad_corpus,
    prose,
)
from tests.common import REPO
from tests.output_checks import read_chunks, read_manifest

SECRET_ENV_VALUE = "SUPERSECRET123"
URL_PASSWORD = "PASSW0RD-zerda-9f3"
EXCERPT_BOUND = 200  # the bound on a reject's excerpt


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` with everything it prints and logs (stdout + stderr) captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue() + err.getvalue()


def tree(root: Path) -> set[str]:
    """Every path below ``root``, relative to it."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def read_rejects(output: Path) -> list[dict[str, Any]]:
    return pq.read_table(str(output / "_rejects")).to_pylist() if (output / "_rejects").exists() else []


def relative(source: str, root: Path) -> str:
    """A local source path as the corpus names its files."""
    return str(Path(source).relative_to(root))


# --- the bad corpus, run once -------------------------------------------------------------


@dataclass
class CorpusRun:
    """One finished run over the bad corpus."""

    corpus: BadCorpus
    output: Path
    code: int
    log: str
    before: set[str]  # paths below the run's folder before the run
    after: set[str]

    @property
    def folder(self) -> Path:
        return self.output.parent


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory: pytest.TempPathFactory) -> CorpusRun:
    folder = tmp_path_factory.mktemp("bad")
    corpus = build_bad_corpus(folder / "corpus")
    config = folder / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    output = folder / "out"
    before = tree(folder)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ENV_VALUE)
        code, log = run_cli(["--input", corpus.glob, "--output", str(output), "--config", str(config)])
    return CorpusRun(corpus, output, code, log, before, tree(folder))


@pytest.fixture(scope="module")
def chunk_rows(bad_run: CorpusRun) -> list[dict[str, Any]]:
    columns = ["doc_id", "source", "record", "chunk_index", "start_char", "end_char", "text", "char_count"]
    return read_chunks(bad_run.output).select(columns).to_pylist()


@pytest.fixture(scope="module")
def reject_rows(bad_run: CorpusRun) -> list[dict[str, Any]]:
    return read_rejects(bad_run.output)


def test_the_job_succeeds_despite_every_kind_of_bad_input(bad_run: CorpusRun) -> None:
    assert bad_run.code == 0, bad_run.log[-3000:]
    assert (bad_run.output / "_SUCCESS").exists()
    assert not (bad_run.output / "_staging").exists()
    assert "Traceback" not in bad_run.log and "Logging error" not in bad_run.log


def test_the_corpus_plants_every_reason_but_chunker_error(bad_run: CorpusRun) -> None:
    """A guard on the fixture itself: each reject reason the reader or the chunker can give is planted."""
    assert {p.reason for p in bad_run.corpus.rejects} == set(REJECT_REASONS) - {"chunker_error"}


def test_records_read_are_documents_chunked_plus_rejects(bad_run: CorpusRun) -> None:
    counts = read_manifest(bad_run.output)["counts"]
    corpus = bad_run.corpus
    assert counts["documents_chunked"] == len(corpus.good)
    assert sum(counts["rejects"].values()) == len(corpus.rejects)
    assert counts["records_read"] == len(corpus.good) + len(corpus.rejects)
    assert counts["records_read"] == counts["documents_chunked"] + sum(counts["rejects"].values())


def test_reject_counts_by_reason_are_exactly_the_planted_ones(bad_run: CorpusRun, reject_rows: list[dict]) -> None:
    planted = Counter(p.reason for p in bad_run.corpus.rejects)
    assert read_manifest(bad_run.output)["counts"]["rejects"] == {r: planted.get(r, 0) for r in REJECT_REASONS}
    assert Counter(row["reason"] for row in reject_rows) == planted


def test_each_reject_says_where_the_record_was(bad_run: CorpusRun, reject_rows: list[dict]) -> None:
    """Source file, line or row number (0: the whole file) and id, for every planted case."""
    root = bad_run.corpus.root
    found = [Planted(relative(r["source"], root), r["record"], r["doc_id"], r["reason"]) for r in reject_rows]
    assert sorted(found, key=repr) == sorted(bad_run.corpus.rejects, key=repr)
    for row in reject_rows:
        assert row["message"].strip(), row
        assert len(row["excerpt"]) <= EXCERPT_CHARS <= EXCERPT_BOUND


def test_reject_excerpts_show_the_bad_input(reject_rows: list[dict]) -> None:
    by_id = {row["doc_id"]: row for row in reject_rows}
    assert by_id["list-text"]["excerpt"] == '{"id": "list-text", "text": ["a", "list"]}'
    assert by_id["nul-text"]["message"].startswith("NUL character at ")
    assert by_id["latin1"]["excerpt"].count("\\xe9") == 1  # the bad byte, escaped
    assert "NUL" in by_id["nul.txt"]["message"] and "unreadable" in by_id["truncated.jsonl.gz"]["message"]


def test_every_good_document_is_chunked_once(bad_run: CorpusRun, chunk_rows: list[dict]) -> None:
    root = bad_run.corpus.root
    firsts = Counter(
        (relative(r["source"], root), r["record"], r["doc_id"]) for r in chunk_rows if r["chunk_index"] == 0
    )
    expected = {(file, record, doc_id) for (file, record), (doc_id, _) in bad_run.corpus.good.items()}
    assert set(firsts) == expected
    assert max(firsts.values()) == 1
    assert {r["doc_id"] for r in chunk_rows} == {doc_id for doc_id, _ in bad_run.corpus.good.values()}


def test_chunks_are_exact_slices_of_the_planted_texts(bad_run: CorpusRun, chunk_rows: list[dict]) -> None:
    """Against the texts as written (a BOM dropped, line ends untouched), not as the reader read them."""
    root, good = bad_run.corpus.root, bad_run.corpus.good
    covered: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for row in chunk_rows:
        key = (relative(row["source"], root), row["record"])
        text = good[key][1]
        assert row["text"] == text[row["start_char"] : row["end_char"]], row
        assert row["char_count"] == len(row["text"])
        covered.setdefault(key, []).append((row["start_char"], row["end_char"]))
    for key, spans in covered.items():  # no text is lost: every non-space character lies in a chunk
        text, inside = good[key][1], bytearray(len(good[key][1]))
        for start, end in spans:
            inside[start:end] = b"\x01" * (end - start)
        assert all(inside[i] or text[i].isspace() for i in range(len(text))), key


def test_bom_is_dropped_and_crlf_and_lone_cr_are_kept(bad_run: CorpusRun, chunk_rows: list[dict]) -> None:
    root = bad_run.corpus.root

    def texts(file: str) -> list[str]:
        rows = sorted((r for r in chunk_rows if relative(r["source"], root) == file), key=lambda r: r["chunk_index"])
        return [r["text"] for r in rows]

    assert texts("bom.txt")[0].startswith("# A heading\n")
    assert texts("bom.jsonl")[0] == bad_run.corpus.good[("bom.jsonl", 1)][1][: len(texts("bom.jsonl")[0])]
    assert not any("\ufeff" in r["text"] for r in chunk_rows)
    assert all("\r\n" in t for t in texts("crlf.txt"))
    assert all("\r" in t and "\n" not in t for t in texts("cr.md"))
    crlf_doc = [r["text"] for r in chunk_rows if r["doc_id"] == "crlf-2"]
    assert any("\r\n" in t for t in crlf_doc)


def test_records_before_damage_in_a_compressed_file_are_kept(bad_run: CorpusRun, reject_rows: list[dict]) -> None:
    """A truncated gzip keeps every line whole in what still decompresses; a corrupt zstd frame
    does not cost the intact frame before it. Then one ``unreadable_file`` at the breaking record."""
    root = bad_run.corpus.root
    for file in ("truncated.jsonl.gz", "corrupt.jsonl.zst"):
        kept = sorted(record for (name, record) in bad_run.corpus.good if name == file)
        assert kept == list(range(1, len(kept) + 1)) and kept
        reject = next(r for r in reject_rows if relative(r["source"], root) == file)
        assert (reject["reason"], reject["record"]) == ("unreadable_file", len(kept) + 1)
    inputs = {relative(i["source"], root): i for i in read_manifest(bad_run.output)["inputs"]}
    assert inputs["truncated.jsonl.gz"]["error"].startswith("EOFError")
    assert inputs["corrupt.jsonl.zst"]["error"] != ""
    assert len(inputs) == len(list(p for p in root.rglob("*") if p.is_file()))


def test_duplicate_ids_are_kept_and_reported(bad_run: CorpusRun, chunk_rows: list[dict]) -> None:
    counts = read_manifest(bad_run.output)["counts"]
    assert (counts["duplicate_doc_ids"], counts["duplicate_doc_id_examples"]) == (1, ["dup"])
    sources = {r["source"] for r in chunk_rows if r["doc_id"] == "dup"}
    assert {Path(s).name for s in sources} == {"mixed.jsonl", "rows.parquet"}


@pytest.fixture(scope="module")
def replace_run(bad_run: CorpusRun) -> Path:
    """The two invalid UTF-8 files again, with ``encoding_errors: replace``."""
    config = bad_run.folder / "replace.yaml"
    config.write_text(CONFIG + "  encoding_errors: replace\n", encoding="utf-8")
    output = bad_run.folder / "out-replace"
    root = bad_run.corpus.root
    inputs = [arg for file in bad_run.corpus.replaced for arg in ("--input", str(root / file))]
    code, log = run_cli([*inputs, "--output", str(output), "--config", str(config), "--quiet"])
    assert code == 0, log
    return output


def test_encoding_errors_replace_chunks_invalid_utf8_with_u_fffd(bad_run: CorpusRun, replace_run: Path) -> None:
    counts = read_manifest(replace_run)["counts"]
    assert counts["rejects"]["invalid_utf8"] == 0 and sum(counts["rejects"].values()) == 0
    rows = read_chunks(replace_run).to_pylist()
    expected = dict(bad_run.corpus.replaced.values())  # doc_id -> text decoded with U+FFFD
    assert {r["doc_id"] for r in rows} == set(expected) | {"utf8-ok"}
    for row in rows:
        if row["doc_id"] in expected:
            assert row["text"] == expected[row["doc_id"]][row["start_char"] : row["end_char"]]
    replaced = [r["text"] for r in rows if r["doc_id"] in expected]
    assert sum(t.count("\ufffd") for t in replaced) >= 3  # é, è and ï, each one U+FFFD


# --- security ------------------------------------------------------------------------------


def test_partition_directories_come_only_from_bucket_numbers(bad_run: CorpusRun) -> None:
    """Ids like ``../../evil`` and text holding ``density_bucket=99/`` never become paths."""
    output = bad_run.output
    for path in output.rglob("*"):
        assert path.resolve().is_relative_to(output.resolve()), path
    top = {p.name for p in output.iterdir()}
    buckets = {name for name in top if name.startswith("density_bucket=")}
    assert top == {"_SUCCESS", "_manifest.json", "_manifest", "_rejects", "_index", "_ids", "_changes"} | buckets
    assert buckets and buckets <= {f"density_bucket={k}" for k in range(10)}
    for bucket in buckets:
        assert all(p.is_file() and p.suffix == ".parquet" for p in (output / bucket).iterdir())
        assert all(p.name.startswith("part-") for p in (output / bucket).iterdir())
    assert all(p.is_file() and p.suffix == ".pq" for p in (output / "_rejects").iterdir())


def test_nothing_is_written_outside_the_output(bad_run: CorpusRun) -> None:
    assert {p for p in bad_run.after if not p.startswith("out")} == bad_run.before
    assert not any(Path(p).name in {"evil", "escape", "zerda-evil"} for p in tree(bad_run.folder.parent))
    assert not Path("/etc/zerda-evil").exists()


def test_path_like_ids_and_text_are_kept_as_data(chunk_rows: list[dict]) -> None:
    for trick in PATH_TRICKS:
        first = next(r for r in chunk_rows if r["doc_id"] == trick and r["chunk_index"] == 0)
        assert first["text"].startswith(TRICKY_TEXT.split(" %s")[0])


def test_megabyte_invalid_json_line_has_a_bounded_excerpt(bad_run: CorpusRun, reject_rows: list[dict]) -> None:
    """The 1 MB invalid JSON line, and the line too long to parse at all."""
    long_lines = {
        r["excerpt"][:18]: r for r in reject_rows if r["excerpt"].startswith(('{"id": "megabyte"', '{"id": "overlong"'))
    }
    assert {k: r["reason"] for k, r in long_lines.items()} == {
        '{"id": "megabyte",': "invalid_json",
        '{"id": "overlong",': "too_large",
    }
    for row in long_lines.values():
        assert len(row["excerpt"]) <= EXCERPT_BOUND
        assert len(row["message"]) <= 500
    assert MEGABYTE_LINE_CHARS >= 1_000_000
    manifest_text = (bad_run.output / "_manifest.json").read_text(encoding="utf-8")
    assert len(manifest_text) < 100_000  # counts and settings, never the bad input


def all_strings(output: Path) -> str:
    """Every string the run stored: manifest, rejects and chunk rows."""
    parts = [(output / "_manifest.json").read_text(encoding="utf-8")]
    for row in read_rejects(output):
        parts += [str(v) for v in row.values()]
    table = read_chunks(output)
    parts += [str(v) for column in table.columns for v in column.to_pylist()]
    return "\n".join(parts)


def test_no_secret_environment_value_in_logs_manifest_or_rejects(bad_run: CorpusRun) -> None:
    assert SECRET_ENV_VALUE not in bad_run.log
    assert SECRET_ENV_VALUE not in all_strings(bad_run.output)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder without a line on stderr per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def http_corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A corpus on a local HTTP server; the URL carries ``user:password@`` (basic auth)."""
    root = tmp_path_factory.mktemp("http")
    good = prose(random.Random(1), 8)
    lines = [json.dumps({"id": "web-1", "text": good}), '{"id": "web-2", "text": broken']
    (root / "web.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=root))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://zerda:{URL_PASSWORD}@127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def test_url_credentials_and_secrets_stay_out_of_output_and_logs(
    http_corpus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with ``--verbose`` (debug logs of every library), neither the password in an input URL
    nor a secret environment value reaches the logs, the manifest, the rejects or the chunks."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ENV_VALUE)
    output = tmp_path / "out"
    code, log = run_cli(["--input", f"{http_corpus}/web.jsonl", "--output", str(output), "--verbose"])
    assert code == 0, log[-3000:]
    counts = read_manifest(output)["counts"]
    assert (counts["documents_chunked"], counts["rejects"]["invalid_json"]) == (1, 1)
    stored = all_strings(output)
    for secret in (URL_PASSWORD, SECRET_ENV_VALUE):
        assert secret not in log
        assert secret not in stored
    public_url = http_corpus.replace(f"zerda:{URL_PASSWORD}@", "") + "/web.jsonl"
    assert [r["source"] for r in read_rejects(output)] == [public_url]  # still says where the record was


@pytest.mark.parametrize("where", ["input-missing", "input-glob", "output"])
def test_usage_errors_do_not_echo_url_credentials(
    where: str, http_corpus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good_input, output = f"{http_corpus}/web.jsonl", str(tmp_path / "out")
    if where == "input-missing":
        good_input = f"{http_corpus}/missing.jsonl"
    elif where == "input-glob":
        good_input = f"{http_corpus}/nothing/*.jsonl"
    else:
        output = f"{http_corpus}/out"
    assert main(["--input", good_input, "--output", output]) == 2
    err = capsys.readouterr().err
    assert "zerda: error:" in err and "127.0.0.1" in err
    assert URL_PASSWORD not in err


@pytest.mark.parametrize(
    "config",
    [
        '!!python/object/apply:os.system ["touch {marker}"]\n',
        'chunking:\n  language: !!python/object/apply:os.system ["touch {marker}"]\n',
        "input:\n  text_field: !!python/object/new:os.system [touch {marker}]\n",
        "output: !!python/name:os.system\n",
    ],
)
def test_yaml_object_tags_are_refused_and_never_run(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "tagged.yaml"
    path.write_text(config.format(marker=marker), encoding="utf-8")
    output = tmp_path / "out"
    assert main(["--input", str(REPO / "tests/data"), "--output", str(output), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "python/" in err
    assert not marker.exists()
    assert not output.exists()


# --- bad settings and paths: a clear message, exit code 2, nothing written -----------------


def assert_refused(argv: list[str], output: Path, words: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``main`` exits 2 with one ``zerda: error:`` message naming ``words``, and writes no output."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("zerda: error: "), captured.err
    assert "Traceback" not in captured.err
    for word in words:
        assert word in captured.err
    assert not output.exists()
    return captured.err


@pytest.mark.parametrize(
    ("yaml_text", "words"),
    [
        ("chunkng:\n  base_size: 512\n", ["unknown section: 'chunkng'", "did you mean 'chunking'"]),
        ("chunking:\n  base_sise: 512\n", ["unknown key in chunking: 'base_sise'", "'base_size'"]),
        ("input:\n  encoding: replace\n", ["unknown key in input: 'encoding'"]),
        ("chunking:\n  base_size: '512'\n", ["chunking.base_size", "an integer in [1, ", "'512' (str)"]),
        ("chunking:\n  base_size: true\n", ["chunking.base_size", "True (bool)"]),
        ("chunking:\n  overlap: 1.5\n", ["chunking.overlap", "1.5 (float)"]),
        ("enrich:\n  keywords: 'yes'\n", ["enrich.keywords", "true or false"]),
        ("input:\n  encoding_errors: ignore\n", ["input.encoding_errors", "'strict', 'replace'"]),
        ("output:\n  compression: rar\n", ["output.compression"]),
        ("chunking: 512\n", ["chunking must be a mapping"]),
        ("- chunking\n- input\n", ["must be a mapping"]),
        ("chunking:\n  base_size: -512\n", ["chunking.base_size", "-512"]),
        ("chunking:\n  min_size: 0\n", ["chunking.min_size", "an integer in [1, "]),
        ("chunking:\n  min_chunk_size: -1\n", ["chunking.min_chunk_size", "an integer in [0, "]),
        ("chunking:\n  max_size: 3000000000\n", ["max_size", "[1, 2147483647]"]),  # Arrow's int32 sizes
        ("chunking:\n  base_size: 100000000000\n", ["base_size", "[1, 2147483647]"]),
        ("input:\n  max_document_chars: -5\n", ["input.max_document_chars"]),
        ("output:\n  max_rows_per_file: 0\n", ["output.max_rows_per_file"]),
        ("output:\n  bucket_width: 0\n", ["output.bucket_width", "[0.001, 1]", "0 (int)"]),
        ("output:\n  bucket_width: 1.5\n", ["output.bucket_width", "[0.001, 1]", "1.5 (float)"]),
        ("output:\n  bucket_width: -0.1\n", ["output.bucket_width"]),
        ("chunking:\n  base_size: [\n", ["not valid YAML"]),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_settings_exit_2_naming_the_key(
    yaml_text: str, words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text, encoding="utf-8")
    output = tmp_path / "out"
    argv = ["--input", str(REPO / "tests/data"), "--output", str(output), "--config", str(config)]
    assert_refused(argv, output, [str(config), *words], capsys)


def test_every_problem_of_a_config_is_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("chunking:\n  overlap: -1\n  base_sise: 1\noutput:\n  bucket_width: 2\n", encoding="utf-8")
    output = tmp_path / "out"
    argv = ["--input", str(REPO / "tests/data"), "--output", str(output), "--config", str(config)]
    assert_refused(argv, output, ["chunking.overlap", "base_sise", "output.bucket_width"], capsys)


@pytest.mark.parametrize("kind", ["directory", "invalid-utf8", "no-permission"])
def test_unreadable_config_exits_2(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    if kind == "directory":
        config.mkdir()
        words = ["cannot read config"]
    elif kind == "invalid-utf8":
        config.write_bytes(b"chunking:\n  language: caf\xe9\n")
        words = ["is not UTF-8 text"]
    else:
        if os.geteuid() == 0:
            assert_refused_unprivileged(REPO / "tests/data", ["cannot read config"])
            return
        config.write_text("chunking:\n  base_size: 512\n", encoding="utf-8")
        config.chmod(0)
        words = ["cannot read config"]
    output = tmp_path / "out"
    argv = ["--input", str(REPO / "tests/data"), "--output", str(output), "--config", str(config)]
    assert_refused(argv, output, [str(config), *words], capsys)


NOBODY = 65534


def run_cli_as_nobody(argv: list[str]) -> tuple[int, str]:
    """``run_cli`` in a forked child that has dropped root for user nobody: root reads a file
    whatever its mode, so only an unprivileged process meets a real permission error. (A fork,
    not an exec: the interpreter may live where nobody cannot reach, such as under /root.)"""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            with os.fdopen(write_end, "w", encoding="utf-8") as pipe:
                json.dump(run_cli(argv), pipe)
            status = 0
        except BaseException:
            traceback.print_exc()  # to the test's captured output, for the failure report
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as pipe:
        sent = pipe.read()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "the unprivileged run failed"
    code, text = json.loads(sent)
    return code, text


def assert_refused_unprivileged(inputs: Path, words: list[str]) -> None:
    """Run as nobody, a config of mode 000 is refused with exit 2 and one message naming it, and no
    output is written. Its folder is one nobody may enter (pytest's tmp root is 0700) but not write."""
    folder = Path(tempfile.mkdtemp(prefix="zerda-unreadable-"))
    try:
        folder.chmod(0o755)
        config, output = folder / "config.yaml", folder / "out"
        config.write_text("chunking:\n  base_size: 512\n", encoding="utf-8")
        config.chmod(0)
        code, text = run_cli_as_nobody(["--input", str(inputs), "--output", str(output), "--config", str(config)])
        assert code == 2, text
        assert text.startswith("zerda: error: "), text
        assert "Traceback" not in text
        for word in [str(config), *words]:
            assert word in text
        assert not output.exists()
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("kind", ["empty-directory", "glob-in-existing-dir", "one-of-two-inputs"])
def test_an_input_matching_nothing_exits_2(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = {
        "empty-directory": str(empty),
        "glob-in-existing-dir": str(REPO / "tests/data/*.jsonl.gz"),
        "one-of-two-inputs": str(tmp_path / "typo/*.jsonl"),
    }[kind]
    inputs = ["--input", str(REPO / "tests/data")] if kind == "one-of-two-inputs" else []
    output = tmp_path / "out"
    assert_refused([*inputs, "--input", missing, "--output", str(output)], output, [missing, "matches no file"], capsys)


def unwritable_output(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Path | str:
    """An output the job cannot write, of the given kind."""
    if kind == "under-a-file":
        (tmp_path / "a_file").write_text("keep me", encoding="utf-8")
        return tmp_path / "a_file" / "out"
    if kind == "proc":
        return "/proc/zerda-out"
    if kind == "unknown-protocol":
        return "nosuchproto://bucket/out"
    read_only = tmp_path / "read_only"
    if os.geteuid() == 0:  # root writes through any mode: only a read-only filesystem stops it
        read_only.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(read_only)], check=True)
        request.addfinalizer(lambda: subprocess.run(["umount", str(read_only)], check=True))
    else:
        read_only.mkdir(mode=0o500)
    return read_only / "out"


@pytest.mark.parametrize("kind", ["under-a-file", "proc", "unknown-protocol", "read-only-dir"])
def test_an_unwritable_output_exits_2(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    output = unwritable_output(kind, tmp_path, request)
    argv = ["--input", str(REPO / "tests/data"), "--output", str(output)]
    assert_refused(argv, Path(str(output)), [str(output), "not writable"], capsys)
    if kind == "under-a-file":
        assert (tmp_path / "a_file").read_text(encoding="utf-8") == "keep me"
    if kind == "proc":
        assert not Path(str(output)).exists()


def test_a_device_as_output_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--input", str(REPO / "tests/data"), "--output", "/dev/null"]
    assert main(argv) == 2
    assert capsys.readouterr().err == "zerda: error: output '/dev/null' is a file, not a directory\n"


def test_an_s3_output_without_credentials_exits_2_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """botocore's NoCredentialsError is no OSError: it was a traceback."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata lookup, no wait
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    fsspec.get_filesystem_class("s3").clear_instance_cache()  # no filesystem made earlier, with credentials
    argv = ["--input", str(REPO / "tests/data"), "--output", "s3://zerda-no-such-bucket/out"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        "zerda: error: output 's3://zerda-no-such-bucket/out' is not writable: NoCredentialsError:"
        " Unable to locate credentials\n"
    )


def test_a_refused_run_leaves_a_previous_output_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Settings, inputs and output are all checked before anything is written: the last good
    output keeps its ``_SUCCESS``, manifest and data."""
    output = tmp_path / "out"
    (output / "density_bucket=3").mkdir(parents=True)
    files = {"_SUCCESS": "", "_manifest.json": "{}", "density_bucket=3/part-00000.parquet": "data"}
    for name, content in files.items():
        (output / name).write_text(content, encoding="utf-8")
    config = tmp_path / "bad.yaml"
    config.write_text("output:\n  bucket_width: 0\n", encoding="utf-8")
    before = {p: (output / p).stat().st_mtime_ns for p in files}
    for argv in (
        ["--input", str(REPO / "tests/data"), "--config", str(config)],
        ["--input", str(tmp_path / "nothing/*.txt")],
    ):
        assert main([*argv, "--output", str(output)]) == 2
    assert "zerda: error:" in capsys.readouterr().err
    assert tree(output) == set(files) | {"density_bucket=3"}
    assert {p: (output / p).stat().st_mtime_ns for p in files} == before


# --- one 200 MB document without a sentence end ------------------------------------------

BIG_DOCUMENT_BYTES = 200_000_000
# Peak RSS of the subprocess chunking the 200 MB document, measured on Python 3.11 / Beam 2.77
# (DirectRunner, in memory, 2 CPUs): 1.14 GB = 5.7x the document, stable over runs; ~0.17 GB of it
# is the interpreter with Beam imported (a 2 kB document peaks at 167 MB). The rest: the decoded
# text (1x), the chunk texts with their overlap (1.1x), the chunk rows and the Arrow table the
# writer builds from them (~1.1x), Parquet buffers. (1.34 GB, 6.7x, while the reader still held the
# raw bytes during chunking.) 8x (1.6 GB) leaves 40% headroom for allocator and library versions and
# still fails on one more copy of the document per stage, or on a per-word structure (a list of
# the 33 M word offsets alone would take ~1.2 GB).
BIG_DOCUMENT_RSS_FACTOR = 8
BIG_DOCUMENT_SECONDS = 90


def write_words_without_sentence_end(path: Path, size: int) -> None:
    """``size`` bytes of words and single spaces, no ``.!?`` and no blank line, streamed to disk."""
    words = "alpha beta gamma delta river stone desert fox lantern orchard copper meadow harbor quiet".split()
    block = " ".join(words[(i * 7 + i // 14) % len(words)] for i in range(150_000)) + " "
    with path.open("w", encoding="ascii") as f:
        written = 0
        while written < size:
            piece = block[: size - written]
            f.write(piece)
            written += len(piece)


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, int, float]]:
    """Chunk the 200 MB document in a subprocess: (document, output, peak RSS bytes, seconds)."""
    folder = tmp_path_factory.mktemp("big")
    document = folder / "big.txt"
    write_words_without_sentence_end(document, BIG_DOCUMENT_BYTES)
    config = folder / "big.yaml"
    config.write_text("input:\n  max_document_chars: 250000000\n", encoding="utf-8")
    output = folder / "out"
    argv = ["-m", "pipelines.cli.rechunk", "--input", str(document), "--output", str(output)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    with (folder / "log.txt").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, *argv, "--config", str(config), "--quiet"], cwd=REPO, env=env, stdout=log, stderr=log
        )
        # wait4 gives this child's own peak RSS (RUSAGE_CHILDREN would be the largest of every child so far)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    assert process.returncode == 0, (folder / "log.txt").read_text(errors="replace")[-3000:]
    yield document, output, usage.ru_maxrss * 1024, seconds  # ru_maxrss is in KiB on Linux
    document.unlink()  # pytest keeps the last temp folders: not 200 MB each


def test_200mb_document_is_chunked_within_the_size_bound(big_run: tuple[Path, Path, int, float]) -> None:
    document, output, _, _ = big_run
    counts = read_manifest(output)["counts"]
    assert (counts["documents_chunked"], counts["records_read"]) == (1, 1)
    table = ds.dataset(str(output), format="parquet", partitioning="hive").to_table(
        columns=["chunk_index", "start_char", "end_char", "char_count", "target_size", "text"]
    )
    table = table.sort_by("chunk_index")
    assert table["chunk_index"].to_pylist() == list(range(table.num_rows))
    sizes, targets = table["char_count"].to_numpy(), table["target_size"].to_numpy()
    assert (sizes[:-1] <= targets[:-1]).all()  # every chunk within the target...
    assert sizes[-1] <= targets[-1] + MIN_CHUNK_SIZE  # ...but a final tail merged into the last one
    starts, ends = table["start_char"].to_numpy(), table["end_char"].to_numpy()
    assert starts[0] == 0 and ends[-1] == BIG_DOCUMENT_BYTES
    assert (starts[1:] > starts[:-1]).all() and (starts[1:] <= ends[:-1]).all()  # advances, leaves no gap
    assert pc.all(pc.equal(pc.binary_length(table["text"]), table["char_count"])).as_py()
    text = document.read_bytes().decode("ascii")
    for start, end, chunk in zip(starts, ends, table["text"].to_pylist(), strict=True):
        assert chunk == text[start:end]


def test_200mb_document_memory_is_a_small_multiple_of_it(big_run: tuple[Path, Path, int, float]) -> None:
    _, _, peak_rss, seconds = big_run
    assert peak_rss < BIG_DOCUMENT_RSS_FACTOR * BIG_DOCUMENT_BYTES, f"peak RSS {peak_rss / 1e6:.0f} MB"
    assert seconds < BIG_DOCUMENT_SECONDS, f"{seconds:.0f} s"
