"""Span metrics of the retrieval benchmark: how much of a gold character span the retrieved chunks cover.

Every chunk and every gold answer is a half-open character span ``[start, end)`` of one document.
What a retriever hands on is the text of its top chunks, one after another, so:

- *retrieved* characters are the sum of the chunks' lengths: text repeated by overlapping chunks is
  retrieved (and paid for in a prompt) twice;
- *covered* characters are the distinct gold characters inside at least one retrieved chunk of the
  gold document;
- recall = covered / gold length; precision = covered / retrieved;
  IoU = covered / (gold + retrieved - covered), so redundant overlap lowers it, as it lowers precision;
- at a character budget the ranked chunks are taken whole while they fit, and the first one that does
  not fit is cut to the characters left (its beginning kept), so every tool is read to the same length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


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


def covered(gold: Span, retrieved: Iterable[Span]) -> int:
    """Distinct characters of ``gold`` inside at least one retrieved span of the same document."""
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


def score(gold: Span, retrieved: Sequence[Span]) -> Scores:
    """The three scores of ``retrieved`` (all of it) against ``gold``; an empty retrieval scores 0."""
    hit = covered(gold, retrieved)
    size = sum(map(len, retrieved))
    return Scores(
        recall=hit / len(gold) if len(gold) else 0.0,
        precision=hit / size if size else 0.0,
        iou=hit / (len(gold) + size - hit) if len(gold) + size else 0.0,
    )


def within_budget(ranked: Iterable[Span], budget: int) -> list[Span]:
    """The ranked spans a reader of ``budget`` characters gets: whole while they fit, the next one cut short."""
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    taken: list[Span] = []
    left = budget
    for span in ranked:
        if left <= 0:
            break
        if len(span) > left:
            span = Span(span.doc, span.start, span.start + left)
        taken.append(span)
        left -= len(span)
    return taken
