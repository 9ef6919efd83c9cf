"""Issue 24, bad input at scale: a flood of bad records is a bounded number of reject rows, every record
still counted by reason in the manifest; and the rules for UTF-8, duplicate keys and suffixless files.

Runs go through the CLI (``pipelines.cli.rechunk.main``) on the DirectRunner with real gzip files, and the
committed Parquet is read back with pyarrow.
"""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from fsspec.core import url_to_fs

from pipelines.chunk_text import ChunkText
from pipelines.input.context import FileContext
from pipelines.input.expand import InputFile
from pipelines.input.formats import read_jsonl
from pipelines.input.source import read_file
from pipelines.input.split import plan_parts
from pipelines.names import REJECTS
from pipelines.records import Reject, SourceRecord
from pipelines.report import scan
from pipelines.settings import InputSettings
from tests.common import MULTI_PROCESS
from tests.output_checks import read_manifest
from tests.test_reliability_input import read_rejects, run_cli

PROSE = "The river rises in the hills and runs to the sea. Farmers use its water in summer. " * 3
GOOD = json.dumps({"text": PROSE}).encode() + b"\n"


def run(tmp_path: Path, inputs: list[Path], settings: dict[str, Any] | None = None, *extra: str) -> Path:
    """One run of the CLI over ``inputs`` (with ``settings`` as its config); its OUTPUT."""
    output = tmp_path / "out"
    argv = [arg for path in inputs for arg in ("--input", str(path))] + ["--output", str(output), "--quiet", *extra]
    if settings is not None:
        config = tmp_path / "config.yaml"
        config.write_text(json.dumps(settings), encoding="utf-8")  # JSON is YAML
        argv += ["--config", str(config)]
    code, printed = run_cli(argv)
    assert code == 0, printed
    return output


def rows_by_reason(rejects: list[dict[str, Any]]) -> tuple[Counter[str], Counter[str]]:
    """(reject rows, records they stand for) by reason."""
    rows, records = Counter[str](), Counter[str]()
    for row in rejects:
        rows[row["reason"]] += 1
        records[row["reason"]] += row["count"]
    return rows, records


def test_a_flood_of_bad_lines_in_a_gzip_is_a_thousand_rows_and_one_summary(tmp_path: Path) -> None:
    flood = tmp_path / "flood.jsonl.gz"
    flood.write_bytes(gzip.compress(b"{}\n" * 200_000 + GOOD))
    output = run(tmp_path, [flood])
    rejects = read_rejects(output)
    assert len(rejects) == 1001  # the default input.max_reject_rows, then the summary
    (summary,) = [row for row in rejects if row["count"] != 1]
    assert sorted(row["record"] for row in rejects if row["count"] == 1) == list(range(1, 1001))
    assert all(row["reason"] == "missing_text" for row in rejects)
    assert summary["count"] == 199_000 and summary["record"] == 1001
    assert "199,000 more missing_text rejects, records 1001 to 200000" in summary["message"]
    counts = read_manifest(output)["counts"]
    assert counts["records_read"] == 200_001
    assert counts["documents_chunked"] == 1
    assert counts["rejects"]["missing_text"] == 200_000
    assert counts["reject_rows"] == 1001
    fs, root = url_to_fs(str(output))
    by_reason, by_file = scan.read_rejects(fs, scan.reject_files(fs, root))
    assert by_reason == {"missing_text": 200_000}  # zerda-report counts records, not rows
    assert [(f.rejects, dict(f.reasons)) for f in by_file] == [(200_000, {"missing_text": 200_000})]


def test_each_reason_is_bounded_on_its_own_read_or_chunked_across_worker_processes(tmp_path: Path) -> None:
    lines = {
        "missing_text": b"{}\n",
        "invalid_json": b"[1]\n",
        "empty": b'{"text": "   "}\n',
        "below_min_chunk_size": b'{"text": "too short"}\n',
    }
    corpus = tmp_path / "mixed.jsonl.gz"
    corpus.write_bytes(gzip.compress(b"".join(line * 40 for line in lines.values()) + GOOD * 3))
    few = tmp_path / "few.jsonl"
    few.write_bytes(b"{}\n" * 5 + GOOD)  # at the limit: no summary row
    output = run(tmp_path, [corpus, few], {"input": {"max_reject_rows": 5}}, *MULTI_PROCESS)
    rejects = read_rejects(output)
    mixed = [row for row in rejects if row["source"].endswith("mixed.jsonl.gz")]
    rows, records = rows_by_reason(mixed)
    assert rows == {reason: 6 for reason in lines}
    assert records == {reason: 40 for reason in lines}
    assert sorted(row["count"] for row in rejects if row["source"].endswith("few.jsonl")) == [1] * 5
    counts = read_manifest(output)["counts"]
    assert counts["records_read"] == 4 * 40 + 3 + 5 + 1
    assert {reason: n for reason, n in counts["rejects"].items() if n} == {**records, "missing_text": 45}
    assert counts["reject_rows"] == len(rejects) == 4 * 6 + 5


def test_a_split_file_is_bounded_per_part_and_counted_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes((b"{}\n" * 3000 + GOOD) * 4)
    settings = {"input": {"max_reject_rows": 10, "split_bytes": 8192}}
    parts = plan_parts(InputFile(str(big), "big.jsonl", big.stat().st_size), InputSettings(**settings["input"]))
    assert len(parts) > 2
    output = run(tmp_path, [big], settings)
    rejects = read_rejects(output)
    assert len(rejects) == len(parts) * 11  # each part holds more than 10 bad lines: 10 rows and a summary
    assert sum(row["count"] for row in rejects) == 12_000
    counts = read_manifest(output)["counts"]
    assert counts["rejects"]["missing_text"] == 12_000
    assert counts["records_read"] == 12_004 and counts["documents_chunked"] == 4


def test_chunk_text_bounds_rejects_when_asked_and_keeps_all_by_default() -> None:
    texts = ["", " ", "\n"] * 4

    def reasons_and_counts(max_reject_rows: int | None) -> None:
        with BeamTestPipeline() as pipeline:
            out = pipeline | beam.Create(texts) | ChunkText(max_reject_rows=max_reject_rows)
            counted = out[REJECTS] | beam.Map(lambda reject: (reject.reason, reject.count))
            expected = [("empty", 1)] * 12 if max_reject_rows is None else [("empty", 1)] * 5 + [("empty", 7)]
            assert_that(counted, equal_to(expected))

    reasons_and_counts(None)
    reasons_and_counts(5)


# --- which fields must be valid: the ones zerda reads ---------------------------------------


def read_items(path: Path, **settings: Any) -> list[Any]:
    return list(read_file(InputFile(str(path), path.name), InputSettings(**settings)))


BAD_VALUES = {"invalid UTF-8": b"caf\xe9 \xff", "lone surrogate": b"caf\\ud800"}


@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
@pytest.mark.parametrize("field", ["text", "id", "source_url"])
def test_invalid_utf8_and_lone_surrogates_reject_a_record_only_in_a_field_zerda_reads(
    bad: str, field: str, tmp_path: Path
) -> None:
    values = {"id": b"doc-1", "text": PROSE.encode(), "source_url": b"http://example.com/"}
    values[field] += b" " + BAD_VALUES[bad]
    line = b"{" + b", ".join(b'"%s": "%s"' % (key.encode(), value) for key, value in values.items()) + b"}\n"
    path = tmp_path / "a.jsonl"
    path.write_bytes(json.dumps({"text": PROSE}).encode() + b"\n" + line)
    found = read_items(path)
    rejects = [(item.record, item.reason) for item in found if isinstance(item, Reject)]
    read = [item.record for item in found if isinstance(item, SourceRecord)]
    if field == "source_url":  # not read: it may hold anything
        assert (rejects, read) == ([], [1, 2])
    else:
        assert (rejects, read) == ([(2, "invalid_utf8")], [1])
        (reject,) = [item for item in found if isinstance(item, Reject)]
        expected = "(byte 0xE9) at character" if bad == "invalid UTF-8" else "lone surrogate U+D800 at character"
        assert expected in reject.message and reject.message.endswith(f"of the {field}") is (bad == "invalid UTF-8")
    replaced = read_items(path, encoding_errors="replace")
    assert [item.record for item in replaced if isinstance(item, SourceRecord)] == [1, 2]


def test_invalid_utf8_in_a_line_that_is_no_json_is_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "short"} \xff\n{"text": "caf\xe9\n')
    rejects = [(r.record, r.reason, r.message, r.excerpt) for r in read_items(path) if isinstance(r, Reject)]
    assert rejects == [
        (1, "invalid_utf8", "invalid UTF-8 at byte 18: invalid start byte", '{"text": "short"} \\xff\n'),
        (2, "invalid_utf8", "invalid UTF-8 at byte 13: invalid continuation byte", '{"text": "caf\\xe9\n'),
    ]


@pytest.mark.parametrize(
    ("line", "reject"),
    [
        ('{"text": "%s", "text": "%s"}', "key 'text' appears 2 times: which value to read?"),
        ('{"id": "a", "text": "%s", "id": "b", "id": "%s"}', "key 'id' appears 3 times: which value to read?"),
        ('{"tag": 1, "text": "%s", "tag": "%s"}', None),
        ('{"meta": {"text": 1, "text": 2}, "text": "%s", "n": "%s"}', None),
    ],
)
def test_a_field_zerda_reads_named_twice_is_invalid_json_others_may_repeat(
    line: str, reject: str | None, tmp_path: Path
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(line % (PROSE, PROSE) + "\n", encoding="utf-8")
    found = read_items(path)
    rejects = [(item.reason, item.message) for item in found if isinstance(item, Reject)]
    assert rejects == ([] if reject is None else [("invalid_json", reject)])
    assert len([item for item in found if isinstance(item, SourceRecord)]) == (reject is None)


# --- files without a format suffix ------------------------------------------------------------

DOCS = Path("/usr/share/doc")


def debian_docs() -> list[Path]:
    """Real files with no format suffix: Debian changelogs (``.Debian`` is no format), gzipped NEWS, READMEs."""
    found = [sorted(DOCS.glob(pattern))[:2] for pattern in ("*/changelog.Debian.gz", "*/NEWS.gz", "*/README")]
    assert all(found), f"no Debian docs under {DOCS}: a Debian system has them"
    return [path for paths in found for path in paths]


def test_files_without_a_format_suffix_are_not_text_unless_a_default_format_is_set(tmp_path: Path) -> None:
    docs = debian_docs()
    corpus = tmp_path / "corpus"
    for i, path in enumerate(docs):
        (corpus / str(i)).mkdir(parents=True)
        (corpus / str(i) / path.name).write_bytes(path.read_bytes())
    unset = tmp_path / "unset"
    code, printed = run_cli(["--input", str(corpus), "--output", str(unset), "--quiet"])
    assert code == 1 and "input.default_format: text" in printed
    rejects = read_rejects(unset)
    assert len(rejects) == len(docs) and {row["reason"] for row in rejects} == {"not_text"}
    assert all("input.default_format names one" in row["message"] for row in rejects)
    output = run(tmp_path, [corpus], {"input": {"default_format": "text"}})
    counts = read_manifest(output)["counts"]
    assert counts["documents_chunked"] == len(docs) and counts["reject_rows"] == 0
    chunks = pq.read_table(str(output), columns=["doc_id", "chunk_index", "text"]).to_pylist()
    first = {row["doc_id"]: row["text"] for row in chunks if row["chunk_index"] == 0}
    changelog = gzip.decompress(docs[0].read_bytes()).decode("utf-8")
    assert changelog.startswith(first[f"0/{docs[0].name}"])  # the gzip is read as text, decompressed


def test_a_known_or_mapped_suffix_wins_over_the_default_format(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(GOOD)
    (tmp_path / "b.log").write_bytes(GOOD)
    settings = InputSettings(default_format="text", formats={".log": "jsonl"})
    for name in ("a.jsonl", "b.log"):
        (record,) = list(read_file(InputFile(str(tmp_path / name), name), settings))[:-1]
        assert isinstance(record, SourceRecord) and record.text == PROSE  # read as JSONL, not as a JSON text


# --- the cost of a line --------------------------------------------------------------------------


class _CountingReader(io.BufferedReader):
    """A buffered stream that counts the bytes ``peek`` copies out of its buffer."""

    peeked = 0

    def peek(self, size: int = 0) -> bytes:
        ahead = super().peek(size)
        self.peeked += len(ahead)
        return ahead


@pytest.mark.parametrize("empty_runs", [[0], [1], [1, 15, 16, 17], [5000, 0, 3, 70_000]])
def test_jsonl_lines_are_read_without_copying_the_buffer_each_and_keep_their_numbers(
    empty_runs: list[int], tmp_path: Path
) -> None:
    lines = [b"{}\n" * 2000 + b"\n" * run for run in empty_runs] + [b"{}\n"]
    data = b"".join(lines)
    stream = _CountingReader(io.BytesIO(data), buffer_size=1 << 20)
    ctx = FileContext(InputFile(str(tmp_path / "a.jsonl"), "a.jsonl"), InputSettings(), "")
    found = [reject.record for reject in read_jsonl(stream, ctx)]
    expected = [number for number, line in enumerate(data.split(b"\n")[:-1], start=1) if line]
    assert found == expected
    looks = 1 + sum(run >= 16 for run in empty_runs)  # the head sniffed, each long run of empty lines
    assert stream.peeked <= looks * len(data)  # a copy of the buffer a line: thousands of copies of the file
