"""ZerdaChunker: zerda's chunker for Beam's own RAG ingestion (``apache_beam.ml.rag``).

    MLTransform(write_artifact_location=TMP).with_transform(ZerdaChunker(ChunkingSettings(max_size=800)))

takes dicts (``text``, optional ``id``/``doc_id`` and ``source``; other keys are carried into
each chunk's metadata, as :class:`~pipelines.chunk_text.ChunkText` does) and gives
``apache_beam.ml.rag.types.Chunk``s whose ``id`` is zerda's stable chunk id, never a random
UUID: a rerun, or a retried bundle, gives the same ids, so a vector store upserts instead of
doubling. ``index`` is the chunk's place in its document; ``metadata`` holds ``doc_id``,
``source``, ``start_char``/``end_char``, ``density``, ``target_size``, ``language`` and
``config_fingerprint`` (the chunking settings' fingerprint).

Documents that give no chunk are counted (Beam metrics ``zerda:rejects_<reason>``); with
``MLTransform(...).with_exception_handling()`` they also come out in MLTransform's error
output, one row each with the reason and message.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import apache_beam as beam
from apache_beam.ml.rag.chunking.base import ChunkingTransformProvider
from apache_beam.ml.rag.types import Chunk, Content

from pipelines.chunk_text import ChunkText
from pipelines.names import REJECTS
from pipelines.records import Reject
from pipelines.settings import ChunkingSettings
from zerda_core.chunks import DocumentChunk


class RejectedDocument(ValueError):
    """Why a document gave no chunk; MLTransform's error output shows it as the row's ``msg``."""


def to_beam_chunk(chunk: DocumentChunk, fingerprint: str) -> Chunk:
    """A zerda chunk as Beam's ``Chunk``, with zerda's stable id."""
    meta = chunk.metadata
    metadata: dict[str, Any] = {
        **meta.extra,
        "doc_id": meta.doc_id,
        "source": meta.source,
        "start_char": meta.start_char,
        "end_char": meta.end_char,
        "language": meta.language,
        "chunk_type": meta.chunk_type.value,
        "config_fingerprint": fingerprint,
    }
    return Chunk(content=Content(text=chunk.text), id=chunk.chunk_id, index=meta.chunk_index, metadata=metadata)


def _as_error(reject: Reject) -> tuple[dict[str, Any], tuple[type, RejectedDocument, str]]:
    """A reject in the ``(element, (type, error, traceback))`` shape Beam's exception handling emits."""
    error = RejectedDocument(f"{reject.reason}: {reject.message}")
    return dataclasses.asdict(reject), (RejectedDocument, error, "")


class _SplitDocuments(beam.PTransform):
    """Dicts -> Beam ``Chunk``s through ChunkText; with errors on, also the rejects as a second output."""

    def __init__(self, chunking: ChunkingSettings, with_errors: bool = False) -> None:
        super().__init__()
        self.chunking = chunking
        self.with_errors = with_errors

    def expand(self, documents: beam.PCollection) -> Any:
        out = documents | "ChunkText" >> ChunkText(self.chunking)
        chunks = out.chunks | "ToBeamChunk" >> beam.Map(to_beam_chunk, self.chunking.fingerprint)
        if not self.with_errors:
            return chunks
        return chunks, out[REJECTS] | "RejectsAsErrors" >> beam.Map(_as_error)

    def with_exception_handling(
        self, *, exc_class: type = Exception, use_subprocess: bool = False, threshold: float = 1
    ) -> _SplitDocuments:
        """What ``MLTransform.with_exception_handling()`` calls: rejects become its error rows.

        Only the defaults are supported: zerda never raises on a document (every failure is already a
        reject), so there is nothing to catch in a subprocess and no failure ratio to act on.
        """
        if use_subprocess or threshold != 1:
            raise ValueError("ZerdaChunker supports with_exception_handling() with its defaults only")
        return _SplitDocuments(self.chunking, with_errors=True)


class ZerdaChunker(ChunkingTransformProvider):
    """A ``ChunkingTransformProvider`` for ``MLTransform``: dicts in, Beam ``Chunk``s with zerda's ids out."""

    def __init__(self, chunking: ChunkingSettings | None = None) -> None:
        super().__init__(chunk_id_fn=None)  # the ids are zerda's stable ones
        self.chunking = ChunkingSettings() if chunking is None else chunking
        self.chunking.chunker()  # a bad setting fails here, when the pipeline is built

    def get_splitter_transform(self) -> beam.PTransform:
        return _SplitDocuments(self.chunking)
