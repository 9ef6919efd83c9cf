"""BaseChunker: one abstract method, and the batch helper every chunker shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from zerda_core.chunks.types import Document, DocumentChunk


class BaseChunker(ABC):
    """A chunker turns one text into exact-slice chunks; subclasses implement :meth:`chunk`."""

    @abstractmethod
    def chunk(self, text: str, doc_id: str = "", source: str = "") -> list[DocumentChunk]:
        """Cut ``text`` into chunks; an empty text gives ``[]``."""

    def chunk_documents(self, documents: Iterable[Document | Mapping[str, Any]]) -> list[DocumentChunk]:
        """Chunk many documents: :class:`Document` objects or dicts with ``text``, ``doc_id``, ``source``."""
        chunks: list[DocumentChunk] = []
        for document in documents:
            doc = as_document(document)
            chunks.extend(self.chunk(doc.text, doc_id=doc.doc_id, source=doc.source))
        return chunks


def as_document(value: Document | Mapping[str, Any]) -> Document:
    """Accept a Document or a mapping (``id`` is taken when ``doc_id`` is absent)."""
    if isinstance(value, Document):
        return value
    if isinstance(value, Mapping):
        if "text" not in value:
            raise ValueError("a document mapping needs a 'text' key")
        doc_id = value.get("doc_id", value.get("id", ""))
        return Document(text=value["text"], doc_id=str(doc_id), source=str(value.get("source", "")))
    raise TypeError(f"expected a Document or a mapping, got {type(value).__name__}")
