"""The manifest: counts from the data on the DirectRunner, accounting, and the pure helpers."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # not collected by pytest
from apache_beam.testing.util import BeamAssertException, assert_that

from pipelines.errors import AccountingError, ManifestError, NewerManifestError
from pipelines.output.build_manifest import (
    BuildManifest,
    build_manifest,
    check_accounting,
    finish_manifest,
    input_rows,
)
from pipelines.output.manifest import MANIFEST_FORMAT, Manifest, footer_digest, written_footer_digest
from pipelines.output.schema import FILES_SCHEMA, INPUTS_SCHEMA
from pipelines.records import REJECT_REASONS, FileReport, Reject
from tests.output_checks import summaries_of

STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
SETTINGS = {"chunking": {"base_size": 512}, "output": {"bucket_width": 0.1}}


def row(doc_id: str, record: int, index: int, bucket: int, start: int, end: int) -> dict:
    """The fields of a chunk row the manifest reads."""
    return {
        "doc_id": doc_id,
        "record": record,
        "chunk_index": index,
        "density_bucket": bucket,
        "char_count": end - start,
        "start_char": start,
        "end_char": end,
    }


CHUNKS = [
    row("a", 1, 0, 2, 0, 100),
    row("a", 1, 1, 2, 80, 130),  # 20 characters of overlap
    row("dup", 2, 0, 7, 0, 300),
    row("dup", 3, 0, 7, 0, 10),  # a second document with the same id
    row("dup", 3, 1, 7, 12, 32),  # no overlap: two blanks between the chunks
    row("b", 4, 0, 0, 0, 5),
]
REJECTS = [
    Reject("in.jsonl", 5, "c", "empty", "empty document", ""),
    Reject("in.jsonl", 6, "", "invalid_json", "Expecting value", "{"),
    Reject("in.jsonl", 7, "", "invalid_json", "Expecting value", "]"),
]
REPORTS = [FileReport("s3://key:secret@bucket/in.jsonl", 4096, 7), FileReport("gone.gz", 10, 0, "truncated")]


def run_manifest(chunks: list, rejects: list, reports: list, check) -> None:
    with BeamTestPipeline() as p:
        pcolls = {
            "summaries": p | "Summaries" >> beam.Create(summaries_of(chunks)),
            "rejects": p | "Rejects" >> beam.Create(rejects),
            "reports": p | "Reports" >> beam.Create(reports),
        }
        manifest = pcolls | BuildManifest(settings=SETTINGS, fingerprint="abc", output="out", started=STARTED)
        assert_that(manifest, check)


def only(check):
    """An assert_that matcher: exactly one manifest, which ``check`` accepts."""

    def match(manifests: list[dict]) -> None:
        if len(manifests) != 1:
            raise BeamAssertException(f"expected one manifest, got {len(manifests)}")
        check(manifests[0])

    return match


def test_counts_come_from_the_elements() -> None:
    def check(manifest: dict) -> None:
        counts = manifest["counts"]
        assert counts["files_read"] == 2
        assert counts["records_read"] == 7
        assert counts["documents_chunked"] == 4
        assert counts["rejects"] == {**dict.fromkeys(REJECT_REASONS, 0), "empty": 1, "invalid_json": 2}
        assert counts["chunks"] == 6
        assert counts["chunks_by_bucket"] == {"0": 1, "2": 2, "7": 3}
        assert counts["chars_by_bucket"] == {"0": 5, "2": 150, "7": 330}
        assert counts["text_chars"] == 130 + 300 + 32 + 5
        assert counts["overlap_chars"] == 20
        assert counts["duplicate_doc_ids"] == 1
        assert counts["duplicate_doc_id_examples"] == ["dup"]
        assert "inputs" not in manifest and manifest["output"] == {"root": "out"}  # the files read: a table
        assert manifest["settings"] == SETTINGS and manifest["fingerprint"] == "abc"
        check_accounting(manifest)
        json.dumps(manifest)

    run_manifest(CHUNKS, REJECTS, REPORTS, only(check))


def test_empty_run_gives_zero_counts() -> None:
    def check(manifest: dict) -> None:
        counts = manifest["counts"]
        assert counts["records_read"] == counts["documents_chunked"] == counts["chunks"] == 0
        assert counts["chunks_by_bucket"] == {} and sum(counts["rejects"].values()) == 0
        assert counts["duplicate_doc_id_examples"] == [] and counts["files_read"] == 0
        check_accounting(manifest)

    run_manifest([], [], [], only(check))


def manifest_with(records_read: int, documents_chunked: int, rejects: dict) -> dict:
    counts = {"files_read": 1, "records_read": records_read, "documents_chunked": documents_chunked, "rejects": rejects}
    return build_manifest(settings=SETTINGS, fingerprint="abc", output="out", started=STARTED, counts=counts)


def test_an_input_file_is_a_row_of_the_inputs_table_its_url_without_credentials() -> None:
    assert input_rows(REPORTS[0]) == [
        {"source": "s3://bucket/in.jsonl", "bytes": 4096, "records": 7, "error": "", "stamp": ""}
    ]


def test_check_accounting() -> None:
    check_accounting(manifest_with(5, 3, {"empty": 2, "too_large": 0}))
    with pytest.raises(AccountingError, match=r"records read \(5\) != documents chunked \(3\) \+ rejects \(1\)"):
        check_accounting(manifest_with(5, 3, {"empty": 1}))


def test_finish_manifest_adds_the_time_without_touching_the_input() -> None:
    before = manifest_with(1, 1, {})
    after = finish_manifest(before, finished=STARTED + timedelta(seconds=90.5))
    assert after["timings"] == {
        "started": "2025-01-02T03:04:05+00:00",
        "finished": "2025-01-02T03:05:35.500000+00:00",
        "seconds": 90.5,
    }
    assert after["output"] == {"root": "out"} and before["timings"]["finished"] is None
    assert set(after["versions"]) == {"zerda", "apache-beam", "pyarrow", "python"}


def test_settings_must_be_json() -> None:
    with pytest.raises(TypeError):
        BuildManifest(settings={"when": STARTED}, fingerprint="abc", output="out", started=STARTED)


FILES = [
    {"path": "_manifest/inputs/part-1.pq", "rows": 2, "bytes": 0},
    {"path": "density_bucket=3/part-00000.parquet", "rows": 4, "bytes": 900},
]
INPUTS = [
    {"source": "b.jsonl", "bytes": 10, "records": 3, "error": "", "stamp": "s"},
    {"source": "a.jsonl", "bytes": 7, "records": 0, "error": "truncated", "stamp": ""},
]


def finished_manifest() -> dict:
    """A manifest as the commit writes it, non-ASCII text and its table of files included."""
    built = manifest_with(3, 2, {"empty": 1})
    finished = finish_manifest({**built, "settings": {**SETTINGS, "label": "نص"}}, finished=STARTED + timedelta(1))
    return {**finished, "output": {"root": "out", "files_table": {"path": "_manifest/files.pq", "rows": 2, "bytes": 1}}}


def write_output(root: Path) -> dict:
    """An output's manifest and its tables in ``root`` (no data files): the manifest written."""
    (root / "_manifest/inputs").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(INPUTS, schema=INPUTS_SCHEMA), root / FILES[0]["path"])
    files = [{**FILES[0], "bytes": (root / FILES[0]["path"]).stat().st_size}, FILES[1]]
    pq.write_table(pa.Table.from_pylist(files, schema=FILES_SCHEMA), root / "_manifest/files.pq")
    data = finished_manifest()
    data["output"]["files_table"]["bytes"] = (root / "_manifest/files.pq").stat().st_size
    (root / "_manifest.json").write_text(Manifest(data).dumps(), encoding="utf-8")
    return data


def test_a_manifest_round_trips_and_dumps_as_the_commit_always_wrote_it(tmp_path: Path) -> None:
    data = write_output(tmp_path)
    manifest = Manifest.load_url(str(tmp_path))
    assert Manifest.loads(manifest.dumps()) == manifest == data
    assert manifest.dumps() == json.dumps(data, indent=2, ensure_ascii=False)  # the same bytes on disk
    assert manifest.format == MANIFEST_FORMAT == 2 and manifest.fingerprint == "abc"
    assert manifest.counts["records_read"] == 3 and manifest.bucket_width == 0.1
    assert [entry["path"] for entry in manifest.files or ()] == [entry["path"] for entry in FILES]
    assert manifest.inputs == sorted(INPUTS, key=lambda entry: entry["source"])
    assert manifest.with_lists()["output"]["files"] == manifest.files
    assert manifest.started == "2025-01-02T03:04:05+00:00" and manifest.changes is None
    assert "inputs" not in json.loads(manifest.dumps()) and "files" not in json.loads(manifest.dumps())["output"]


@pytest.mark.parametrize("damage", ["files table gone", "files table resized", "inputs part gone", "a page flipped"])
def test_a_manifest_whose_tables_are_gone_or_changed_is_refused(damage: str, tmp_path: Path) -> None:
    write_output(tmp_path)
    files, part = tmp_path / "_manifest/files.pq", tmp_path / FILES[0]["path"]
    if damage == "files table gone":
        files.unlink()
    elif damage == "files table resized":
        files.write_bytes(files.read_bytes() + b"\0")
    elif damage == "inputs part gone":
        part.unlink()
    else:
        data = files.read_bytes()
        files.write_bytes(data[:8] + bytes(b ^ 0xFF for b in data[8:16]) + data[16:])
    manifest = Manifest.load_url(str(tmp_path))  # the JSON itself is whole
    with pytest.raises(ManifestError, match="its table _manifest/"):
        assert manifest.inputs


def test_a_files_table_written_before_footer_digests_were_recorded_reads(tmp_path: Path) -> None:
    """An output committed before the files table had a ``footer`` column: its entries read without one (the
    next run reads its index unchecked), not as a damaged manifest (a full run)."""
    data = write_output(tmp_path)
    older = pa.schema([field for field in FILES_SCHEMA if field.name != "footer"])
    pq.write_table(pq.read_table(tmp_path / "_manifest/files.pq").select(older.names), tmp_path / "_manifest/files.pq")
    data["output"]["files_table"]["bytes"] = (tmp_path / "_manifest/files.pq").stat().st_size
    (tmp_path / "_manifest.json").write_text(Manifest(data).dumps(), encoding="utf-8")
    inputs_part = {**FILES[0], "bytes": (tmp_path / FILES[0]["path"]).stat().st_size}
    assert Manifest.load_url(str(tmp_path)).files == [inputs_part, FILES[1]]


def test_a_format_1_manifest_reads_its_lists_from_its_json() -> None:
    older = {**finished_manifest(), "format": 1, "inputs": INPUTS, "output": {"root": "out", "files": FILES}}
    manifest = Manifest.loads(json.dumps(older))
    assert manifest.format == 1 and manifest.files == FILES and manifest.inputs == INPUTS
    assert manifest.with_lists() == older


def test_a_manifest_of_a_newer_format_is_refused_naming_both_formats() -> None:
    text = json.dumps({**finished_manifest(), "format": MANIFEST_FORMAT + 1})
    with pytest.raises(NewerManifestError) as refused:
        Manifest.loads(text, "out/_manifest.json")
    said = f"out/_manifest.json was written by a newer zerda (format 3; this zerda reads {MANIFEST_FORMAT})"
    assert str(refused.value).startswith(said)
    assert not isinstance(refused.value, ManifestError)  # a reader that starts over on a broken one must not


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{bad", "not zerda's JSON"),
        ("[]", "its JSON is an array, not an object"),
        ('{"format": "1"}', "format '1' is not a format number"),
        ('{"format": true}', "format True is not a format number"),
        ('{"format": 0}', "format 0 is not a format number"),
        ('{"changes": []}', "'changes' is not an object"),
        ('{"output": {"files": [{"path": "/etc/passwd"}]}}', "output.files is not a list of files"),
        ('{"format": 2, "output": {"files_table": {"path": "../x", "rows": 1, "bytes": 1}}}', "output.files_table"),
        ('{"format": 2, "output": {"files_table": {"path": "x", "rows": 1}}}', "output.files_table is not the table"),
    ],
)
def test_a_manifest_not_zerdas_is_refused(text: str, says: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(says)):
        Manifest.loads(text)


def test_an_older_manifest_without_a_format_or_a_file_list_reads() -> None:
    older = {key: value for key, value in finished_manifest().items() if key != "format"}
    older["output"] = {"root": "out"}
    manifest = Manifest.loads(json.dumps(older))
    assert manifest.format == 1 and manifest.files is None and manifest.inputs == [] and manifest == older


def test_a_footer_digest_taken_as_written_equals_the_one_read_back(tmp_path: Path) -> None:
    """The incremental run compares the digest the writer recorded with the one it reads: were they to differ,
    every scheduled run would fall back to a full run. A file of several row groups and nested columns."""
    rows = [{"id": n, "words": [f"w{n}"] * (n % 4), "meta": {"k": str(n)}} for n in range(5000)]
    path = tmp_path / "f.parquet"
    schema = pa.Table.from_pylist(rows[1:2]).schema
    with pq.ParquetWriter(path, schema, write_page_checksum=True) as writer:
        for start in range(0, len(rows), 1000):
            writer.write_table(pa.Table.from_pylist(rows[start : start + 1000], schema=schema))
    written = written_footer_digest(writer.writer.metadata)
    assert pq.ParquetFile(path).metadata.num_row_groups == 5
    with path.open("rb") as f:
        assert footer_digest(f) == written
    path.write_bytes(path.read_bytes()[:-12] + bytes([path.read_bytes()[-12] ^ 1]) + path.read_bytes()[-11:])
    with path.open("rb") as f:
        assert footer_digest(f) != written
