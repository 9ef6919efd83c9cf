"""ChunkDocuments: density estimation and chunking per document, as a Beam ParDo.

Input: ``SourceRecord`` elements. Main output: one list per chunked document, its
chunk rows (dicts of the ``CHUNK_SCHEMA`` columns plus ``density_bucket``): a list,
not a row per element, because Beam's cost per element would otherwise be paid
per chunk (dozens a document); tagged output ``rejects``: a
``Reject`` for every record that yields no chunk; tagged output ``summaries``: one
``(doc_id, {bucket: [chunks, characters]})`` per chunked document, which the manifest
counts. A failing document becomes a
``chunker_error`` reject, never a crashed job.

Test only: :data:`FAULT_ENV` makes the DoFn fail once, to prove that a failed or retried
bundle loses and doubles nothing (see :func:`fault_from_env`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from pipelines.progress import DEFAULT_INTERVAL_SECONDS, Progress
from pipelines.records import Reject, SourceRecord, excerpt
from pipelines.schema import PARTITION_COLUMN, density_bucket
from pipelines.settings import Settings
from zerda_core.chunks import AdaptiveChunker, DocumentChunk
from zerda_core.enrich import MetadataEnricher

REJECTS = "rejects"
SUMMARIES = "summaries"
METRICS_NAMESPACE = "zerda"
FAULT_ENV = "ZERDA_INJECT_FAULT"


class InjectedFault(RuntimeError):
    """The worker failure that :data:`FAULT_ENV` asks for (tests only)."""


def fault_from_env() -> tuple[str, str] | None:
    """Test only: ``ZERDA_INJECT_FAULT="<doc_id>@<marker_path>"`` -> (doc_id, marker path), else None.

    With it set, the worker that meets ``doc_id`` first creates the marker file (a local path,
    atomically: one attempt wins across worker processes) and raises :class:`InjectedFault` before
    chunking, outside the ``chunker_error`` handling: a worker failure, not a bad document. Later
    attempts find the marker and go on, so the document fails once, on its first attempt.
    Never set it in production.
    """
    value = os.environ.get(FAULT_ENV, "")
    if not value:
        return None
    doc_id, _, marker = value.rpartition("@")
    if not doc_id or not marker:
        raise ValueError(f"{FAULT_ENV} must be '<doc_id>@<marker_path>', got {value!r}")
    return doc_id, marker


def _fail_once(doc_id: str, marker: str) -> None:
    """Raise InjectedFault if this is the first attempt (the marker did not exist yet)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    raise InjectedFault(f"injected worker failure on document {doc_id!r} ({FAULT_ENV})")


class _ChunkFn(beam.DoFn):
    """Builds the chunker once per worker in ``setup()`` from the settings dict."""

    def __init__(self, settings: dict[str, Any], progress_seconds: float) -> None:
        self._settings = settings
        self._progress_seconds = progress_seconds
        self._documents = Metrics.counter(METRICS_NAMESPACE, "documents_chunked")
        self._chunks = Metrics.counter(METRICS_NAMESPACE, "chunks_written")
        self._density = Metrics.distribution(METRICS_NAMESPACE, "density_x10000")

    def setup(self) -> None:
        settings = Settings.from_dict(self._settings)
        self._chunker = AdaptiveChunker(settings.chunk_config(), language=settings.chunking.language)
        self._enricher = MetadataEnricher(top_k=settings.enrich.top_k) if settings.enrich.keywords else None
        self._bucket_width = settings.output.bucket_width
        self._fingerprint = settings.fingerprint
        self._progress = Progress(self._progress_seconds)
        self._fault = fault_from_env()

    def process(self, record: SourceRecord) -> Iterator[Any]:
        if self._fault is not None and record.doc_id == self._fault[0]:
            _fail_once(*self._fault)
        try:
            chunks = self._chunker.chunk(record.text, doc_id=record.doc_id, source=record.source)
            if self._enricher is not None:
                self._enricher.enrich(chunks)
            rows = self._rows(record, chunks)
        except Exception as error:  # a bad document must not stop a 10 TB job
            yield self._reject(record, "chunker_error", f"{type(error).__name__}: {error}")
            return
        if not rows:
            reason = "empty" if not record.text.strip() else "below_min_chunk_size"
            yield self._reject(record, reason, f"{len(record.text.strip())} visible characters")
            return
        self._documents.inc()
        self._chunks.inc(len(rows))
        Metrics.counter(METRICS_NAMESPACE, f"chunks_bucket_{rows[0][PARTITION_COLUMN]}").inc(len(rows))
        self._density.update(round(rows[0]["density"] * 10_000))
        self._progress.add(record.source, len(record.text), len(rows))
        yield TaggedOutput(SUMMARIES, summarise(rows))
        yield rows

    def _reject(self, record: SourceRecord, reason: str, message: str) -> TaggedOutput:
        Metrics.counter(METRICS_NAMESPACE, f"rejects_{reason}").inc()
        return TaggedOutput(
            REJECTS, Reject(record.source, record.record, record.doc_id, reason, message, excerpt(record.text))
        )

    def _rows(self, record: SourceRecord, chunks: list[DocumentChunk]) -> list[dict[str, Any]]:
        """One row per chunk; a document has one density, so its rows share one bucket, worked out once."""
        if not chunks:
            return []
        bucket = density_bucket(chunks[0].metadata.extra["density"], self._bucket_width)
        return [self._row(record, chunk, bucket) for chunk in chunks]

    def _row(self, record: SourceRecord, chunk: DocumentChunk, bucket: int) -> dict[str, Any]:
        meta = chunk.metadata
        density = meta.extra["density"]
        keywords = meta.extra.get("keywords")
        return {
            "chunk_id": chunk.chunk_id,
            "doc_id": meta.doc_id,
            "source": meta.source,
            "record": record.record,
            "chunk_index": meta.chunk_index,
            "text": chunk.text,
            "char_count": chunk.char_count,
            "start_char": meta.start_char,
            "end_char": meta.end_char,
            "density": density,
            "target_size": meta.extra["target_size"],
            "chunk_type": meta.chunk_type.value,
            "language": meta.language,
            "config_fingerprint": self._fingerprint,
            "keywords": None if keywords is None else [{"term": t, "score": s} for t, s in keywords],
            PARTITION_COLUMN: bucket,
        }


class ChunkDocuments(beam.PTransform):
    """SourceRecords → each document's chunk rows as one list (main output) and rejects (``REJECTS`` tag)."""

    def __init__(self, settings: Settings, progress_seconds: float = DEFAULT_INTERVAL_SECONDS) -> None:
        super().__init__()
        self._settings = settings.to_dict()
        self._progress_seconds = progress_seconds

    def expand(self, records: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        chunk_fn = _ChunkFn(self._settings, self._progress_seconds)
        return records | "ChunkEachDocument" >> beam.ParDo(chunk_fn).with_outputs(REJECTS, SUMMARIES, main="chunks")


def summarise(rows: list[dict[str, Any]]) -> tuple[str, dict[int, list[int]]]:
    """One document's rows as the manifest counts them: ``(doc_id, {bucket: [chunks, characters]})``."""
    totals: dict[int, list[int]] = {}
    for row in rows:
        total = totals.setdefault(row[PARTITION_COLUMN], [0, 0])
        total[0] += 1
        total[1] += row["char_count"]
    return rows[0]["doc_id"], totals
