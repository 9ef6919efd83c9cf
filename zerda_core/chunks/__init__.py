"""Chunking: ``AdaptiveChunker`` and the types it returns."""

from zerda_core.chunks.adaptive_chunker import AdaptiveChunker
from zerda_core.chunks.base import BaseChunker
from zerda_core.chunks.config import ChunkConfig
from zerda_core.chunks.types import ChunkMetadata, ChunkType, Document, DocumentChunk

__all__ = ["AdaptiveChunker", "BaseChunker", "ChunkConfig", "ChunkMetadata", "ChunkType", "Document", "DocumentChunk"]
