"""The chunker's contract (DESIGN.md "The chunker"), as one reusable check."""

from __future__ import annotations

import itertools

from zerda_core.chunks import AdaptiveChunker, ChunkType, DocumentChunk
from zerda_core.chunks.tokens import CHARACTERS


def assert_chunk_contract(
    chunker: AdaptiveChunker, text: str, chunks: list[DocumentChunk], *, hard_bound: bool = True
) -> None:
    """Exact slices, nothing lost, size bound, advancing overlap, one density (and one target) per document.

    With ``density_scope="section"`` each chunk has its own target and ``local_density``; the
    size bound and the overlap cap are then each chunk's own. With ``size_unit="tokens"`` sizes
    are the tokenizer's: each chunk's ``token_count`` is its own count and within its target, the
    merged tail included (``hard_bound=False`` where a test expects the documented exception), and
    the overlap spans at most ``overlap`` of the document's tokens.
    """
    if len(text.strip()) < max(chunker.min_chunk_size, 1):
        assert chunks == []
        return
    assert chunks, "a document at least min_chunk_size long must give chunks"
    section = chunker.density_scope == "section"
    counter = chunker.config.token_counter()
    measure = CHARACTERS if counter is None else counter.measure(text)
    if counter is not None:
        counts = counter.count([chunk.text for chunk in chunks])
        assert [chunk.metadata.extra["token_count"] for chunk in chunks] == counts
    else:
        assert all("token_count" not in chunk.metadata.extra for chunk in chunks)
    covered = [False] * len(text)
    for index, chunk in enumerate(chunks):
        meta = chunk.metadata
        assert meta.chunk_index == index
        assert meta.chunk_type is ChunkType.ADAPTIVE
        assert chunk.text == text[meta.start_char : meta.end_char]
        assert chunk.char_count == len(chunk.text) > 0
        assert chunk.text == chunk.text.strip(), "chunks neither start nor end with whitespace"
        target = meta.extra["target_size"]
        assert section or target == chunks[0].metadata.extra["target_size"]
        assert ("local_density" in meta.extra) == section
        assert meta.extra["density"] == chunks[0].metadata.extra["density"]
        if counter is not None:
            assert not hard_bound or meta.extra["token_count"] <= target, "a hard bound in tokens"
        elif index != len(chunks) - 1:  # in characters a merged final tail may pass its target
            assert chunk.char_count <= target
        for i in range(meta.start_char, meta.end_char):
            covered[i] = True
    for previous, current in itertools.pairwise(chunks):
        p, c = previous.metadata, current.metadata
        overlap = min(chunker.overlap, p.extra["target_size"] // 2)
        assert c.start_char > p.start_char and c.end_char > p.end_char, "each chunk advances"
        if overlap and c.start_char < p.end_char:
            assert measure.size(c.start_char, p.end_char) <= overlap, "overlap lies in the previous chunk's tail"
        else:
            assert not text[p.end_char : c.start_char].strip(), "only whitespace between chunks without overlap"
    lost = [i for i, ch in enumerate(text) if not covered[i] and not ch.isspace()]
    assert not lost, f"characters lost at {lost[:10]}"
    assert len({c.chunk_id for c in chunks}) == len(chunks)
