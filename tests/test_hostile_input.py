"""Issue 9, bad input and secrets: hostile corpora give rejects with their reasons, never a crashed,
hung or doubled job, and credentials never reach what zerda prints, logs or stores.

Each class is tried with several shapes; runs go through the CLI (``pipelines.cli.rechunk.main``), in
``multi_processing`` where Beam's encoding between processes matters. Memory is measured in a
subprocess (peak RSS), regex cost with a subprocess given a generous timeout.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from pipelines.errors import InputError
from pipelines.input.expand import InputFile, expand_inputs
from pipelines.input.source import read_file
from pipelines.records import FileReport, Reject, SourceRecord, content_id
from pipelines.redact import ELLIPSIS, MESSAGE_CHARS, redact_url
from pipelines.settings import InputSettings
from tests.common import MULTI_PROCESS, REPO
from tests.output_checks import read_chunks, read_manifest
from tests.test_reliability_input import read_rejects, run_cli

if TYPE_CHECKING:
    from tests.s3_server import S3Env

pytest_plugins = ["tests.s3_server"]  # the moto_endpoint and s3_env fixtures

PROSE = "The river rises in the hills and runs to the sea. Farmers use its water in summer. " * 3


def items(path: Path | str, relative: str = "a", **settings: Any) -> list[SourceRecord | Reject | FileReport]:
    return list(read_file(InputFile(str(path), relative), InputSettings(**settings)))


def rejects_of(found: list[Any]) -> list[tuple[int, str]]:
    return [(r.record, r.reason) for r in found if isinstance(r, Reject)]


def assert_arrow_can_store(found: list[Any]) -> None:
    """Every string a record or reject carries is encodable UTF-8 (what Arrow and Beam's coders need)."""
    for item in found:
        for value in vars(item).values():
            if isinstance(value, str):
                value.encode("utf-8")


# --- lone surrogates ----------------------------------------------------------------------


def surrogate_corpus(root: Path) -> Path:
    """Lone surrogates from JSON escapes in text, id, a field not read, a broken line; a file name
    with undecodable bytes. Lines 1, 4 and 6 are good documents."""
    root.mkdir()
    lines = [
        json.dumps({"id": "good-1", "text": PROSE}),
        '{"id": "bad-text", "text": "before \\ud800 after. ' + PROSE + '"}',
        '{"id": "bad-\\udc00-id", "text": "' + PROSE + '"}',
        '{"id": "good-4", "other": "\\udfff", "text": "' + PROSE + '"}',
        '{"id": "broken \\ud800", "text": ',
        json.dumps({"text": "pair \U0001f600 is fine. " + PROSE}),
        '{"id": 7, "text": "\\ud83d"}',
    ]
    (root / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / os.fsdecode(b"name-\xff.jsonl")).write_text(json.dumps({"text": PROSE}) + "\n", encoding="utf-8")
    return root


def test_lone_surrogates_are_invalid_utf8_rejects_through_the_cli_in_multi_processing(tmp_path: Path) -> None:
    corpus, output = surrogate_corpus(tmp_path / "corpus"), tmp_path / "out"
    code, log = run_cli(["--input", str(corpus), "--output", str(output), *MULTI_PROCESS])
    assert code == 0, log[-3000:]
    rejects = sorted((r["record"], r["reason"]) for r in read_rejects(output))
    assert rejects == [(2, "invalid_utf8"), (3, "invalid_utf8"), (5, "invalid_json"), (7, "invalid_utf8")]
    chunks = read_chunks(output).to_pylist()
    assert {(Path(c["source"]).name, c["record"]) for c in chunks} == {
        ("a.jsonl", 1),
        ("a.jsonl", 4),
        ("a.jsonl", 6),
        ("name-\\udcff.jsonl", 1),  # the undecodable byte spelled as an escape, encodable
    }
    counts = read_manifest(output)["counts"]
    assert (counts["records_read"], counts["documents_chunked"]) == (8, 4)


def test_lone_surrogates_are_replaced_when_encoding_errors_is_replace(tmp_path: Path) -> None:
    found = items(surrogate_corpus(tmp_path / "c") / "a.jsonl", encoding_errors="replace")
    texts = {r.doc_id: r.text for r in found if isinstance(r, SourceRecord)}
    assert texts["bad-text"].startswith("before \ufffd after.")
    assert "bad-\ufffd-id" in texts
    assert_arrow_can_store(found)


# --- integers longer than Python's int allows ----------------------------------------------


def test_huge_json_integers_never_reject_a_record_nor_crash_the_job(tmp_path: Path) -> None:
    """Python refuses to parse integers of over 4300 digits: one in a field zerda does not read must
    not lose the record, one as the id is its digits (like any integer id), one as the text missing_text."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    huge = "9" * 5000
    lines = [
        f'{{"id": "a", "n": {huge}, "text": "{PROSE}"}}',
        f'{{"id": "b", "nested": [{{"m": -{huge}}}], "text": "{PROSE}"}}',
        f'{{"id": {huge}, "text": "{PROSE}"}}',
        f'{{"id": "d", "text": {huge}}}',
    ]
    (corpus / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out"
    code, log = run_cli(["--input", str(corpus), "--output", str(output)])
    assert code == 0, log[-3000:]
    assert {(c["record"], c["doc_id"]) for c in read_chunks(output).to_pylist()} == {(1, "a"), (2, "b"), (3, huge)}
    rejects = read_rejects(output)
    assert [(r["record"], r["reason"]) for r in rejects] == [(4, "missing_text")]
    assert rejects[0]["message"] == "record has 'text' = a JSON number, not a string"  # as for a small integer


# --- invalid UTF-8 in Parquet -------------------------------------------------------------


def string_column(values: list[bytes | None], large: bool = False) -> pa.Array:
    """A string column holding whatever bytes are given (Arrow does not check them here)."""
    offsets, data, valid = [0], b"", []
    for value in values:
        data += value or b""
        offsets.append(len(data))
        valid.append(value is not None)
    kind, offset_type = (pa.large_string(), "int64") if large else (pa.string(), "int32")
    mask = pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(
        kind,
        len(values),
        [mask, pa.py_buffer(pa.array(offsets, offset_type).buffers()[1]), pa.py_buffer(data)],
    )


@pytest.mark.parametrize("layout", ["plain", "dictionary", "large_string", "small-batches"])
def test_invalid_utf8_in_a_parquet_row_rejects_that_row_only(layout: str, tmp_path: Path) -> None:
    texts = [f"{PROSE} number {i}.".encode() for i in range(600)]
    texts[2] = b"bad \xff\xfe byte " + PROSE.encode()
    texts[300] = PROSE.encode()[:40] + b"\xc3"  # a cut multibyte character
    ids = [f"id-{i}".encode() for i in range(600)]
    ids[450] = b"id-\xed\xa0\x80"  # an encoded surrogate: invalid UTF-8
    table = pa.table({"id": string_column(ids), "text": string_column(texts, large=layout == "large_string")})
    path = tmp_path / "a.parquet"
    pq.write_table(
        table, path, use_dictionary=layout == "dictionary", row_group_size=50 if layout == "small-batches" else 10_000
    )
    found = items(path)
    assert rejects_of(found) == [(3, "invalid_utf8"), (301, "invalid_utf8"), (451, "invalid_utf8")]
    records = [r for r in found if isinstance(r, SourceRecord)]
    assert len(records) == 597 and records[-1].record == 600 and records[-1].doc_id == "id-599"
    assert found[-1] == FileReport(str(path), found[-1].bytes_read, 600, "")
    assert_arrow_can_store(found)


@pytest.mark.parametrize("dictionary", [False, True])
def test_a_bom_at_the_start_of_a_parquet_value_is_kept_so_chunks_slice_it(dictionary: bool, tmp_path: Path) -> None:
    """A BOM is a file's first bytes, never a value's: a value keeps its U+FEFF, and offsets slice the value."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    values = ["\ufeff" + PROSE * 4, "\ufeff\ufeff" + PROSE * 3, PROSE + "\ufeff"]
    table = pa.table({"id": ["\ufeffa", "b", "c"], "text": values})
    pq.write_table(table, corpus / "bom.parquet", use_dictionary=dictionary)
    output = tmp_path / "out"
    code, log = run_cli(["--input", str(corpus), "--output", str(output), "--config", str(small_chunks(tmp_path))])
    assert code == 0, log[-3000:]
    chunks = read_chunks(output).to_pylist()
    assert {c["doc_id"] for c in chunks} == {"\ufeffa", "b", "c"}
    for chunk in chunks:
        value = values[chunk["record"] - 1]
        assert chunk["text"] == value[chunk["start_char"] : chunk["end_char"]]
    assert {c["text"][:2] for c in chunks if c["start_char"] == 0} == {"\ufeffT", "\ufeff\ufeff", "Th"}


def small_chunks(root: Path) -> Path:
    """A config whose chunks are small enough that a document gives several."""
    config = root / "small.yaml"
    config.write_text(
        "chunking:\n  base_size: 120\n  min_size: 100\n  max_size: 150\n  overlap: 20\n", encoding="utf-8"
    )
    return config


NESTED = {
    "list": pa.array([["a", "b"], ["c"], []], pa.list_(pa.string())),
    "struct": pa.array([{"x": "a"}, {"x": "b"}, {"x": None}]),
    "map": pa.array([[("k", "a")], [("k", "b")], []], pa.map_(pa.string(), pa.string())),
    "list_of_invalid_utf8": pa.ListArray.from_arrays(pa.array([0, 1, 2, 3]), string_column([b"a", b"\xff", b"c"])),
}


@pytest.fixture(scope="module")
def nested_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """One run over a Parquet file for each nested kind as the id column and as the text column
    (``<column>-<kind>.parquet``, three rows each) beside one good JSONL record: (output, records by file)."""
    root = tmp_path_factory.mktemp("nested")
    corpus = root / "c"
    corpus.mkdir()
    plain = pa.array([f"{PROSE} row {i}." for i in range(3)])
    for kind, nested in NESTED.items():
        pq.write_table(pa.table({"id": nested, "text": plain}), corpus / f"id-{kind}.parquet")
        pq.write_table(pa.table({"id": ["a", "b", "c"], "text": nested}), corpus / f"text-{kind}.parquet")
    (corpus / "good.jsonl").write_text(json.dumps({"id": "good", "text": PROSE}) + "\n", encoding="utf-8")
    output = root / "out"
    code, log = run_cli(["--input", str(corpus), "--output", str(output)])
    assert code == 0, log[-3000:]
    records = {Path(i["source"]).name: i["records"] for i in read_manifest(output)["inputs"]}
    return output, records


@pytest.mark.parametrize("column", ["id", "text"])
@pytest.mark.parametrize("kind", list(NESTED))
def test_a_nested_parquet_id_or_text_column_is_read_row_by_row(
    column: str, kind: str, nested_run: tuple[Path, dict[str, int]]
) -> None:
    """A nested id is no id (the document is named by its text, as in JSONL); a nested text is missing_text, per row."""
    output, records = nested_run
    name = f"{column}-{kind}.parquet"
    mine = {name, "good.jsonl"}  # this test's file and the good record beside it
    rejects = sorted(
        (r["record"], r["doc_id"], r["reason"]) for r in read_rejects(output) if Path(r["source"]).name in mine
    )
    chunks = {(c["record"], c["doc_id"]) for c in read_chunks(output).to_pylist() if Path(c["source"]).name in mine}
    if column == "id":
        assert rejects == []
        assert chunks == {(1, "good"), *((i + 1, content_id(f"{PROSE} row {i}.")) for i in range(3))}
    else:
        assert rejects == [(1, "a", "missing_text"), (2, "b", "missing_text"), (3, "c", "missing_text")]
        assert chunks == {(1, "good")}
    assert (records[name], records["good.jsonl"]) == (3, 1)


# --- files that are not regular files -----------------------------------------------------


def special_corpus(root: Path) -> dict[str, str]:
    """A good file beside every kind of non-regular entry a glob can match; name -> expected kind."""
    (root / "real").mkdir(parents=True)
    corpus = root / "d"
    corpus.mkdir()
    (corpus / "good.jsonl").write_text(json.dumps({"text": PROSE}) + "\n", encoding="utf-8")
    (root / "real" / "inner.jsonl").write_text(json.dumps({"text": PROSE}) + "\n", encoding="utf-8")
    os.mkfifo(corpus / "fifo.jsonl")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(corpus / "sock.jsonl"))
    sock.close()
    (corpus / "dir.jsonl").symlink_to(root / "real")
    (corpus / "null.jsonl").symlink_to("/dev/null")
    (corpus / "gone.jsonl").symlink_to(root / "nothing-here")
    (corpus / "loop.jsonl").symlink_to(corpus / "loop.jsonl")  # stat fails with ELOOP
    return {
        "fifo.jsonl": "a FIFO",
        "sock.jsonl": "a socket",
        "dir.jsonl": "a directory",
        "null.jsonl": "a character device",
        "gone.jsonl": "a broken symlink",
        "loop.jsonl": "cannot be examined (Too many levels of symbolic links)",
    }


@pytest.mark.parametrize("pattern", ["d/*.jsonl", "d", "d/**"])
def test_non_regular_files_are_unreadable_file_rejects_and_never_hang(pattern: str, tmp_path: Path) -> None:
    expected = special_corpus(tmp_path)
    output = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(tmp_path / pattern), "--output", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,  # a FIFO read would wait for ever
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rejects = {Path(r["source"]).name: r for r in read_rejects(output)}
    assert {name: r["message"] for name, r in rejects.items()} == {
        name: f"not a regular file: {kind}" for name, kind in expected.items()
    }
    assert {r["reason"] for r in rejects.values()} == {"unreadable_file"}
    manifest = read_manifest(output)
    errors = {Path(i["source"]).name: i["error"] for i in manifest["inputs"]}
    assert errors == {"good.jsonl": "", **{name: f"not a regular file: {kind}" for name, kind in expected.items()}}
    assert (manifest["counts"]["files_read"], manifest["counts"]["documents_chunked"]) == (7, 1)


# --- file names fsspec would read as URLs ---------------------------------------------------


def test_file_names_with_double_colons_are_read_as_themselves(tmp_path: Path) -> None:
    """``::`` is fsspec's URL chaining: ``notes::v2.jsonl`` must open that file, not ``notes``."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "good.jsonl").write_text(json.dumps({"id": "good", "text": PROSE}) + "\n", encoding="utf-8")
    (corpus / "notes::v2.jsonl").write_text(json.dumps({"id": "notes", "text": PROSE}) + "\n", encoding="utf-8")
    (corpus / "a::b::c.txt").write_text(PROSE, encoding="utf-8")
    (corpus / "notes").write_text("a decoy the chained URL would open", encoding="utf-8")
    output = tmp_path / "out"
    code, log = run_cli(["--input", str(corpus), "--output", str(output)])
    assert code == 0, log[-3000:]
    assert {c["doc_id"] for c in read_chunks(output).to_pylist()} == {"good", "notes", "a::b::c.txt"}
    assert [(Path(r["source"]).name, r["reason"]) for r in read_rejects(output)] == [("notes", "not_text")]


# --- one file reached by several paths ----------------------------------------------------


def test_a_file_reached_by_several_paths_is_read_once(tmp_path: Path) -> None:
    corpus = tmp_path / "d"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text(json.dumps({"text": PROSE}) + "\n", encoding="utf-8")
    (corpus / "link.jsonl").symlink_to(corpus / "a.jsonl")
    (tmp_path / "alias").symlink_to(corpus)
    patterns = [
        f"{corpus}/a.jsonl",
        f"{corpus}/../d/a.jsonl",
        f"{corpus}//a.jsonl",
        f"{corpus}/*.jsonl",
        f"{tmp_path}/*/a.jsonl",
        f"{tmp_path}/alias",
        str(corpus),
    ]
    files = expand_inputs(patterns)
    assert [(f.url, f.relative_path) for f in files] == [(f"{corpus}/a.jsonl", "d/a.jsonl")]  # the broadest root
    output = tmp_path / "out"
    code, log = run_cli([arg for p in patterns for arg in ("--input", p)] + ["--output", str(output)])
    assert code == 0, log[-3000:]
    manifest = read_manifest(output)
    assert (manifest["counts"]["files_read"], manifest["counts"]["documents_chunked"]) == (1, 1)
    assert "path(s) reach a file listed already" in log


def test_overlapping_inputs_give_the_same_rows_in_either_order(tmp_path: Path) -> None:
    """A text file's id is its path relative to the root of the input that reached it: with the same file
    under two roots, the broadest one names it, whichever input comes first."""
    corpus = tmp_path / "c5"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "sub" / "t1.txt").write_text(PROSE, encoding="utf-8")
    (corpus / "top.jsonl").write_text(json.dumps({"text": PROSE}) + "\n", encoding="utf-8")
    orders = [[str(corpus), f"{corpus}/sub/*"], [f"{corpus}/sub/*", str(corpus)]]
    rows = []
    for number, patterns in enumerate(orders):
        output = tmp_path / f"out{number}"
        code, log = run_cli([arg for p in patterns for arg in ("--input", p)] + ["--output", str(output)])
        assert code == 0, log[-3000:]
        rows.append(sorted((c["doc_id"], c["chunk_id"], c["text"]) for c in read_chunks(output).to_pylist()))
    assert rows[0] == rows[1]
    assert {row[0] for row in rows[0]} == {"sub/t1.txt", content_id(PROSE)}


def test_an_existing_path_with_glob_characters_is_read_as_named(tmp_path: Path) -> None:
    literal = tmp_path / "glob[1]*?.txt"
    literal.write_text(PROSE, encoding="utf-8")
    (tmp_path / "glob1-matched-by-the-glob.txt").write_text(PROSE + " Other.", encoding="utf-8")
    folder = tmp_path / "d[x]"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"id": "in-folder", "text": PROSE}) + "\n", encoding="utf-8")
    output = tmp_path / "out"
    code, log = run_cli(["--input", str(literal), "--input", str(folder), "--output", str(output)])
    assert code == 0, log[-3000:]
    assert {c["doc_id"] for c in read_chunks(output).to_pylist()} == {"glob[1]*?.txt", "in-folder"}
    assert run_cli(["--input", str(folder), "--output", str(folder / "out")])[0] == 2  # an output inside it


# --- an output the input would read back --------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "output"),
    [
        ("d", "d/out"),
        ("d", "d"),
        ("d/**", "d/out"),
        ("d/*", "d/runs/out"),
        ("alias", "d/out"),
        ("d/**/*.parquet", "d/o"),
    ],
)
def test_an_output_inside_an_input_tree_is_refused(pattern: str, output: str, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text(json.dumps({"text": PROSE}) + "\n", encoding="utf-8")
    (tmp_path / "alias").symlink_to(tmp_path / "d")
    code, log = run_cli(["--input", str(tmp_path / pattern), "--output", str(tmp_path / output)])
    assert code == 2
    assert "is inside input" in log and "would read its own chunks back" in log
    assert not (tmp_path / output / "_manifest.json").exists()


@pytest.mark.parametrize(("pattern", "output"), [("d/*.jsonl", "d/out"), ("d", "d/_out"), ("d/**/*.jsonl", "d/out")])
def test_an_output_beside_the_input_is_not_read_back_by_a_rerun(pattern: str, output: str, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text(json.dumps({"text": PROSE}) + "\n", encoding="utf-8")
    argv = ["--input", str(tmp_path / pattern), "--output", str(tmp_path / output)]
    rows = []
    for _ in range(2):
        code, log = run_cli(argv)
        assert code == 0, log[-3000:]
        rows.append(read_chunks(tmp_path / output).num_rows)
        assert read_manifest(tmp_path / output)["counts"]["files_read"] == 1
    assert rows[0] == rows[1] > 0


# --- resource bombs -----------------------------------------------------------------------


def test_a_compressed_parquet_expanding_past_max_file_bytes_is_too_large(tmp_path: Path) -> None:
    table = pa.table({"text": [PROSE * 40] * 2000})  # ~40 MB of Parquet before zstd of the file
    raw = tmp_path / "raw.parquet"
    pq.write_table(table, raw, compression="none", use_dictionary=False)
    path = tmp_path / "a.parquet.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.read_bytes()))
    assert path.stat().st_size < 1_000_000 < raw.stat().st_size
    found = items(path, max_file_bytes=1_000_000)
    assert rejects_of(found) == [(0, "too_large")]
    assert "decompresses to over 1000000 bytes (input.max_file_bytes)" in found[0].message  # type: ignore[union-attr]
    assert len(items(path)) == 2001  # under the default bound every row is read


def test_decompressing_past_max_file_bytes_stops_jsonl_and_text_with_too_large(tmp_path: Path) -> None:
    """JSONL and text files are streamed, not spooled, but a small compressed file must not make a worker
    decompress gigabytes: past ``input.max_file_bytes`` the rest of the file is one too_large reject."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    good = [json.dumps({"id": f"good-{i}", "text": PROSE}) for i in range(3)]
    after = json.dumps({"id": "after", "text": PROSE})
    bomb = "\n".join(good).encode() + b"\n" * 5_000_000 + after.encode() + b"\n"
    (corpus / "a.jsonl.gz").write_bytes(gzip.compress(bomb))
    (corpus / "c.txt.xz").write_bytes(lzma.compress(PROSE.encode() + b" " * 5_000_000))
    (corpus / "small.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(json.dumps({"id": "small", "text": PROSE}).encode())
    )
    config = tmp_path / "bound.yaml"
    config.write_text("input:\n  max_file_bytes: 1000000\n", encoding="utf-8")
    output = tmp_path / "out"
    code, log = run_cli(["--input", str(corpus), "--output", str(output), "--config", str(config)])
    assert code == 0, log[-3000:]
    rejects = {Path(r["source"]).name: r for r in read_rejects(output)}
    assert {name: r["reason"] for name, r in rejects.items()} == dict.fromkeys(["a.jsonl.gz", "c.txt.xz"], "too_large")
    assert rejects["a.jsonl.gz"]["record"] > 3  # the line it stopped at
    for reject in rejects.values():
        assert reject["message"].startswith("decompresses to over 1000000 bytes (input.max_file_bytes)")
    assert {c["doc_id"] for c in read_chunks(output).to_pylist()} == {"good-0", "good-1", "good-2", "small"}
    assert read_manifest(output)["counts"]["records_read"] == 3 + 1 + 1 + 1


def test_a_text_of_only_invisible_characters_is_empty(tmp_path: Path) -> None:
    # Zero-width spaces and joiners, word joiners, U+FEFF, bidi marks: they used to be chunked into chunks
    # holding nothing to read or embed.
    invisible = ["\u200b" * 200, "\u200b\u2060\ufeff\u200c\u200d\u200e\u00ad\n" * 40, " \u2060\t"]
    lines = [json.dumps({"id": f"i{n}", "text": text}) for n, text in enumerate(invisible)]
    lines.append(json.dumps({"id": "ok", "text": "\u200b" + PROSE}))
    corpus = tmp_path / "a.jsonl"
    corpus.write_text("\n".join(lines))
    found = items(corpus)
    assert rejects_of(found) == [(1, "empty"), (2, "empty"), (3, "empty")]
    messages = [r.message for r in found if isinstance(r, Reject)]
    assert messages[0] == "document holds only whitespace and invisible characters (U+200B)"
    assert messages[1].startswith(
        "document holds only whitespace and invisible characters (U+00AD, U+200B, U+200C, ..."
    )
    assert [r.doc_id for r in found if isinstance(r, SourceRecord)] == ["ok"]  # a visible character is enough
    text_file = tmp_path / "b.md"
    text_file.write_text("\ufeff\u200b\n\u200b")
    assert rejects_of(items(text_file)) == [(0, "empty")]


def test_a_long_run_of_empty_lines_is_cheap(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n" * 100_000_000 + json.dumps({"text": PROSE}).encode()))
    started = time.monotonic()
    found = items(path)
    assert [(r.record, r.doc_id) for r in found if isinstance(r, SourceRecord)] == [(100_000_001, content_id(PROSE))]
    assert time.monotonic() - started < 10  # it was a Python loop turn a line: 35 s


_BOMB = """
import sys
import pyarrow as pa, pyarrow.parquet as pq

path, layout, rows, value_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
value = pa.array(["a" * value_bytes])
if layout == "dictionary":  # one dictionary page holds the value, RLE indices repeat it
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), value)
    pq.write_table(pa.table({"text": column}), path, compression="zstd", dictionary_pagesize_limit=1 << 30)
else:
    column = pa.chunked_array([value] * rows)
    pq.write_table(pa.table({"text": column}), path, compression="zstd", use_dictionary=False)
""".strip()

_READ = """
import resource, sys
from collections import Counter
from pipelines.input.expand import InputFile
from pipelines.input.source import read_file
from pipelines.settings import InputSettings
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
found = read_file(InputFile(sys.argv[1], "a.parquet"), InputSettings(max_document_chars=1_000_000))
reasons = Counter(getattr(i, "reason", type(i).__name__) for i in found)
print(dict(reasons), baseline * 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
""".strip()


@pytest.mark.parametrize("layout", ["dictionary", "plain"])
def test_a_small_parquet_of_huge_rows_stays_in_bounded_memory(layout: str, tmp_path: Path) -> None:
    """20 rows of 60 MB each in a file of a few KB: before the fix, 1.5-3.4 GB; now a few times one value."""
    path, rows, value_bytes = tmp_path / "bomb.parquet", 20, 60 << 20
    subprocess.run(
        [sys.executable, "-c", _BOMB, str(path), layout, str(rows), str(value_bytes)], check=True, timeout=300
    )
    assert path.stat().st_size < 100_000
    run = subprocess.run(
        [sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    reasons, baseline, peak = run.stdout.rsplit(" ", 2)
    assert reasons == "{'too_large': 20, 'FileReport': 1}"
    assert int(peak) - int(baseline) < 8 * value_bytes  # all 20 rows at once would be 40 x the value


# --- untrusted strings in messages --------------------------------------------------------

_ADVERSARIAL = """
import sys
from pipelines.redact import redact_url
n = 200_000
cases = ["a" * n, "a://" * (n // 4), ":" + "/" * n, "s3://" + "a" * n, "x:" * (n // 2), "Credential=" * (n // 11),
         "token=" * (n // 6), "security-token: " * (n // 16), "a" * n + "://" + "b" * n, ("https://u:p@h/" * (n // 14))]
for case in cases:
    redact_url(case)
print("done", len(cases))
""".strip()


def test_redaction_runs_in_linear_time_on_200k_adversarial_strings() -> None:
    """The old pattern took minutes on the first of these (quadratic backtracking); the timeout is generous."""
    run = subprocess.run([sys.executable, "-c", _ADVERSARIAL], capture_output=True, text=True, cwd=REPO, timeout=20)
    assert run.stdout.strip() == "done 10", run.stderr[-2000:]


def test_messages_echoing_input_are_bounded(tmp_path: Path) -> None:
    name = "c" * 200_000
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({name: ["x"], "other" * 1000: ["y"]}), path)
    found = items(path)
    reject = found[0]
    assert isinstance(reject, Reject) and reject.reason == "missing_text"
    assert len(reject.message) <= MESSAGE_CHARS and f"ccc{ELLIPSIS}, otherother" in reject.message
    line = tmp_path / "b.jsonl"
    line.write_text(json.dumps({"text": 5, "id": "i" * 100_000}) + "\n", encoding="utf-8")
    assert all(len(r.message) <= MESSAGE_CHARS for r in items(line) if isinstance(r, Reject))


def test_missing_input_message_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        expand_inputs([str(tmp_path / ("n" * 5000))])
    assert len(str(info.value)) < MESSAGE_CHARS + 40


# --- secrets ------------------------------------------------------------------------------

KEY_ID = "AKIAZERDAKEYID000042"
SECRET_KEY = "zerdaSecretAccessKey/0123456789abcdefXYZ"
SESSION_TOKEN = "FwoGZXIvYXdzEZerdaSessionToken0123456789+abc/def=="
URL_USER, URL_PASSWORD = "urluserZ9", "urlPassw0rd-9f3"


def test_redaction_of_every_url_and_header_form() -> None:
    assert redact_url(f"s3://{URL_USER}:{URL_PASSWORD}@bucket/k@1") == "s3://bucket/k@1"
    assert redact_url(f"https://{URL_USER}:{URL_PASSWORD}@host:8/a") == "https://host:8/a"
    assert redact_url(f"file:///{URL_USER}:{URL_PASSWORD}@x") == "file:///x"
    header = f"Authorization: AWS4-HMAC-SHA256 Credential={KEY_ID}/20261203/us-east-1/s3/aws4_request, Signature=abc123"
    assert KEY_ID not in redact_url(header) and "abc123" not in redact_url(header)
    assert SESSION_TOKEN not in redact_url(f"{{'X-Amz-Security-Token': b'{SESSION_TOKEN}'}}")
    assert SESSION_TOKEN not in redact_url(f"?X-Amz-Security-Token={SESSION_TOKEN}&a=b")


@pytest.fixture
def s3_corpus(s3_env: S3Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    bucket = s3_env.new_bucket()
    fs = s3_env.filesystem()
    fs.pipe(f"{bucket}/corpus/a.jsonl", (json.dumps({"text": PROSE}) + "\n{broken\n").encode())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    yield bucket


def assert_no_secret(text: str) -> None:
    for secret in (KEY_ID, SECRET_KEY, SESSION_TOKEN, URL_PASSWORD, URL_USER):
        assert secret not in text, (
            f"{secret} leaked: ...{text[max(0, text.find(secret) - 300) : text.find(secret) + 100]}"
        )


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_storage_credentials_stay_out_of_verbose_logs_of_launcher_and_workers(
    mode: str, s3_corpus: str, tmp_path: Path
) -> None:
    output = f"s3://{s3_corpus}/out-{mode}"
    argv = ["--input", f"s3://{s3_corpus}/corpus/*.jsonl", "--output", output, "--verbose"]
    argv += MULTI_PROCESS if mode == "multi_processing" else []
    run = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    logged = run.stdout + run.stderr
    assert "botocore" in logged and len(logged) > 10_000  # the debug logs were there to leak
    assert_no_secret(logged)
    import s3fs

    fs = s3fs.S3FileSystem()
    stored = "".join(fs.cat(p).decode("utf-8", "replace") for p in fs.find(output) if p.endswith((".json",)))
    stored += json.dumps(pq.read_table(f"{output.removeprefix('s3://')}/_rejects", filesystem=fs).to_pylist())
    assert_no_secret(stored)


@pytest.mark.parametrize("where", ["input", "output"])
def test_url_credentials_echoed_as_a_bucket_name_are_redacted(where: str, s3_corpus: str, tmp_path: Path) -> None:
    """s3fs takes ``user:password@bucket`` for a bucket name and echoes it in its errors."""
    secret_url = f"s3://{URL_USER}:{URL_PASSWORD}@{s3_corpus}"
    good_in, good_out = f"s3://{s3_corpus}/corpus/*.jsonl", str(tmp_path / "out")
    argv = ["--input", f"{secret_url}/corpus/*.jsonl" if where == "input" else good_in]
    argv += ["--output", f"{secret_url}/out" if where == "output" else good_out, "--verbose"]
    run = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    if where == "input":  # an input that cannot be listed is a usage error: exit 2, one line
        assert run.returncode == 2 and "cannot be listed: ParamValidationError" in run.stderr, run.stderr[-2000:]
    assert_no_secret(run.stdout + run.stderr)
