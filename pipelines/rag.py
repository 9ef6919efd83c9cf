"""ZerdaChunker: zerda's chunker for Beam's own RAG ingestion (``apache_beam.ml.rag``).

    MLTransform(write_artifact_location=TMP).with_transform(
        ZerdaChunker(ChunkConfig(max_size=800), document_field="body", metadata_fields=["title"])
    )

takes dicts or ``beam.Row``s (the text in ``document_field``, default ``text``; optional ``id``/``doc_id``
and ``source``; the ``metadata_fields``, default every other field, are copied into each chunk's
metadata, as :class:`~pipelines.chunk_text.ChunkText` does) and gives ``apache_beam.ml.rag.types.Chunk``s
whose ``id`` is zerda's stable chunk id, never a random UUID: a rerun, or a retried bundle, gives the
same ids, so a vector store upserts instead of doubling. ``chunk_id_fn`` replaces it, as for Beam's own
chunkers. ``index`` is the chunk's place in its document; ``metadata`` holds ``doc_id``,
``source``, ``start_char``/``end_char``, ``density``, ``target_size``, ``language`` and
``config_fingerprint`` (:func:`pipelines.settings.config_fingerprint`: the job's rows made with the same
chunking settings and template carry the same).

With ``embed_text=TEMPLATE`` (:mod:`pipelines.embed_text`, e.g. ``"{section}\n\n{text}"``) the chunk's
``content.text``, what Beam's embedding handlers embed, is the rendered template, and the exact slice of the
document is kept as ``metadata["text"]`` (so ``metadata["text"] == document[start_char:end_char]``).
Without it, ``content.text`` is the slice and ``metadata`` has no ``text`` key.

Documents that give no chunk are counted (Beam metrics ``zerda:rejects_<reason>``); with
``MLTransform(...).with_exception_handling()`` they also come out in MLTransform's error
output, one row each with the reason and message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.ml.rag.chunking.base import ChunkIdFn, ChunkingTransformProvider
from apache_beam.ml.rag.types import Chunk, Content

from pipelines.chunk_text import TEXT_KEY, ChunkText
from pipelines.embed_text import EMBED_TEXT_KEY
from pipelines.names import REJECTS
from pipelines.records import Reject
from pipelines.settings import ChunkingSettings, config_fingerprint
from zerda_core.chunks import ChunkConfig, DocumentChunk


class RejectedDocument(ValueError):
    """Why a document gave no chunk; MLTransform's error output shows it as the row's ``msg``."""


def to_beam_chunk(
    chunk: DocumentChunk, fingerprint: str, chunk_id_fn: ChunkIdFn | None = None, embedded: bool = False
) -> Chunk:
    """A zerda chunk as Beam's ``Chunk``, with zerda's stable id, or the id ``chunk_id_fn`` gives it.

    ``embedded`` (the transform has an ``embed_text`` template): the rendered ``extra["embed_text"]`` is the
    content and the slice ``metadata["text"]``, so the embedder sees the context and the store keeps the exact
    text. Without it an ``embed_text`` field of the document is plain metadata, as any other field.
    """
    meta = chunk.metadata
    extra = dict(meta.extra)
    embed_text = extra.pop(EMBED_TEXT_KEY) if embedded else None
    if embed_text is not None:
        extra[TEXT_KEY] = chunk.text
    metadata: dict[str, Any] = {
        **extra,
        "doc_id": meta.doc_id,
        "source": meta.source,
        "start_char": meta.start_char,
        "end_char": meta.end_char,
        "language": meta.language,
        "chunk_type": meta.chunk_type.value,
        "config_fingerprint": fingerprint,
    }
    content = Content(text=chunk.text if embed_text is None else embed_text)
    beam_chunk = Chunk(content=content, id=chunk.chunk_id, index=meta.chunk_index, metadata=metadata)
    if chunk_id_fn is not None:
        beam_chunk.id = chunk_id_fn(beam_chunk)
    return beam_chunk


def _as_error(reject: Reject) -> tuple[dict[str, Any], tuple[type, RejectedDocument, str]]:
    """A reject in the ``(element, (type, error, traceback))`` shape Beam's exception handling emits."""
    error = RejectedDocument(f"{reject.reason}: {reject.message}")
    return dataclasses.asdict(reject), (RejectedDocument, error, "")


class _SplitDocuments(beam.PTransform):
    """Dicts -> Beam ``Chunk``s through ChunkText; with errors on, also the rejects as a second output."""

    def __init__(self, chunk_text: ChunkText, chunk_id_fn: ChunkIdFn | None, with_errors: bool = False) -> None:
        super().__init__()
        self.chunk_text = chunk_text
        self.chunk_id_fn = chunk_id_fn
        self.with_errors = with_errors

    def expand(self, documents: beam.PCollection) -> Any:
        out = documents | "ChunkText" >> self.chunk_text
        fingerprint = config_fingerprint(self.chunk_text.chunking, self.chunk_text.embed_text)
        embedded = self.chunk_text.embed_text is not None
        chunks = out.chunks | "ToBeamChunk" >> beam.Map(to_beam_chunk, fingerprint, self.chunk_id_fn, embedded)
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
        return _SplitDocuments(self.chunk_text, self.chunk_id_fn, with_errors=True)


class ZerdaChunker(ChunkingTransformProvider):
    """A ``ChunkingTransformProvider`` for ``MLTransform``: dicts in, Beam ``Chunk``s with zerda's ids out.

    ``chunking`` is the YAML section (``ChunkingSettings``) or the library's ``ChunkConfig``.
    ``document_field``, ``metadata_fields`` and ``chunk_id_fn`` mean what they mean for Beam's
    ``LangChainChunker``, with two defaults of zerda's: every field is carried when no
    ``metadata_fields`` are named, and without ``chunk_id_fn`` the id is zerda's stable chunk id. A named
    field a document lacks is left out of its chunks' metadata rather than failing the document (Beam's
    ingestion reads metadata with ``.get``). ``embed_text`` is a template (:mod:`pipelines.embed_text`): the
    rendered text becomes ``content.text`` and the exact slice ``metadata["text"]``; None: the slice is the
    content. Settings, fields and template are checked here, when the pipeline is built.
    """

    def __init__(
        self,
        chunking: ChunkingSettings | ChunkConfig | None = None,
        *,
        document_field: str = TEXT_KEY,
        metadata_fields: Sequence[str] | None = None,
        chunk_id_fn: ChunkIdFn | None = None,
        embed_text: str | None = None,
    ) -> None:
        # chunk_id_fn is applied inside the splitter, not by Beam's base class: Beam chains its own id step
        # after the splitter, and MLTransform's exception handling skips a chained transform altogether.
        super().__init__(chunk_id_fn=None)
        self.chunk_text = ChunkText(
            chunking, document_field=document_field, metadata_fields=metadata_fields, embed_text=embed_text
        )
        self.chunking = self.chunk_text.chunking
        self.chunk_id_fn = chunk_id_fn

    def get_splitter_transform(self) -> beam.PTransform:
        return _SplitDocuments(self.chunk_text, self.chunk_id_fn)
