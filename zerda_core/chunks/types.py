"""The small value types every chunker and the pipeline share."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ChunkType(str, Enum):
    """How a chunk was cut; stored as its string value in outputs."""

    ADAPTIVE = "adaptive"


@dataclass(frozen=True)
class Document:
    """One input document: its text and where it came from."""

    text: str
    doc_id: str = ""
    source: str = ""


@dataclass(slots=True)
class ChunkMetadata:
    """Where a chunk sits in its document and how it was made.

    ``start_char``/``end_char`` are offsets into the original text, so that
    ``text[start_char:end_char] == chunk.text`` always holds.
    """

    doc_id: str
    source: str
    chunk_index: int
    chunk_type: ChunkType
    language: str
    start_char: int
    end_char: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class DocumentChunk:
    """A slice of a document, with its metadata."""

    text: str
    metadata: ChunkMetadata

    @property
    def char_count(self) -> int:
        return len(self.text)

    @property
    def chunk_id(self) -> str:
        """A stable id: the same source, document, offsets and text give the same id."""
        m = self.metadata
        key = "\x1f".join((m.source, m.doc_id, str(m.start_char), str(m.end_char), self.text))
        return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
