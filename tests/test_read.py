"""Reading corpora: glob expansion, every input rule and bad-input case, ReadCorpus on the DirectRunner."""

from __future__ import annotations

import bz2
import contextlib
import errno
import gzip
import io
import json
import logging
import lzma
import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam import Map
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.errors import InputError, StorageError
from pipelines.input import expand, formats, source
from pipelines.input.expand import InputFile, expand_inputs, sample_corpus_glob
from pipelines.input.formats import split_suffixes
from pipelines.input.read import ReadCorpus
from pipelines.input.source import read_file
from pipelines.records import EXCERPT_CHARS, FileReport, Reject, SourceRecord, content_id
from pipelines.redact import redact_url
from pipelines.settings import CORPUS_FORMATS, InputSettings, Settings

COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "": lambda data: data,
    ".gz": lambda data: gzip.compress(data, mtime=0),
    ".bz2": lambda data: bz2.compress(data, 1),  # 100 kB blocks: damage shows after a few blocks
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
    ".xz": lzma.compress,
}
COMPRESSED = [c for c in COMPRESSORS if c]


def write(path: Path, data: bytes | str, compression: str = "") -> Path:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    target = path.with_name(path.name + compression)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(COMPRESSORS[compression](raw))
    return target


def jsonl(*objects: object) -> str:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects)


def parquet_bytes(table: pa.Table, **kwargs: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue()


def read(
    path: Path | str, relative: str | None = None, **settings: object
) -> tuple[list[SourceRecord], list[Reject], FileReport]:
    """Read one file; check the stream's promises (report last, counts add up) on the way."""
    url = str(path)
    items = list(read_file(InputFile(url, relative or url.rsplit("/", 1)[-1]), InputSettings(**settings)))  # type: ignore[arg-type]
    *body, report = items
    assert isinstance(report, FileReport)
    records = [i for i in body if isinstance(i, SourceRecord)]
    rejects = [i for i in body if isinstance(i, Reject)]
    assert len(records) + len(rejects) == len(body) == report.records
    assert all(i.source == url for i in body) and report.source == url
    return records, rejects, report


def only_reject(rejects: list[Reject]) -> Reject:
    assert len(rejects) == 1, rejects
    return rejects[0]


@pytest.fixture
def memory_root() -> Iterator[str]:
    """A fresh folder in fsspec's process-wide memory filesystem, removed afterwards."""
    root = f"/zerda-test-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    yield root
    with contextlib.suppress(FileNotFoundError):
        fs.rm(root, recursive=True)


# --- expand_inputs -------------------------------------------------------------------------


def test_directory_expands_recursively_sorted_with_relative_paths(tmp_path: Path) -> None:
    for name in ["b.jsonl", "a/z.md", "a/deep/y.txt", "c.parquet"]:
        write(tmp_path / name, "x")
    files = expand_inputs([str(tmp_path)])
    assert [f.relative_path for f in files] == ["a/deep/y.txt", "a/z.md", "b.jsonl", "c.parquet"]
    assert [f.url for f in files] == [str(tmp_path / f.relative_path) for f in files]
    assert expand_inputs([str(tmp_path) + "/"]) == files


def test_glob_ids_are_relative_to_the_glob_root(tmp_path: Path) -> None:
    for name in ["docs/en/a.md", "docs/ar/b.md", "docs/ar/c.txt", "docs/top.md"]:
        write(tmp_path / name, "x")
    files = expand_inputs([str(tmp_path / "docs" / "**" / "*.md")])
    assert [f.relative_path for f in files] == ["ar/b.md", "en/a.md", "top.md"]
    files = expand_inputs([str(tmp_path / "docs" / "*" / "*.txt")])
    assert [f.relative_path for f in files] == ["ar/c.txt"]


def test_glob_matching_folders_expands_them(tmp_path: Path) -> None:
    for name in ["2024/a.jsonl", "2024/sub/b.jsonl", "2025/c.jsonl", "notes.txt"]:
        write(tmp_path / name, "x")
    files = expand_inputs([str(tmp_path / "20*")])
    assert [f.relative_path for f in files] == ["2024/a.jsonl", "2024/sub/b.jsonl", "2025/c.jsonl"]


def test_a_named_file_has_its_own_name_as_id(tmp_path: Path) -> None:
    path = write(tmp_path / "deep" / "_odd.md.gz", "x")
    assert expand_inputs([str(path)]) == [InputFile(str(path), "_odd.md.gz")]


def test_hidden_and_underscore_names_below_the_root_are_skipped_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ["keep.md", ".DS_Store", "_SUCCESS", "_rejects/part-0.parquet", ".cache/x.md", "sub/_manifest.json"]:
        write(tmp_path / name, "x")
    with caplog.at_level(logging.INFO, logger="pipelines.input.expand"):  # a --quiet run before may have raised it
        assert [f.relative_path for f in expand_inputs([str(tmp_path)])] == ["keep.md"]
    said = "skipped 5 file(s) named with a leading '.' or '_' below an input root: .DS_Store, .cache/x.md, _SUCCESS"
    assert said in caplog.text
    assert [f.relative_path for f in expand_inputs([str(tmp_path / "**")])] == ["keep.md"]


def test_overlapping_patterns_give_each_file_once(tmp_path: Path) -> None:
    for name in ["a.md", "b.md", "sub/c.md"]:
        write(tmp_path / name, "x")
    files = expand_inputs([str(tmp_path / "*.md"), str(tmp_path), str(tmp_path / "a.md")])
    assert [f.relative_path for f in files] == ["a.md", "b.md", "sub/c.md"]


@pytest.mark.parametrize("pattern", ["nothing-*.jsonl", "missing.jsonl", "missing-dir"])
def test_a_pattern_matching_nothing_is_an_input_error(tmp_path: Path, pattern: str) -> None:
    write(tmp_path / "a.jsonl", "x")
    with pytest.raises(InputError, match=re.escape(f"{pattern}' matches no file")):
        expand_inputs([str(tmp_path / "a.jsonl"), str(tmp_path / pattern)])


def test_an_empty_directory_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError):
        expand_inputs([str(tmp_path / "empty")])


def test_input_error_is_a_value_error() -> None:
    assert issubclass(InputError, ValueError)


def test_memory_filesystem_globs_keep_the_protocol(memory_root: str) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{memory_root}/corpus/a.jsonl", b"x")
    fs.pipe(f"{memory_root}/corpus/sub/b.md", b"x")
    fs.pipe(f"{memory_root}/corpus/c.txt", b"x")
    files = expand_inputs([f"memory://{memory_root}/corpus/**/*.md", f"memory://{memory_root}/corpus/*.jsonl"])
    assert files == [
        InputFile(f"memory://{memory_root}/corpus/a.jsonl", "a.jsonl"),
        InputFile(f"memory://{memory_root}/corpus/sub/b.md", "sub/b.md"),
    ]
    assert [f.relative_path for f in expand_inputs([f"memory://{memory_root}/corpus"])] == [
        "a.jsonl",
        "c.txt",
        "sub/b.md",
    ]


def test_a_listed_file_is_redacted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The relative path is redacted once a file and the stamp, made from the redacted path, not at all:
    redaction cost about 30 µs a file at launch when the stamp was redacted again."""
    os.utime(write(tmp_path / "d" / "a.jsonl?sig=S1zz&x=1", "x"), (1e9, 1e9))
    os.utime(write(tmp_path / "d" / "sub" / "b.jsonl", "x"), (1e9, 1e9))
    calls: list[str] = []

    def counted(text: str) -> str:
        calls.append(text)
        return redact_url(text)

    monkeypatch.setattr(expand, "redact_url", counted)
    files = expand_inputs([str(tmp_path / "d")])
    assert calls == ["a.jsonl?sig=S1zz&x=1", "sub/b.jsonl"]
    assert [f.relative_path for f in files] == ["a.jsonl?sig=***&x=1", "sub/b.jsonl"]
    assert [json.loads(f.stamp or "")["path"] for f in files] == ["a.jsonl?sig=***&x=1", "sub/b.jsonl"]
    assert not any("S1zz" in str(f.stamp) for f in files)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://b/x/a.jsonl", (".jsonl", "")),
        ("a.JSONL.GZ", (".jsonl", ".gz")),
        ("/d/a.ndjson.zst", (".ndjson", ".zst")),
        ("a.md.bz2", (".md", ".bz2")),
        ("a.parquet.xz", (".parquet", ".xz")),
        ("a.tar.gz", (".tar", ".gz")),
        ("README", ("", "")),
        (".hidden", ("", "")),
        ("a.gz", ("", ".gz")),
    ],
)
def test_split_suffixes(url: str, expected: tuple[str, str]) -> None:
    assert split_suffixes(url) == expected


# --- JSONL ---------------------------------------------------------------------------------


def test_jsonl_records_ids_and_line_numbers(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "doc-a", "text": "first text"}),
        "",
        "   ",
        json.dumps({"id": 42, "text": "integer id"}),
        json.dumps({"text": "no id"}),
        json.dumps({"id": None, "text": "null id"}),
        json.dumps({"id": True, "text": "bool id"}),
        json.dumps({"id": "", "text": "empty id"}),
        json.dumps({"id": "x", "text": "extra fields", "meta": {"k": [1, 2]}}),
    ]
    path = write(tmp_path / "d" / "a.jsonl", "\n".join(lines) + "\n")
    records, rejects, report = read(path, "d/a.jsonl")
    assert rejects == []
    assert [(r.record, r.doc_id, r.text) for r in records] == [
        (1, "doc-a", "first text"),
        (4, "42", "integer id"),
        (5, content_id("no id"), "no id"),
        (6, content_id("null id"), "null id"),
        (7, content_id("bool id"), "bool id"),
        (8, content_id("empty id"), "empty id"),
        (9, "x", "extra fields"),
    ]
    assert report.records == 7  # blank lines are not records
    assert report.bytes_read == path.stat().st_size
    assert report.error == ""


def test_jsonl_without_final_newline_and_ndjson_suffix(tmp_path: Path) -> None:
    path = write(tmp_path / "a.ndjson", json.dumps({"text": "one"}) + "\n" + json.dumps({"text": "two"}))
    records, _, _ = read(path)
    assert [r.text for r in records] == ["one", "two"]


def test_configurable_text_and_id_fields(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", jsonl({"body": "the body", "key": "k1", "text": "not this"}, {"text": "x"}))
    records, rejects, _ = read(path, text_field="body", id_field="key")
    assert [(r.doc_id, r.text) for r in records] == [("k1", "the body")]
    assert only_reject(rejects).reason == "missing_text"
    assert "'body'" in rejects[0].message


def test_invalid_json_line_is_rejected_and_reading_goes_on(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", jsonl({"text": "before"}) + '{"text": "unclosed\n' + jsonl({"text": "after"}))
    records, rejects, _ = read(path)
    assert [r.text for r in records] == ["before", "after"]
    reject = only_reject(rejects)
    assert (reject.reason, reject.record, reject.doc_id) == ("invalid_json", 2, "a.jsonl/2")
    assert reject.message.startswith("invalid JSON: ")
    assert reject.excerpt == '{"text": "unclosed'


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("[1, 2]", "a JSON array"),
        ('"just a string"', "a JSON string"),
        ("42", "a JSON number"),
        ("1.5e3", "a JSON number"),
        ("null", "JSON null"),  # it said "a JSON NoneType"
        ("true", "a JSON boolean"),
    ],
)
def test_json_that_is_not_an_object_is_invalid_json(tmp_path: Path, line: str, kind: str) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", line + "\n"))
    assert records == []
    reject = only_reject(rejects)
    assert (reject.reason, reject.record) == ("invalid_json", 1)
    assert reject.message == f"{kind} where an object was expected"


def test_deeply_nested_json_is_invalid_json_not_a_crash(tmp_path: Path) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", "[" * 100_000 + "]" * 100_000 + "\n"))
    assert records == []
    assert only_reject(rejects).reason == "invalid_json"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"id": "m"}, "record has no field 'text'"),
        ({"text": None}, "record has 'text' = null, not a string"),
        ({"text": 12}, "record has 'text' = a JSON number, not a string"),
        ({"text": 1.5}, "record has 'text' = a JSON number, not a string"),
        ({"text": True}, "record has 'text' = a JSON boolean, not a string"),
        ({"text": ["a", "b"]}, "record has 'text' = a JSON array, not a string"),
        ({"text": {"a": 1}}, "record has 'text' = a JSON object, not a string"),
    ],
)
def test_text_missing_or_not_a_string_is_missing_text(tmp_path: Path, obj: dict[str, object], message: str) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", jsonl({"text": "ok"}, obj)))
    assert len(records) == 1
    reject = only_reject(rejects)
    assert (reject.reason, reject.record, reject.message) == ("missing_text", 2, message)
    assert reject.doc_id == ("m" if "id" in obj else "a.jsonl/2")


@pytest.mark.parametrize("text", ["", " ", "\n\t \r\n", "\u3000"])
def test_empty_and_whitespace_documents_are_empty(tmp_path: Path, text: str) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", jsonl({"id": "e", "text": text})))
    assert records == []
    assert (only_reject(rejects).reason, rejects[0].doc_id, rejects[0].record) == ("empty", "e", 1)


def test_invalid_utf8_is_rejected_by_default(tmp_path: Path) -> None:
    data = b'{"text": "good"}\n{"text": "bad \xff\xfe byte"}\n{"text": "after"}\n'
    records, rejects, _ = read(write(tmp_path / "a.jsonl", data))
    assert [r.text for r in records] == ["good", "after"]
    reject = only_reject(rejects)
    assert (reject.reason, reject.record) == ("invalid_utf8", 2)
    assert reject.message == "invalid UTF-8 (byte 0xFF) at character 4 of the text"
    assert "\\xff\\xfe" in reject.excerpt


def test_invalid_utf8_is_replaced_when_configured(tmp_path: Path) -> None:
    data = b'{"text": "bad \xff byte"}\n'
    records, rejects, _ = read(write(tmp_path / "a.jsonl", data), encoding_errors="replace")
    assert rejects == []
    assert records[0].text == "bad \ufffd byte"


def test_utf8_bom_is_stripped_from_jsonl(tmp_path: Path) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", b"\xef\xbb\xbf" + jsonl({"text": "after bom"}).encode()))
    assert rejects == []
    assert records[0].text == "after bom"


def test_crlf_jsonl_and_line_ends_inside_text_are_kept(tmp_path: Path) -> None:
    data = json.dumps({"text": "a\r\nb\rc\nd"}) + "\r\n" + json.dumps({"text": "second"}) + "\r\n"
    records, rejects, _ = read(write(tmp_path / "a.jsonl", data))
    assert rejects == []
    assert [r.text for r in records] == ["a\r\nb\rc\nd", "second"]


def test_lone_cr_does_not_split_jsonl_lines(tmp_path: Path) -> None:
    data = json.dumps({"text": "one"}) + "\r" + json.dumps({"text": "two"}) + "\n"
    records, rejects, _ = read(write(tmp_path / "a.jsonl", data))
    assert records == []
    reject = only_reject(rejects)
    assert reject.reason == "invalid_json"
    assert "the line holds carriage returns: JSONL records end at \\n" in reject.message


def test_a_bad_line_ending_in_crlf_gets_no_carriage_return_hint(tmp_path: Path) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", '{"text": \r\n'))
    assert records == []
    assert "carriage" not in only_reject(rejects).message


def test_nul_character_in_a_json_text_is_not_text(tmp_path: Path) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", jsonl({"text": "ok"}, {"text": "has \u0000 nul"})))
    assert [r.text for r in records] == ["ok"]
    reject = only_reject(rejects)
    assert (reject.reason, reject.record, reject.message) == ("not_text", 2, "NUL character at 4")


def test_binary_file_named_jsonl_is_one_not_text_reject(tmp_path: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 100
    records, rejects, report = read(write(tmp_path / "image.jsonl", data))
    assert records == []
    reject = only_reject(rejects)
    assert (reject.reason, reject.record, reject.doc_id) == ("not_text", 0, "image.jsonl")
    assert report.records == 1


def test_file_of_blank_lines_is_one_empty_reject(tmp_path: Path) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl", "\n\n  \n"))
    assert records == []
    assert (only_reject(rejects).reason, rejects[0].record, rejects[0].message) == ("empty", 0, "file holds no record")


def test_document_over_max_chars_is_too_large(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", jsonl({"text": "x" * 10}, {"text": "y" * 11}, {"text": "é" * 10}))
    records, rejects, _ = read(path, max_document_chars=10)
    assert [r.record for r in records] == [1, 3]
    reject = only_reject(rejects)
    assert (reject.reason, reject.record, reject.message) == ("too_large", 2, "11 characters, over 10")
    assert len(reject.excerpt) == 11


def test_line_too_long_for_any_allowed_document_is_skipped_unparsed(tmp_path: Path) -> None:
    limit = formats.line_limit(1)
    huge = json.dumps({"text": "z" * (limit + 5000)})
    path = write(tmp_path / "a.jsonl", jsonl({"text": "a"}) + huge + "\n" + jsonl({"text": "b"}))
    records, rejects, _ = read(path, max_document_chars=1)
    assert [(r.record, r.text) for r in records] == [(1, "a"), (3, "b")]
    reject = only_reject(rejects)
    assert (reject.reason, reject.record) == ("too_large", 2)
    assert f"line longer than {limit} bytes" in reject.message


def test_excerpts_are_bounded(tmp_path: Path) -> None:
    long_bad = '{"text": "' + "w" * 5000
    records, rejects, _ = read(write(tmp_path / "a.jsonl", long_bad + "\n" + jsonl({"text": ["q"] * 5000})))
    assert records == []
    assert [r.reason for r in rejects] == ["invalid_json", "missing_text"]
    assert all(0 < len(r.excerpt) <= EXCERPT_CHARS for r in rejects)


# --- text files ----------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".txt", ".md", ".rst", ".MD"])
def test_text_file_is_one_document_with_its_relative_path_as_id(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path / "en" / f"notes{suffix}", "# Title\n\nBody text.\n")
    records, rejects, report = read(path, f"en/notes{suffix}")
    assert rejects == []
    assert [(r.record, r.doc_id, r.text) for r in records] == [(0, f"en/notes{suffix}", "# Title\n\nBody text.\n")]
    assert report.records == 1


def test_text_keeps_crlf_and_lone_cr_and_drops_only_the_bom(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", b"\xef\xbb\xbfline one\r\nline two\rline three\n\xef\xbb\xbfkept")
    records, _, _ = read(path)
    assert records[0].text == "line one\r\nline two\rline three\n\ufeffkept"


def test_arabic_text_file(tmp_path: Path) -> None:
    text = "تتكيف الأجزاء مع كثافة المعلومات في النص.\nسطر ثان."
    records, _, _ = read(write(tmp_path / "ar.md", text))
    assert records[0].text == text


def test_invalid_utf8_text_file(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", b"caf\xe9 au lait")
    _, rejects, _ = read(path)
    assert (only_reject(rejects).reason, rejects[0].record, rejects[0].doc_id) == ("invalid_utf8", 0, "a.txt")
    records, _, _ = read(path, encoding_errors="replace")
    assert records[0].text == "caf\ufffd au lait"


def test_nul_bytes_in_a_text_file_are_not_text(tmp_path: Path) -> None:
    _, rejects, _ = read(write(tmp_path / "a.txt", b"text\x00with nul"))
    assert only_reject(rejects).reason == "not_text"
    late = b"a" * 20_000 + b"\x00" + b"b" * 10  # past the first bytes sniffed: found in the decoded text
    _, rejects, _ = read(write(tmp_path / "b.txt", late))
    assert (only_reject(rejects).reason, rejects[0].message) == ("not_text", "NUL character at 20000")


@pytest.mark.parametrize(("codec", "name"), [("utf-16", "UTF-16"), ("utf-16-be", None), ("utf-32", "UTF-32")])
@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_utf16_and_utf32_files_are_not_text_saying_how_to_convert(
    codec: str, name: str | None, suffix: str, tmp_path: Path
) -> None:
    text = json.dumps({"text": "a Windows export"}) if suffix == ".jsonl" else "a Windows export"
    data = text.encode(codec) if name else b"\xfe\xff" + text.encode(codec)  # utf-16-be writes no mark itself
    _, rejects, _ = read(write(tmp_path / f"a{suffix}", data))
    encoding = name or "UTF-16"
    assert (only_reject(rejects).reason, rejects[0].message) == (
        "not_text",
        f"{encoding} text (its byte order mark): zerda reads UTF-8; convert it (iconv -f {encoding} -t UTF-8)",
    )


def test_binary_file_matched_by_a_glob_is_not_text(tmp_path: Path) -> None:
    write(tmp_path / "corpus" / "doc.md", "# A real document, long enough to matter.")
    write(tmp_path / "corpus" / "photo.txt", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256)) * 50)
    files = expand_inputs([str(tmp_path / "corpus" / "*")])
    results = [read(f.url, f.relative_path) for f in files]
    assert [len(records) for records, _, _ in results] == [1, 0]
    assert only_reject(results[1][1]).reason == "not_text"


def test_unsupported_file_type_is_rejected_without_opening_it(tmp_path: Path) -> None:
    records, rejects, report = read(tmp_path / "never-created.png")
    assert records == []
    reject = only_reject(rejects)
    message = (
        "not a corpus file type: .png (input.formats can map a suffix to a format, input.default_format names"
        " one for every other file)"
    )
    assert (reject.reason, reject.record, reject.message) == ("not_text", 0, message)
    assert (report.records, report.bytes_read) == (1, 0)


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf"])
def test_empty_text_file_is_one_empty_reject(tmp_path: Path, content: bytes) -> None:
    records, rejects, report = read(write(tmp_path / "a.md", content))
    assert records == []
    assert (only_reject(rejects).reason, rejects[0].record) == ("empty", 0)
    assert report.records == 1


def test_whitespace_text_file_is_empty(tmp_path: Path) -> None:
    _, rejects, _ = read(write(tmp_path / "a.md", " \n\r\n\t"))
    assert (only_reject(rejects).reason, rejects[0].message) == ("empty", "document is empty or whitespace only")


def test_text_file_over_max_chars_is_too_large(tmp_path: Path) -> None:
    _, rejects, _ = read(write(tmp_path / "a.txt", "ab" * 6), max_document_chars=11)
    assert (only_reject(rejects).reason, rejects[0].message) == ("too_large", "12 characters, over 11")
    records, _, _ = read(write(tmp_path / "b.txt", "é" * 11), max_document_chars=11)  # 22 bytes, 11 characters
    assert len(records[0].text) == 11


def test_text_file_far_over_max_chars_is_not_read_whole(tmp_path: Path) -> None:
    path = write(tmp_path / "big.txt", "x" * 5_000_000)
    _, rejects, report = read(path, max_document_chars=1000)
    assert only_reject(rejects).reason == "too_large"
    assert report.bytes_read < 2_000_000


# --- compression ---------------------------------------------------------------------------


@pytest.mark.parametrize("compression", COMPRESSED)
def test_compressed_jsonl_and_text_read_like_plain(tmp_path: Path, compression: str) -> None:
    data = jsonl({"id": "1", "text": "hello"}, {"text": "مرحبا بالعالم"}) + "not json\n"
    plain = read(write(tmp_path / "p" / "a.jsonl", data), "a.jsonl")
    packed = read(write(tmp_path / "c" / "a.jsonl", data, compression), "a.jsonl")
    assert [(r.record, r.doc_id, r.text) for r in packed[0]] == [(r.record, r.doc_id, r.text) for r in plain[0]]
    assert [(r.record, r.reason) for r in packed[1]] == [(3, "invalid_json")]
    text_path = write(tmp_path / "c" / "doc.md", "# Doc\r\nbody", compression)
    records, _, report = read(text_path, f"doc.md{compression}")
    assert [(r.doc_id, r.text) for r in records] == [(f"doc.md{compression}", "# Doc\r\nbody")]
    assert report.bytes_read == text_path.stat().st_size


def numbered_lines(count: int) -> bytes:
    return jsonl(
        *({"id": f"n{i}", "text": f"line {i} " + uuid.UUID(int=i * 7919).hex * 3} for i in range(count))
    ).encode()


@pytest.mark.parametrize("compression", COMPRESSED)
def test_truncated_compressed_file_keeps_records_before_the_damage(tmp_path: Path, compression: str) -> None:
    data = COMPRESSORS[compression](numbered_lines(20_000))
    path = tmp_path / f"a.jsonl{compression}"
    path.write_bytes(data[: len(data) // 2])
    records, rejects, report = read(path)
    kept = len(records)
    assert 0 < kept < 20_000
    assert [r.doc_id for r in records] == [f"n{i}" for i in range(kept)]
    reject = only_reject(rejects)
    assert (reject.reason, reject.record, reject.doc_id) == ("unreadable_file", kept + 1, f"a.jsonl{compression}")
    assert "EOFError" in reject.message
    assert report.error.startswith("EOFError")
    assert report.records == kept + 1


def test_corrupt_zstd_keeps_records_before_the_damage(tmp_path: Path) -> None:
    data = bytearray(COMPRESSORS[".zst"](numbered_lines(20_000)))
    data[len(data) * 3 // 4] ^= 0xFF
    records, rejects, report = read(write(tmp_path / "a.jsonl.zst", bytes(data)))
    kept = len(records)
    assert 0 < kept < 20_000
    assert [r.doc_id for r in records] == [f"n{i}" for i in range(kept)]
    assert (only_reject(rejects).reason, rejects[0].record) == ("unreadable_file", kept + 1)
    assert report.error != ""


def test_truncated_compressed_text_file_is_unreadable(tmp_path: Path) -> None:
    data = COMPRESSORS[".gz"](b"some document text " * 1000)
    records, rejects, _ = read(write(tmp_path / "a.md.gz", data[:-30]))
    assert records == []
    assert (only_reject(rejects).reason, rejects[0].record) == ("unreadable_file", 0)


def test_file_named_gz_that_is_not_gzip_is_unreadable(tmp_path: Path) -> None:
    records, rejects, _ = read(write(tmp_path / "a.jsonl.gz", jsonl({"text": "plain"})))
    assert records == []
    assert only_reject(rejects).reason == "unreadable_file"
    assert "BadGzipFile" in rejects[0].message


@pytest.mark.parametrize("compression", COMPRESSED)
def test_compressed_empty_file_is_empty(tmp_path: Path, compression: str) -> None:
    _, rejects, _ = read(write(tmp_path / "a.jsonl", b"", compression))
    assert (only_reject(rejects).reason, rejects[0].record) == ("empty", 0)


# --- Parquet -------------------------------------------------------------------------------


def test_parquet_rows_are_records_numbered_from_one_across_batches(tmp_path: Path) -> None:
    count = 700  # several record batches and row groups
    table = pa.table({"id": [f"r{i}" for i in range(count)], "text": [f"row {i}" for i in range(count)]})
    path = write(tmp_path / "a.parquet", parquet_bytes(table, row_group_size=300))
    records, rejects, report = read(path)
    assert rejects == []
    assert [(r.record, r.doc_id, r.text) for r in records] == [(i + 1, f"r{i}", f"row {i}") for i in range(count)]
    assert report.bytes_read >= path.stat().st_size


def test_parquet_bad_values_and_default_ids(tmp_path: Path) -> None:
    table = pa.table({"text": ["good", None, "", "has\x00nul"], "other": [1, 2, 3, 4]})
    records, rejects, _ = read(write(tmp_path / "a.parquet", parquet_bytes(table)))
    assert [(r.record, r.doc_id) for r in records] == [(1, content_id("good"))]
    assert [(r.record, r.reason) for r in rejects] == [(2, "missing_text"), (3, "empty"), (4, "not_text")]


def test_parquet_integer_ids_and_configured_columns(tmp_path: Path) -> None:
    table = pa.table({"key": pa.array([7, None], pa.int64()), "body": ["seven", "no key"]})
    records, _, _ = read(write(tmp_path / "a.parquet", parquet_bytes(table)), text_field="body", id_field="key")
    assert [(r.doc_id, r.text) for r in records] == [("7", "seven"), (content_id("no key"), "no key")]


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        (pa.array([1, 2], pa.int32()), "an int32 value"),
        (pa.array([1, 2], pa.int64()).dictionary_encode(), "an int64 value"),
        (pa.array([1, 2], pa.uint8()), "a uint8 value"),
        (pa.array([1.5, 2.5], pa.float64()), "a double value"),
        (pa.array([1.5, 2.5], pa.float32()), "a float value"),
        (pa.array([True, False]), "a bool value"),
        (pa.array([0, 1], pa.date32()), "a date32[day] value"),
        (pa.array([0, 1], pa.timestamp("ms")), "a timestamp[ms] value"),
        (pa.array([0, 1], pa.duration("s")), "a duration[s] value"),
        (pa.array([1, 2], pa.decimal128(5, 2)), "a decimal128(5, 2) value"),
        (pa.array([["a"], ["b"]]), "a list<element: string> value"),
        (pa.array([{"a": 1}, {"a": 2}]), "a struct<a: int64> value"),
    ],
)
def test_parquet_non_string_text_column_is_missing_text_named_in_arrow_words(
    column: pa.Array, kind: str, tmp_path: Path
) -> None:
    """Parquet's own type words with their article ("an int64 value"), not Python's ("a int", "a Decimal")."""
    records, rejects, _ = read(write(tmp_path / "a.parquet", parquet_bytes(pa.table({"text": column}))))
    assert records == []
    message = f"record has 'text' = {kind}, not a string"
    assert [(r.record, r.reason, r.message) for r in rejects] == [(n, "missing_text", message) for n in (1, 2)]


def test_parquet_values_of_no_text_type_are_never_opened(tmp_path: Path) -> None:
    """A timestamp with a time zone Python does not know failed the whole file when its values were made
    (``UnknownTimeZoneError``): as text it is a missing_text row, as the id no id, and the message stays
    bounded whatever the type's name."""
    zone = "Mars/" + "x" * 5000
    stamps = pa.array([0, 1], pa.timestamp("us", tz=zone))
    table = pa.table({"text": ["a good text", None], "id": stamps})
    records, rejects, _ = read(write(tmp_path / "a.parquet", parquet_bytes(table)))
    assert [(r.record, r.doc_id, r.text) for r in records] == [(1, content_id("a good text"), "a good text")]
    assert [(r.record, r.reason) for r in rejects] == [(2, "missing_text")]
    records, rejects, _ = read(write(tmp_path / "b.parquet", parquet_bytes(pa.table({"text": stamps}))))
    assert records == []
    assert [(r.record, r.reason) for r in rejects] == [(1, "missing_text"), (2, "missing_text")]
    assert rejects[0].message.startswith("record has 'text' = a timestamp[us, tz=Mars/xxx")
    assert len(rejects[0].message) < 200


def test_parquet_binary_text_column_is_decoded(tmp_path: Path) -> None:
    table = pa.table({"text": pa.array([b"bytes text", b"bad \xff"], pa.binary())})
    records, rejects, _ = read(write(tmp_path / "a.parquet", parquet_bytes(table)))
    assert [r.text for r in records] == ["bytes text"]
    assert [(r.record, r.reason) for r in rejects] == [(2, "invalid_utf8")]


def test_parquet_without_the_text_column_is_one_missing_text_reject(tmp_path: Path) -> None:
    table = pa.table({"body": ["a", "b"], "id": ["1", "2"]})
    records, rejects, report = read(write(tmp_path / "a.parquet", parquet_bytes(table)))
    assert records == []
    reject = only_reject(rejects)
    assert (reject.reason, reject.record, reject.doc_id) == ("missing_text", 0, "a.parquet")
    assert reject.message == "no column 'text' (columns: body, id)"
    assert report.records == 1


@pytest.mark.parametrize("twice", ["text", "id"])
def test_parquet_with_a_column_it_reads_twice_is_one_unreadable_file_reject(twice: str, tmp_path: Path) -> None:
    """Arrow allows two columns of one name; which one is the text (or the id) is not zerda's guess."""
    columns = {"text": pa.array(["a b c"]), "id": pa.array(["1"])}
    table = pa.Table.from_arrays([*columns.values(), columns[twice]], names=[*columns, twice])
    records, rejects, _ = read(write(tmp_path / "a.parquet", parquet_bytes(table)))
    assert records == []
    reject = only_reject(rejects)
    assert (reject.reason, reject.record) == ("unreadable_file", 0)
    assert reject.message == f"column {twice!r} appears 2 times: which one to read?"


def test_parquet_with_no_rows_is_empty(tmp_path: Path) -> None:
    table = pa.table({"text": pa.array([], pa.string())})
    _, rejects, _ = read(write(tmp_path / "a.parquet", parquet_bytes(table)))
    assert (only_reject(rejects).reason, rejects[0].record) == ("empty", 0)


@pytest.mark.parametrize("damage", ["not parquet at all", "truncated"])
def test_corrupt_parquet_is_unreadable(tmp_path: Path, damage: str) -> None:
    good = parquet_bytes(pa.table({"text": ["a"] * 10}))
    data = damage.encode() if damage == "not parquet at all" else good[: len(good) // 2]
    records, rejects, _ = read(write(tmp_path / "a.parquet", data))
    assert records == []
    assert (only_reject(rejects).reason, rejects[0].record) == ("unreadable_file", 0)


@pytest.mark.parametrize("compression", COMPRESSED)
def test_compressed_parquet(tmp_path: Path, compression: str) -> None:
    table = pa.table({"id": ["a", "b"], "text": ["first", "second"]})
    records, _, _ = read(write(tmp_path / "a.parquet", parquet_bytes(table), compression))
    assert [(r.record, r.doc_id, r.text) for r in records] == [(1, "a", "first"), (2, "b", "second")]


# --- storage, protocols --------------------------------------------------------------------


def test_reads_from_the_memory_filesystem(memory_root: str) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{memory_root}/c/a.jsonl.gz", gzip.compress(jsonl({"text": "in memory"}).encode()))
    fs.pipe(f"{memory_root}/c/b.md", "# مذكرة\nنص".encode())
    files = expand_inputs([f"memory://{memory_root}/c"])
    texts = [read(f.url, f.relative_path)[0][0].text for f in files]
    assert texts == ["in memory", "# مذكرة\nنص"]


class _BrokenFile(io.RawIOBase):
    """A stored file whose storage fails on the second read, as a dropped connection does."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data, self._reads = io.BytesIO(data), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self._reads += 1
        if self._reads > 1:
            raise ConnectionResetError("connection reset by peer")
        return self._data.readinto(buffer)


def test_storage_failure_raises_for_a_retry_instead_of_a_reject(monkeypatch: pytest.MonkeyPatch) -> None:
    data = numbered_lines(50_000)  # over one read buffer, so the second read happens
    monkeypatch.setattr(source, "_open", lambda url: _BrokenFile(data))
    with pytest.raises(StorageError, match=re.escape("reading /x/a.jsonl failed: ConnectionResetError")):
        list(read_file(InputFile("/x/a.jsonl", "a.jsonl"), InputSettings()))


@pytest.mark.parametrize(
    ("url", "code", "rejected"),
    [
        ("/x/a.jsonl", errno.ELOOP, True),  # a local failure of this file: a reject, the job goes on
        ("/x/a.jsonl", errno.EIO, False),  # a disk's I/O error may pass: raised, never committed as a reject
        ("/x/a.jsonl", errno.EMFILE, False),  # the process's own limit: raised, so the runner retries
        ("s3://b/a.jsonl", errno.EIO, False),  # a remote failure may be the store's: raised
    ],
)
def test_an_open_failing_is_a_reject_only_when_it_is_the_files_fault(
    url: str, code: int, rejected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_open(_: str) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(source, "_open", failing_open)
    monkeypatch.setattr(source, "_not_regular", lambda _: None)
    reading = read_file(InputFile(url, "a.jsonl"), InputSettings())
    if rejected:
        reject = next(reading)
        assert isinstance(reject, Reject)
        assert (reject.reason, reject.message) == (
            "unreadable_file",
            f"cannot open the file: OSError: [Errno {code}] {os.strerror(code)}",
        )
    else:
        with pytest.raises(OSError):
            next(reading)


def test_missing_file_at_read_time_is_an_unreadable_file_reject(tmp_path: Path) -> None:
    found = list(read_file(InputFile(str(tmp_path / "gone.jsonl"), "gone.jsonl"), InputSettings()))
    assert [(r.record, r.reason) for r in found if isinstance(r, Reject)] == [(0, "unreadable_file")]
    assert found[0].message.startswith("cannot open the file: FileNotFoundError")  # type: ignore[union-attr]
    assert found[-1] == FileReport(str(tmp_path / "gone.jsonl"), 0, 1, found[0].message)  # type: ignore[union-attr]


# --- every record accounted for ------------------------------------------------------------


def test_counts_add_up_over_a_mixed_bad_file(tmp_path: Path) -> None:
    data = (
        b"\xef\xbb\xbf"
        + jsonl({"text": "good one"}, {"text": None}, [1], {"text": "  "}).encode()
        + b"{bad json\n\n"
        + b'{"text": "\xff"}\n'
        + jsonl({"text": "z" * 50}, {"text": "good two"}).encode()
    )
    records, rejects, report = read(write(tmp_path / "a.jsonl", data), max_document_chars=40)
    assert [r.record for r in records] == [1, 9]
    assert [(r.record, r.reason) for r in rejects] == [
        (2, "missing_text"),
        (3, "invalid_json"),
        (4, "empty"),
        (5, "invalid_json"),
        (7, "invalid_utf8"),
        (8, "too_large"),
    ]
    assert report.records == 8


# --- ReadCorpus on the DirectRunner ---------------------------------------------------------


def test_read_corpus_routes_records_rejects_and_reports(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", jsonl({"id": "j1", "text": "json one"}) + "{oops\n" + jsonl({"text": "json two"}))
    write(tmp_path / "sub" / "b.md", "# markdown doc", ".gz")
    write(tmp_path / "c.parquet", parquet_bytes(pa.table({"text": ["row one", None]})))
    write(tmp_path / "d.txt", b"")
    files = expand_inputs([str(tmp_path)])
    settings = Settings().input

    pipeline = BeamTestPipeline()
    out = pipeline | "Read" >> ReadCorpus(files, settings)
    assert_that(
        out.records | "RecordKeys" >> Map(lambda r: (r.doc_id, r.record, r.text)),
        equal_to(
            [
                ("j1", 1, "json one"),
                (content_id("json two"), 3, "json two"),
                ("sub/b.md.gz", 0, "# markdown doc"),
                (content_id("row one"), 1, "row one"),
            ]
        ),
        label="CheckRecords",
    )
    assert_that(
        out.rejects | "RejectKeys" >> Map(lambda r: (r.doc_id, r.record, r.reason)),
        equal_to([("a.jsonl/2", 2, "invalid_json"), ("c.parquet/2", 2, "missing_text"), ("d.txt", 0, "empty")]),
        label="CheckRejects",
    )
    assert_that(
        out.files | "ReportKeys" >> Map(lambda r: (r.source.rsplit("/", 1)[-1], r.records)),
        equal_to([("a.jsonl", 3), ("b.md.gz", 1), ("c.parquet", 2), ("d.txt", 1)]),
        label="CheckReports",
    )
    result = pipeline.run()
    result.wait_until_finish()

    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace("zerda"))["counters"]
        if c.committed
    }
    assert counters == {
        "records_read": 7,
        "files_read": 4,
        "bytes_read": sum(read(f.url, f.relative_path)[2].bytes_read for f in files),
        "rejects_invalid_json": 1,
        "rejects_missing_text": 1,
        "rejects_empty": 1,
    }


def test_read_corpus_from_memory_urls(memory_root: str) -> None:
    fs = fsspec.filesystem("memory")
    for i in range(5):
        fs.pipe(f"{memory_root}/m/part-{i}.jsonl", jsonl({"id": f"m{i}", "text": f"memory doc {i}"}).encode())
    files = expand_inputs([f"memory://{memory_root}/m/*.jsonl"])
    with BeamTestPipeline() as pipeline:
        out = pipeline | ReadCorpus(files, InputSettings(encoding_errors="replace"))
        assert_that(out.records | Map(lambda r: r.doc_id), equal_to([f"m{i}" for i in range(5)]))


# --- the bundled sample corpus -------------------------------------------------------------


def test_sample_corpus_is_bundled_and_readable() -> None:
    files = expand_inputs([sample_corpus_glob()])
    suffixes = {"".join(split_suffixes(f.url)) for f in files}
    assert {".jsonl", ".jsonl.gz", ".md", ".txt"} <= suffixes
    results = [read(f.url, f.relative_path) for f in files]
    records = [r for rs, _, _ in results for r in rs]
    rejects = [r for _, rs, _ in results for r in rs]
    assert 30 <= len(records) <= 60
    assert [r.reason for r in rejects] == ["invalid_json"]
    assert len({r.doc_id for r in records}) == len(records)
    assert sum(1 for r in records if len(r.text.strip()) < 100) == 1  # below min_chunk_size on purpose
    arabic = [r for r in records if sum("\u0600" <= ch <= "\u06ff" for ch in r.text) > len(r.text) / 3]
    assert len(arabic) >= 10
    assert any("SELECT" in r.text for r in records) and any("def " in r.text for r in records)
    assert 140_000 <= sum(len(r.text.encode("utf-8")) for r in records) <= 600_000


def test_mapped_suffixes_are_read_as_their_format(tmp_path: Path) -> None:
    """input.formats reads another suffix (compressed or not, any case) as a known format; unmapped is not_text."""
    write(tmp_path / "page.HTML", "<p>a page of text</p>")
    write(tmp_path / "rows.log", jsonl({"id": "r1", "text": "first"}) + jsonl({"text": "second"}), ".gz")
    write(tmp_path / "notes.xml", "<x/>")
    settings = InputSettings(formats={".html": "text", ".log": "jsonl"})
    got = {}
    for file in expand_inputs([str(tmp_path)]):
        for item in read_file(file, settings):
            if not isinstance(item, FileReport):
                got[item.doc_id] = item.text if isinstance(item, SourceRecord) else item.reason
    assert got == {
        "page.HTML": "<p>a page of text</p>",
        "r1": "first",
        content_id("second"): "second",
        "notes.xml": "not_text",
    }


def test_every_format_the_settings_allow_has_a_reader() -> None:
    assert set(formats.FORMATS) == set(CORPUS_FORMATS)
