"""ChunkDocuments: the job's chunking step, built on :class:`~pipelines.chunk_text.ChunkText`.

Input: ``SourceRecord`` elements. ``ChunkText`` (one list of ``DocumentChunk``s a document)
does the density estimation and chunking; this step adds keywords when enrichment is on and
turns each document's chunks into its rows. Main output: one list per chunked document, its
chunk rows (dicts of the ``CHUNK_SCHEMA`` columns plus ``density_bucket``): a list,
not a row per element, because Beam's cost per element would otherwise be paid
per chunk (dozens a document); tagged output ``rejects``: a
``Reject`` for every record that yields no chunk; tagged output ``summaries``: one
``(doc_id, {bucket: [chunks, characters, text, overlap]})`` per chunked document, which the
manifest counts. A failing document becomes a ``chunker_error`` reject, never a crashed job.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.typehints.decorators import no_annotations

from pipelines.chunk_text import ChunkText, reject_summaries
from pipelines.embed_text import EMBED_TEXT_KEY
from pipelines.names import METRICS_NAMESPACE, REJECTS, SUMMARIES
from pipelines.output.layout import PARTITION_COLUMN, density_bucket
from pipelines.progress import DEFAULT_INTERVAL_SECONDS, Progress
from pipelines.records import Reject, RejectLimit, excerpt
from pipelines.settings import ChunkingSettings, EnrichSettings, Settings, config_fingerprint
from zerda_core.chunks import DocumentChunk
from zerda_core.enrich import MetadataEnricher


class _RowsFn(beam.DoFn):
    """One document's chunks -> its rows (enriched when asked) and its summary for the manifest."""

    def __init__(
        self,
        enrich: EnrichSettings,
        bucket_width: float,
        fingerprint: str,
        progress_seconds: float,
        max_reject_rows: int | None,
    ) -> None:
        self._enrich = enrich
        self._max_reject_rows = max_reject_rows
        self._bucket_width = bucket_width
        self._fingerprint = fingerprint
        self._progress_seconds = progress_seconds

    def setup(self) -> None:
        self._enricher = MetadataEnricher(top_k=self._enrich.top_k) if self._enrich.keywords else None
        self._progress = Progress(self._progress_seconds)

    def start_bundle(self) -> None:
        self._limit = RejectLimit(self._max_reject_rows)

    def finish_bundle(self) -> Iterator[TaggedOutput]:
        yield from reject_summaries(self._limit)

    def process(self, chunks: list[DocumentChunk]) -> Iterator[Any]:
        first = chunks[0].metadata
        try:
            if self._enricher is not None:
                self._enricher.enrich(chunks)
            bucket = density_bucket(first.extra["density"], self._bucket_width)
            rows = [self._row(chunk, bucket) for chunk in chunks]
        except Exception as error:  # a bad document must not stop a 10 TB job
            message = f"{type(error).__name__}: {error}"
            Metrics.counter(METRICS_NAMESPACE, "rejects_chunker_error").inc()
            record = first.extra.get("record", 0)
            reject = Reject(first.source, record, first.doc_id, "chunker_error", message, excerpt(chunks[0].text))
            if self._limit.admit(reject):
                yield TaggedOutput(REJECTS, reject)
            return
        Metrics.counter(METRICS_NAMESPACE, f"chunks_bucket_{bucket}").inc(len(rows))
        self._progress.add(first.source, chunks[-1].metadata.end_char, len(rows))
        yield TaggedOutput(SUMMARIES, summarise(rows))
        yield rows

    def _row(self, chunk: DocumentChunk, bucket: int) -> dict[str, Any]:
        meta = chunk.metadata
        keywords = meta.extra.get("keywords")
        return {
            "chunk_id": chunk.chunk_id,
            "doc_id": meta.doc_id,
            "source": meta.source,
            "record": meta.extra.get("record", 0),
            "chunk_index": meta.chunk_index,
            "text": chunk.text,
            "char_count": chunk.char_count,
            "start_char": meta.start_char,
            "end_char": meta.end_char,
            "density": meta.extra["density"],
            "target_size": meta.extra["target_size"],
            "chunk_type": meta.chunk_type.value,
            "language": meta.language,
            "config_fingerprint": self._fingerprint,
            "keywords": None if keywords is None else [{"term": t, "score": s} for t, s in keywords],
            "local_density": meta.extra.get("local_density"),
            "section": meta.extra.get("section"),
            "token_count": meta.extra.get("token_count"),
            "embed_text": meta.extra.get(EMBED_TEXT_KEY),
            PARTITION_COLUMN: bucket,
        }


class ChunkDocuments(beam.PTransform):
    """SourceRecords → each document's chunk rows as one list (main output) and rejects (``REJECTS`` tag).

    It takes only the settings it needs: the chunking and enrichment sections, the bucket width,
    the reject rows kept per source and reason in a bundle (``input.max_reject_rows``; None: all) and the
    ``embed_text`` template (``output.embed_text``; None: the column is null). Every row's
    ``config_fingerprint`` is made from the chunking settings and the template
    (:func:`pipelines.settings.config_fingerprint`), as ``ZerdaChunker``'s.
    """

    def __init__(
        self,
        chunking: ChunkingSettings,
        enrich: EnrichSettings,
        *,
        bucket_width: float,
        progress_seconds: float = DEFAULT_INTERVAL_SECONDS,
        max_reject_rows: int | None = None,
        embed_text: str | None = None,
    ) -> None:
        super().__init__()
        self._chunk_text = ChunkText(
            chunking, per_document=True, max_reject_rows=max_reject_rows, embed_text=embed_text
        )
        fingerprint = config_fingerprint(chunking, embed_text)
        self._rows_fn = _RowsFn(enrich, bucket_width, fingerprint, progress_seconds, max_reject_rows)

    @classmethod
    def for_run(cls, settings: Settings, progress_seconds: float = DEFAULT_INTERVAL_SECONDS) -> ChunkDocuments:
        """The transform a run's settings ask for, whatever its output (a directory or a table)."""
        return cls(
            settings.chunking,
            settings.enrich,
            bucket_width=settings.output.bucket_width,
            progress_seconds=progress_seconds,
            max_reject_rows=settings.input.max_reject_rows,
            embed_text=settings.output.embed_text,
        )

    @no_annotations
    def expand(self, records: beam.PCollection) -> ChunkedDocuments:
        chunked = records | "ChunkText" >> self._chunk_text
        rows = chunked.chunks | "ChunkRows" >> beam.ParDo(self._rows_fn).with_outputs(REJECTS, SUMMARIES, main="chunks")
        rejects = (chunked[REJECTS], rows[REJECTS]) | "AllChunkRejects" >> beam.Flatten()
        return ChunkedDocuments(rows.chunks, rejects, rows[SUMMARIES])


class ChunkedDocuments(NamedTuple):
    """What :class:`ChunkDocuments` gives: row lists, rejects and per-document summaries."""

    chunks: beam.PCollection
    rejects: beam.PCollection
    summaries: beam.PCollection


def summarise(rows: list[dict[str, Any]]) -> tuple[str, dict[int, list[int]]]:
    """One document's rows as the manifest counts them: ``(doc_id, {bucket: [chunks, characters, text, overlap]})``.

    ``characters`` sums the chunks, overlap included; ``text`` is the document's text they cover (up to the
    end of its last chunk); ``overlap`` the characters a chunk repeats from the one before.
    """
    totals: dict[int, list[int]] = {}
    spans = sorted((row["start_char"], row["end_char"]) for row in rows)
    overlap = sum(max(0, before[1] - after[0]) for before, after in itertools.pairwise(spans))
    for row in rows:
        total = totals.setdefault(row[PARTITION_COLUMN], [0, 0, 0, 0])
        total[0] += 1
        total[1] += row["char_count"]
    first = totals[rows[0][PARTITION_COLUMN]]
    first[2], first[3] = spans[-1][1], overlap
    return rows[0]["doc_id"], totals
