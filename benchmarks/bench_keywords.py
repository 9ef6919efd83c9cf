"""What keyword enrichment costs beside chunking: the same documents chunked, then chunked and enriched.

    python benchmarks/bench_keywords.py [--reps 3] [FILE_OR_GLOB...]

Default corpus: the bundled sample corpus and tests/data (English, Arabic, code, Markdown). Each round
times ``AdaptiveChunker.chunk`` alone and ``chunk`` + ``MetadataEnricher.enrich`` on every document,
alternating, and reports medians: million characters a second and the time ratio (enrichment's cost).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks.scaffold import REPO_ROOT
from pipelines.input.expand import expand_inputs
from pipelines.input.source import read_file
from pipelines.records import SourceRecord
from pipelines.settings import InputSettings
from zerda_core.chunks import AdaptiveChunker
from zerda_core.enrich import MetadataEnricher

DEFAULT_INPUTS = [str(REPO_ROOT / "pipelines" / "sample_corpus"), str(REPO_ROOT / "tests" / "data")]


def documents(patterns: list[str]) -> list[str]:
    """The texts the pipeline would chunk, read by its own reader."""
    return [
        item.text
        for file in expand_inputs(patterns)
        for item in read_file(file, InputSettings())
        if isinstance(item, SourceRecord)
    ]


def seconds(texts: list[str], enrich: bool) -> float:
    chunker, enricher = AdaptiveChunker(), MetadataEnricher()
    start = time.perf_counter()
    for text in texts:
        chunks = chunker.chunk(text)
        if enrich:
            enricher.enrich(chunks)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", default=DEFAULT_INPUTS)
    parser.add_argument("--reps", type=int, default=3, help="rounds; each round repeats the corpus to ~2 M chars")
    args = parser.parse_args(argv)
    texts = documents(args.inputs)
    characters = sum(map(len, texts))
    texts *= max(1, 2_000_000 // max(characters, 1))
    characters = sum(map(len, texts))
    plain, enriched = [], []
    for _ in range(args.reps):
        plain.append(seconds(texts, enrich=False))
        enriched.append(seconds(texts, enrich=True))
    chunk_s, enrich_s = statistics.median(plain), statistics.median(enriched)
    print(f"{len(texts):,} documents, {characters / 1e6:.1f} M characters, median of {args.reps}")
    print(f"chunk only:       {characters / 1e6 / chunk_s:6.2f} M characters/s")
    print(f"chunk + keywords: {characters / 1e6 / enrich_s:6.2f} M characters/s ({enrich_s / chunk_s:.2f}x the time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
