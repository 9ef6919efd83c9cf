"""What the report shows, as small types: groups of chunks, per-source counts, samples, stats."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import NamedTuple

from pipelines.output.manifest import Manifest

PERCENTILES = (5, 50, 95, 100)


class Group(NamedTuple):
    """Chunks of one bucket, size and language: the unit the scan aggregates to."""

    bucket: int
    char_count: int
    language: str
    chunks: int
    documents: int


class SourceCounts(NamedTuple):
    """What one input file gave: documents and chunks (from the data) and rejects."""

    source: str
    documents: int
    chunks: int
    characters: int
    rejects: int


class RejectedFile(NamedTuple):
    """One input file's rejects: how many, by reason, and the first message."""

    source: str
    rejects: int
    reasons: Mapping[str, int]
    message: str


class Sample(NamedTuple):
    """A chunk shown as an example of its bucket, its text cut to ``SAMPLE_CHARS``."""

    bucket: int
    source: str
    record: int
    chunk_index: int
    language: str
    char_count: int
    text: str


@dataclass(frozen=True)
class Stats:
    """Totals and chunk-size percentiles (``PERCENTILES``) over some groups."""

    documents: int
    chunks: int
    characters: int
    sizes: tuple[int | None, ...]


@dataclass(frozen=True)
class Report:
    """Everything the report shows, read from one output."""

    output: str
    manifest: Manifest
    groups: tuple[Group, ...]
    rejects: Mapping[str, int]
    sources: tuple[SourceCounts, ...] = ()
    rejected_files: tuple[RejectedFile, ...] = ()
    samples: tuple[Sample, ...] = ()

    @property
    def bucket_width(self) -> float:
        """The run's bucket width, from its settings (the default when the manifest predates the key)."""
        return self.manifest.bucket_width

    def buckets(self) -> list[int]:
        """The non-empty buckets, in order."""
        return sorted({group.bucket for group in self.groups})

    def stats(self, *, bucket: int | None = None, language: str | None = None) -> Stats:
        """Totals and size percentiles of one bucket's or one language's chunks; of all chunks by default."""
        sizes: Counter[int] = Counter()
        documents = 0
        for group in self.groups:
            if bucket not in (None, group.bucket) or language not in (None, group.language):
                continue
            sizes[group.char_count] += group.chunks
            documents += group.documents
        return Stats(
            documents=documents,
            chunks=sum(sizes.values()),
            characters=sum(size * n for size, n in sizes.items()),
            sizes=tuple(percentile(sizes, p) for p in PERCENTILES),
        )

    def chunks_by_bucket(self) -> dict[int, int]:
        counts: Counter[int] = Counter()
        for group in self.groups:
            counts[group.bucket] += group.chunks
        return dict(sorted(counts.items()))

    def languages(self) -> list[tuple[str, Stats]]:
        """Each language with its stats, most chunks first."""
        names = sorted({group.language for group in self.groups})
        by_language = [(name, self.stats(language=name)) for name in names]
        return sorted(by_language, key=lambda item: -item[1].chunks)


def percentile(sizes: Counter[int], p: float) -> int | None:
    """Nearest-rank percentile of a size → count histogram: always a chunk size that occurs."""
    ordered = sorted(sizes)
    cumulative = list(accumulate(sizes[size] for size in ordered))
    if not cumulative:
        return None
    rank = max(1, math.ceil(p / 100 * cumulative[-1]))
    return ordered[bisect_left(cumulative, rank)]
