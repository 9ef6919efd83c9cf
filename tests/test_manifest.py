"""The manifest: counts from the data on the DirectRunner, accounting, and the pure helpers."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # not collected by pytest
from apache_beam.testing.util import BeamAssertException, assert_that

from pipelines.errors import AccountingError
from pipelines.manifest import (
    BuildManifest,
    build_manifest,
    check_accounting,
    finish_manifest,
)
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
        assert manifest["inputs"][1] == {
            "source": "s3://bucket/in.jsonl",
            "bytes": 4096,
            "records": 7,
            "error": "",
            "stamp": "",
        }
        assert manifest["settings"] == SETTINGS and manifest["fingerprint"] == "abc"
        check_accounting(manifest)
        json.dumps(manifest)

    run_manifest(CHUNKS, REJECTS, REPORTS, only(check))


def test_empty_run_gives_zero_counts() -> None:
    def check(manifest: dict) -> None:
        counts = manifest["counts"]
        assert counts["records_read"] == counts["documents_chunked"] == counts["chunks"] == 0
        assert counts["chunks_by_bucket"] == {} and sum(counts["rejects"].values()) == 0
        assert counts["duplicate_doc_id_examples"] == [] and manifest["inputs"] == []
        check_accounting(manifest)

    run_manifest([], [], [], only(check))


def manifest_with(records_read: int, documents_chunked: int, rejects: dict) -> dict:
    counts = {"documents_chunked": documents_chunked, "rejects": rejects}
    return build_manifest(
        settings=SETTINGS,
        fingerprint="abc",
        output="out",
        started=STARTED,
        reports=[FileReport("in.jsonl", 1, records_read)],
        counts=counts,
    )


def test_check_accounting() -> None:
    check_accounting(manifest_with(5, 3, {"empty": 2, "too_large": 0}))
    with pytest.raises(AccountingError, match=r"records read \(5\) != documents chunked \(3\) \+ rejects \(1\)"):
        check_accounting(manifest_with(5, 3, {"empty": 1}))


def test_finish_manifest_adds_files_and_time_without_touching_the_input() -> None:
    before = manifest_with(1, 1, {})
    files = [{"path": "density_bucket=3/part-00000.parquet", "rows": 1}]
    after = finish_manifest(before, files=files, finished=STARTED + timedelta(seconds=90.5))
    assert after["timings"] == {
        "started": "2025-01-02T03:04:05+00:00",
        "finished": "2025-01-02T03:05:35.500000+00:00",
        "seconds": 90.5,
    }
    assert after["output"] == {"root": "out", "files": files}
    assert before["output"]["files"] == [] and before["timings"]["finished"] is None
    assert set(after["versions"]) == {"zerda", "apache-beam", "pyarrow", "python"}


def test_settings_must_be_json() -> None:
    with pytest.raises(TypeError):
        BuildManifest(settings={"when": STARTED}, fingerprint="abc", output="out", started=STARTED)
