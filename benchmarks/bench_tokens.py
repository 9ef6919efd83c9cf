"""What ``size_unit: tokens`` costs: chunker throughput in tokens beside characters, on real text.

Why this shape:
- Real text no one here wrote: the English Debian handbook (``/usr/share/doc/debian-handbook``,
  installed by ``.ci/run``), every page as one document, as the pipeline chunks it.
- The same budget in both units: the token sizes are the character sizes divided by the corpus's
  characters per token (3.8 for Llama 2 on the handbook), so both runs make chunks of about one size.
- The units take turns within every repetition, so a slow spell of a shared machine lands on both;
  the median of the repetitions is reported. MB/s of UTF-8 input, 1 MB = 10^6 bytes.
- Also: the share of documents cut twice (a chunk tokenized alone counted more than its target),
  how full chunks are (mean token count / target), and the tokenizer's own speed (one encode of
  every document), the floor under the cost.

Run from the repo root: ``python benchmarks/bench_tokens.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `zerda_core` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import html_to_text
from zerda_core.chunks import AdaptiveChunker, ChunkConfig
from zerda_core.chunks.tokens import load_tokenizer

HANDBOOK = Path("/usr/share/doc/debian-handbook/html/en-US")
LLAMA = "package:wordllama/tokenizers/l2_supercat_tokenizer_config.json"
CHARACTER_SIZES = {"min_size": 100, "max_size": 1500, "overlap": 128}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    texts = [html_to_text(p.read_text(encoding="utf-8")) for p in sorted(HANDBOOK.glob("*.html"))]
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    counter = load_tokenizer(LLAMA)
    tokens = sum(len(counter.measure(t).starts) for t in texts)
    per_token = sum(map(len, texts)) / tokens
    token_sizes = {k: round(v / per_token) for k, v in CHARACTER_SIZES.items()}
    chunkers = {
        "characters": AdaptiveChunker(ChunkConfig(**CHARACTER_SIZES)),
        "tokens": AdaptiveChunker(ChunkConfig(size_unit="tokens", tokenizer=LLAMA, **token_sizes)),
    }
    seconds: dict[str, list[float]] = {name: [] for name in [*chunkers, "tokenizer alone"]}
    for rep in range(args.reps):
        order = list(chunkers) if rep % 2 == 0 else list(reversed(chunkers))
        for name in order:
            start = time.perf_counter()
            for text in texts:
                chunkers[name].chunk(text)
            seconds[name].append(time.perf_counter() - start)
        start = time.perf_counter()
        counter.count(texts)
        seconds["tokenizer alone"].append(time.perf_counter() - start)
    speed = {name: megabytes / statistics.median(s) for name, s in seconds.items()}
    recut = fill = chunks = 0
    original = counter.count
    calls = 0

    def counting(batch: list[str]) -> list[int]:
        nonlocal calls
        calls += 1
        return original(batch)

    counter.count = counting  # type: ignore[method-assign]
    for text in texts:
        before = calls
        result = chunkers["tokens"].chunk(text)
        recut += calls - before > 1
        chunks += len(result)
        fill += sum(c.metadata.extra["token_count"] / c.metadata.extra["target_size"] for c in result)
    counter.count = original  # type: ignore[method-assign]
    print(f"{len(texts)} handbook pages, {megabytes:.2f} MB, {tokens:,} Llama 2 tokens ({per_token:.2f} chars/token)")
    print(f"sizes: characters {CHARACTER_SIZES}, tokens {token_sizes}")
    print("| unit | MB/s | vs characters |")
    print("| --- | --- | --- |")
    for name, value in speed.items():
        print(f"| {name} | {value:.2f} | {value / speed['characters']:.3f}x |")
    print(f"documents cut twice: {recut}/{len(texts)}; mean token count / target: {fill / chunks:.2f}")


if __name__ == "__main__":
    main()
