"""Span metrics of ``zerda-eval`` and the retrieval benchmark: how much of the gold text the retrieved chunks cover.

Every chunk and every gold answer is a half-open character span ``[start, end)`` of one document; a
question's gold answer is one span or several (their union counts, each character once).
What a retriever hands on is the text of its top chunks, one after another, so:

- *retrieved* characters are the sum of the chunks' lengths: text repeated by overlapping chunks is
  retrieved (and paid for in a prompt) twice;
- *covered* characters are the distinct gold characters inside at least one retrieved chunk of the
  gold document;
- recall = covered / gold length; precision = covered / retrieved;
  IoU = covered / (gold + retrieved - covered), so redundant overlap lowers it, as it lowers precision;
- at a budget the ranked chunks are taken whole while they fit, and the first one that does not fit is
  cut to the budget left (its beginning kept), so every tool is read to the same length; a budget counts
  characters, or the tokens of a tokenizer (an embedder's context is counted in tokens, and a token
  holds more characters of English prose than of code or Arabic);
- a mean over questions comes with a 95% interval from a seeded bootstrap over the questions, so two
  settings scored on the same questions with the same seed are resampled alike (a paired comparison).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from zerda_core.chunks.tokens import CHARACTERS, CharacterMeasure


@dataclass(frozen=True)
class Span:
    """Characters ``[start, end)`` of document ``doc``."""

    doc: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"span [{self.start}, {self.end}) is not 0 <= start <= end")

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Scores:
    """Recall, precision and IoU of one list of retrieved spans against one gold span."""

    recall: float
    precision: float
    iou: float


Gold = Span | Sequence[Span]


def merged(gold: Gold) -> list[Span]:
    """The gold spans as disjoint spans, sorted: overlapping or touching spans of one document joined."""
    spans = sorted([gold] if isinstance(gold, Span) else gold, key=lambda s: (s.doc, s.start, s.end))
    out: list[Span] = []
    for span in spans:
        if out and out[-1].doc == span.doc and span.start <= out[-1].end:
            last = out.pop()
            span = Span(span.doc, last.start, max(last.end, span.end))
        out.append(span)
    return out


def _covered_one(gold: Span, retrieved: Iterable[Span]) -> int:
    pieces = sorted(
        (max(s.start, gold.start), min(s.end, gold.end)) for s in retrieved if s.doc == gold.doc and s.end > gold.start
    )
    total, reach = 0, gold.start
    for start, end in pieces:
        start = max(start, reach)
        if end > start:
            total += end - start
            reach = end
    return total


def covered(gold: Gold, retrieved: Iterable[Span]) -> int:
    """Distinct gold characters inside at least one retrieved span of the same document."""
    retrieved = list(retrieved)
    return sum(_covered_one(span, retrieved) for span in merged(gold))


def score(gold: Gold, retrieved: Sequence[Span]) -> Scores:
    """The three scores of ``retrieved`` (all of it) against ``gold``; an empty retrieval scores 0."""
    hit = covered(gold, retrieved)
    wanted = sum(map(len, merged(gold)))
    size = sum(map(len, retrieved))
    return Scores(
        recall=hit / wanted if wanted else 0.0,
        precision=hit / size if size else 0.0,
        iou=hit / (wanted + size - hit) if wanted + size else 0.0,
    )


def within_budget(
    ranked: Iterable[Span], budget: int, measures: Sequence[CharacterMeasure] | None = None
) -> list[Span]:
    """The ranked spans a reader of ``budget`` units gets: whole while they fit, the next one cut short.

    Units are characters, or with ``measures`` (one per document, by ``Span.doc``) what each measures, e.g.
    a document's tokens (:class:`zerda_core.chunks.tokens.TokenMeasure`).
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    taken: list[Span] = []
    left = budget
    for span in ranked:
        if left <= 0:
            break
        measure = CHARACTERS if measures is None else measures[span.doc]
        size = measure.size(span.start, span.end)
        if size > left:
            span = Span(span.doc, span.start, min(measure.ahead(span.start, left), span.end))
            size = measure.size(span.start, span.end)
        taken.append(span)
        left -= size
    return taken


@dataclass(frozen=True)
class Interval:
    """A mean over questions and its 95% bootstrap interval."""

    mean: float
    low: float
    high: float


RESAMPLES = 1000


def bootstrap(values: Sequence[float], seed: int = 0, resamples: int = RESAMPLES) -> Interval:
    """The mean of ``values`` and the 2.5th-97.5th percentiles of the means of ``resamples`` resamplings.

    The resampled indices depend only on ``seed``, ``resamples`` and the number of values, so every setting
    scored on the same questions is resampled alike, and a run is repeatable.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Interval(0.0, 0.0, 0.0)
    picks = np.random.default_rng(seed).integers(0, data.size, size=(resamples, data.size))
    means = data[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(data.mean()), float(low), float(high))
