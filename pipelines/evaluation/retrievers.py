"""Retrievers that rank a pool of chunks for each question: BM25, a dense embedder, and their fusion.

All run offline: BM25 is bm25s with English stop words (Arabic words pass through its tokenizer); the
default dense embedder is WordLlama's l2_supercat from the files in its wheel; a sentence-transformers
model is used only when the user names one and has it. Hybrid is reciprocal rank fusion of the two
rankings (1 / (60 + rank), the constant of the RRF paper), so neither score scale dominates.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from pipelines.evaluation.splitters import version_of

RRF_K = 60


class Retriever:
    """Ranks the chunks of one pool for every query: ``rank(chunk texts, queries, depth)`` -> chunk indices."""

    name = ""
    version = ""

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        raise NotImplementedError


class BM25(Retriever):
    """bm25s with its default parameters and English stop words; raises ImportError when it is missing."""

    name = "BM25"

    def __init__(self) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
        self._bm25s = bm25s
        self.version = f"bm25s {version_of('bm25s')}"

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        tokenizer = self._bm25s.tokenization.Tokenizer(stopwords="en")
        index = self._bm25s.BM25()
        index.index(tokenizer.tokenize(chunks, return_as="tuple", show_progress=False), show_progress=False)
        asked = tokenizer.tokenize(queries, update_vocab=False, return_as="string", show_progress=False)
        found, _ = index.retrieve(asked, k=min(depth, len(chunks)), show_progress=False, n_threads=1)
        return np.asarray(found)


def top_by_similarity(similarity: np.ndarray, depth: int) -> np.ndarray:
    """Column indices of each row's ``depth`` highest similarities, best first."""
    depth = min(depth, similarity.shape[1])
    top = np.argpartition(-similarity, depth - 1, axis=1)[:, :depth]
    order = np.take_along_axis(similarity, top, axis=1).argsort(axis=1, kind="stable")[:, ::-1]
    return np.take_along_axis(top, order, axis=1)


class WordLlamaRetriever(Retriever):
    """WordLlama's l2_supercat (256 dimensions) from the files in its wheel, cosine similarity."""

    name = "WordLlama"

    def __init__(self) -> None:
        import wordllama

        # the wheel ships the weights; cache_dir points at them (see examples/rag_embeddings.py)
        self._model = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        self.version = f"wordllama {version_of('wordllama')} l2_supercat"

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        return top_by_similarity(self._model.embed(queries, norm=True) @ self._model.embed(chunks, norm=True).T, depth)


class SentenceTransformerRetriever(Retriever):
    """A sentence-transformers model the user names (and has, or may download), cosine similarity."""

    def __init__(self, model: str) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(model)
        self.name = f"ST {model}"
        self.version = f"sentence-transformers {version_of('sentence-transformers')} {model}"

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        vectors = self._model.encode(chunks, normalize_embeddings=True, show_progress_bar=False)
        asked = self._model.encode(queries, normalize_embeddings=True, show_progress_bar=False)
        return top_by_similarity(np.asarray(asked) @ np.asarray(vectors).T, depth)


def fuse(rankings: list[np.ndarray], depth: int) -> np.ndarray:
    """Reciprocal rank fusion of several rankings of the same pool, per query; ties by the first ranking."""
    fused = []
    for rows in zip(*rankings, strict=True):
        scores: dict[int, float] = {}
        for row in rows:
            for rank, chunk in enumerate(row.tolist()):
                scores[chunk] = scores.get(chunk, 0.0) + 1.0 / (RRF_K + rank + 1)
        fused.append(sorted(scores, key=lambda c: -scores[c])[:depth])
    width = min(len(r) for r in fused) if fused else 0
    return np.asarray([r[:width] for r in fused], dtype=np.int64).reshape(len(fused), width)


class Hybrid(Retriever):
    """Reciprocal rank fusion of a lexical and a dense retriever's rankings."""

    def __init__(self, parts: list[Retriever]) -> None:
        self.parts = parts
        self.name = "hybrid"
        self.version = "reciprocal rank fusion (k=60) of " + " and ".join(p.name for p in parts)

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        return fuse([p.rank(chunks, queries, depth) for p in self.parts], depth)


def dense_retriever(embedder: str) -> Retriever:
    """``wordllama`` or ``sentence-transformers:NAME``; raises ImportError when its package is missing and
    ValueError for an unknown name."""
    if embedder == "wordllama":
        return WordLlamaRetriever()
    kind, _, model = embedder.partition(":")
    if kind == "sentence-transformers" and model:
        return SentenceTransformerRetriever(model)
    raise ValueError(f"unknown --embedder {embedder!r}: use wordllama or sentence-transformers:NAME")
