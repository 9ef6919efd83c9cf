"""ChunkDocuments on the DirectRunner: rows, rejects and metrics."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.chunking import ChunkDocuments
from pipelines.output.layout import PARTITION_COLUMN, density_bucket
from pipelines.output.schema import CHUNK_SCHEMA
from pipelines.records import SourceRecord
from pipelines.settings import Settings
from tests.common import DATA
from zerda_core.chunks import AdaptiveChunker

PROSE = (DATA / "english_prose.txt").read_text(encoding="utf-8")
CODE = (DATA / "code_python.txt").read_text(encoding="utf-8")


def test_rows_rejects_and_metrics() -> None:
    settings = Settings()
    records = [
        SourceRecord("a.txt", 0, "prose", PROSE),
        SourceRecord("b.jsonl", 3, "code", CODE),
        SourceRecord("b.jsonl", 4, "short", "Too short."),
        SourceRecord("b.jsonl", 5, "blank", "  \n "),
    ]
    expected = [
        (r.doc_id, c.metadata.chunk_index, c.text, density_bucket(c.metadata.extra["density"], 0.1))
        for r in records[:2]
        for c in AdaptiveChunker(settings.chunking.chunk_config()).chunk(r.text, r.doc_id, r.source)
    ]
    pipeline = TestPipeline()
    out = (
        pipeline
        | beam.Create(records)
        | ChunkDocuments(settings.chunking, settings.enrich, bucket_width=0.1, progress_seconds=0)
    )
    assert_that(
        out.chunks | "DocIds" >> beam.Map(lambda rows: {r["doc_id"] for r in rows}),
        equal_to([{"prose"}, {"code"}]),
        label="CheckOneListPerDocument",
    )
    rows = out.chunks | "Rows" >> beam.FlatMap(lambda rows: rows)
    assert_that(
        rows | "Key" >> beam.Map(lambda r: (r["doc_id"], r["chunk_index"], r["text"], r[PARTITION_COLUMN])),
        equal_to(expected),
        label="CheckRows",
    )
    assert_that(
        rows | "Columns" >> beam.Map(lambda r: sorted(r)),
        equal_to([sorted([*CHUNK_SCHEMA.names, PARTITION_COLUMN])] * len(expected)),
        label="CheckColumns",
    )
    assert_that(
        out.rejects | "Reasons" >> beam.Map(lambda r: (r.doc_id, r.record, r.reason)),
        equal_to([("short", 4, "below_min_chunk_size"), ("blank", 5, "empty")]),
        label="CheckRejects",
    )
    result = pipeline.run()
    result.wait_until_finish()
    metrics = result.metrics().query(MetricsFilter().with_namespace("zerda"))
    counters = {c.key.metric.name: c.committed for c in metrics["counters"]}
    buckets = [bucket for *_, bucket in expected]
    assert counters["documents_chunked"] == 2
    assert counters["chunks_written"] == len(expected)
    assert {k: v for k, v in counters.items() if k.startswith("chunks_bucket_")} == {
        f"chunks_bucket_{b}": buckets.count(b) for b in set(buckets)
    }
    assert counters["rejects_below_min_chunk_size"] == counters["rejects_empty"] == 1
    (density,) = metrics["distributions"]
    assert density.committed.count == 2
