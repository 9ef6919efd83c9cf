"""Chunk a pool of documents with each splitter, rank its chunks with each retriever, score every question.

Every chunk becomes a character span of its document, so chunks of any splitter are scored alike
(:mod:`pipelines.evaluation.metrics`): recall, precision and IoU over the top k, and recall when the
ranked chunks are read to a budget of characters (or of a tokenizer's tokens), the fair comparison between
chunk sizes.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.evaluation.metrics import Scores, Span, score, within_budget
from pipelines.evaluation.questions import Question
from pipelines.evaluation.retrievers import Hybrid, Retriever, fuse
from pipelines.evaluation.splitters import Splitter
from zerda_core.chunks.tokens import CharacterMeasure

MIN_DEPTH = 64  # chunks ranked per query at least: enough to fill a budget with small chunks

Progress = Callable[[str], None]


@dataclass
class Result:
    """One (corpus, retriever, splitter): chunk statistics and per-question scores."""

    corpus: str
    retriever: str
    splitter: Splitter
    chunks: int
    mean_chars: float
    at_k: dict[int, list[Scores]]
    at_budget: dict[int, list[float]]  # recall per question


def chunk_pool(splitter: Splitter, texts: Sequence[str]) -> list[Span]:
    """Every chunk of every document of the pool, as spans."""
    return cut_pool(splitter, texts)[0]


def cut_pool(splitter: Splitter, texts: Sequence[str]) -> tuple[list[Span], list[str]]:
    """Every chunk of every document of the pool, as spans, and the text each is ranked by (its slice, or the
    splitter's own, e.g. rendered by ``embed_text``): each document cut once for both."""
    pool: list[Span] = []
    ranked: list[str] = []
    for number, text in enumerate(texts):
        spans, rendered = splitter.cut(number, text)
        pool += [Span(number, start, end) for start, end in spans]
        ranked += [text[start:end] for start, end in spans] if rendered is None else rendered
    return pool, ranked


def depth_for(
    pool: Sequence[Span], ks: Sequence[int], budgets: Sequence[int], measures: Sequence[CharacterMeasure] | None = None
) -> int:
    """How many chunks to rank: the largest k, and enough chunks of the pool's mean size to fill the largest
    budget four times over (a ranking short of a budget would lower that splitter's recall unfairly).

    Sizes in characters, or in what ``measures`` (one per document) count, as the budgets are."""
    if not pool:
        return 0
    sizes = map(len, pool) if measures is None else (measures[s.doc].size(s.start, s.end) for s in pool)
    mean = statistics.fmean(sizes) or 1.0
    wanted = max([MIN_DEPTH, *ks, 4 * math.ceil(max(budgets, default=0) / mean)])
    return min(len(pool), wanted)


def score_ranking(
    questions: Sequence[Question],
    pool: Sequence[Span],
    ranked: np.ndarray,
    ks: Sequence[int],
    budgets: Sequence[int],
    measures: Sequence[CharacterMeasure] | None = None,
) -> tuple[dict[int, list[Scores]], dict[int, list[float]]]:
    """Scores of each question's ranked chunks against its gold spans, at every k and budget (in characters,
    or in what ``measures`` count)."""
    at_k: dict[int, list[Scores]] = {k: [] for k in ks}
    at_budget: dict[int, list[float]] = {b: [] for b in budgets}
    for question, order in zip(questions, ranked, strict=True):
        spans = [pool[i] for i in order]
        for k in ks:
            at_k[k].append(score(question.gold, spans[:k]))
        for budget in budgets:
            at_budget[budget].append(score(question.gold, within_budget(spans, budget, measures)).recall)
    return at_k, at_budget


def _rankings(retrievers: Sequence[Retriever], texts: list[str], queries: list[str], depth: int) -> list[np.ndarray]:
    """Each retriever's ranking; a hybrid fuses the rankings of its parts, computed once."""
    done: dict[int, np.ndarray] = {}

    def ranked(retriever: Retriever) -> np.ndarray:
        if id(retriever) not in done:
            if isinstance(retriever, Hybrid):
                done[id(retriever)] = fuse([ranked(p) for p in retriever.parts], depth)
            else:
                done[id(retriever)] = retriever.rank(texts, queries, depth)
        return done[id(retriever)]

    return [ranked(r) for r in retrievers]


def evaluate(
    texts: Sequence[str],
    questions: Sequence[Question],
    splitters: Sequence[Splitter],
    retrievers: Sequence[Retriever],
    ks: Sequence[int],
    budgets: Sequence[int],
    corpus: str = "",
    progress: Progress | None = None,
    measures: Sequence[CharacterMeasure] | None = None,
) -> list[Result]:
    """Chunk the pool with every splitter and rank its chunks with every retriever; one result for each pair.

    Budgets count characters, or with ``measures`` (one per text) what they measure, e.g. each text's tokens.
    """
    results = []
    queries = [q.query for q in questions]
    for number, splitter in enumerate(splitters, 1):
        started = time.perf_counter()
        pool, chunk_texts = cut_pool(splitter, texts)
        mean = statistics.fmean(map(len, pool)) if pool else 0.0
        depth = depth_for(pool, ks, budgets, measures)
        if pool and questions:
            rankings = _rankings(retrievers, chunk_texts, queries, depth)
        else:
            rankings = [np.zeros((len(questions), 0), dtype=np.int64)] * len(retrievers)
        for retriever, ranked in zip(retrievers, rankings, strict=True):
            at_k, at_budget = score_ranking(questions, pool, ranked, ks, budgets, measures)
            results.append(Result(corpus, retriever.name, splitter, len(pool), mean, at_k, at_budget))
        if progress is not None:
            seconds = time.perf_counter() - started
            where = f"{corpus}: " if corpus else ""
            progress(f"[{number}/{len(splitters)}] {where}{splitter.name}: {len(pool):,} chunks, {seconds:.1f}s")
    return results


def stderr_progress(prog: str) -> Progress:
    """A progress line on standard error: ``prog: message``."""
    return lambda message: print(f"{prog}: {message}", file=sys.stderr, flush=True)
