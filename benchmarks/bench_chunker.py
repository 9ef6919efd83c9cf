"""Chunking speed of zerda's AdaptiveChunker beside chonkie, semchunk and langchain, in one run.

Why this shape:
- Real text no one here wrote (Debian's Python manual and Arabic Debian handbook, see corpus.py)
  plus a seeded synthetic mix of English, Arabic, Python, SQL and Markdown (synthetic.py).
- All tools run in the same process and take turns on groups of documents of about 250 KB within
  every repetition (the starting tool rotated), so a slow spell of a shared machine lands on all of
  them alike; each repetition sums a tool's groups; medians over repetitions, not means.
- Throughput is MB/s of UTF-8 input (1 MB = 10^6 bytes) per CPU second of the process through
  ``chunk``/``split_text`` on whole documents, one document at a time, as the pipeline calls it.
- Same budget: on every document each peer is asked for the target size and overlap zerda picks
  for that document, worked out once when the corpus is loaded (untimed); zerda works them out
  inside its own timed call. ``--peer-size N`` gives the peers a fixed size instead.
- Memory: peak RSS growth while chunking one document at 1x and 4x size, each in a fresh process
  (memprobe.py); a 4x/1x ratio near 4 means memory is linear in the document.
- Cost per chunk: every tool chunks the same documents at a fixed size and overlap (800 / 100
  characters) and at half of both (400 / 50), about twice the chunks, and zerda at its own
  density-driven sizing with every size halved (max_size 1500 then 750); the time ratio shows what
  doubling the chunks costs (2 would mean all cost is per chunk) and the slope, microseconds per
  extra chunk, the cost of one chunk free of the per-character work.

Run from the repo root: ``python benchmarks/bench_chunker.py`` (2-3 minutes on 2 cores) or
``--quick`` (well under a minute). A full run rewrites benchmarks/results/chunker.md.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import functools
import gc
import io
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `zerda_core` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus, synthetic
from benchmarks.scaffold import REPO_ROOT, RESULTS_DIR, ensure_real_corpora, header, parser, save, source_line
from benchmarks.tools import Budget, Sizes, Tool, build_tools, by_key, peer_budget

RESULTS = RESULTS_DIR / "chunker.md"
# Issue 11's targets, checked on the real corpora: zerda's speed over each peer's.
TARGETS = {"python-docs": {"chonkie": 1.5, "semchunk": 1.2}, "handbook-ar": {"chonkie": 0.8}}
# Tools take turns on groups of documents this size (bytes), so a slow spell of a shared machine lands on
# every tool alike instead of on whichever tool was running a whole-corpus pass at the time.
GROUP_BYTES = 250_000


@dataclass
class Corpus:
    """A list of documents to chunk, with how it was obtained and each document's (size, overlap) for the peers."""

    name: str
    docs: list[str]
    origin: str
    real: bool
    budgets: list[Budget]

    @functools.cached_property
    def n_bytes(self) -> int:
        return sum(len(d.encode("utf-8")) for d in self.docs)


@dataclass
class Measured:
    """One tool on one corpus: a duration per repetition and what its output looked like."""

    tool: Tool
    seconds: list[float] = field(default_factory=list)
    chunks: int = 0
    mean_chars: float = 0.0
    zerda_targets: list[int] = field(default_factory=list)

    def mb_per_s(self, n_bytes: int) -> list[float]:
        return [n_bytes / 1e6 / s for s in self.seconds]


@dataclass
class MemoryRow:
    """One tool's memory probe on the same text at 1x and 4x (see memprobe.probe for the fields)."""

    tool: str
    source: str
    mb_1x: float
    small: dict[str, float]
    large: dict[str, float]

    @property
    def growth_ratio(self) -> float:
        return self.large["growth_kb"] / self.small["growth_kb"] if self.small["growth_kb"] else float("nan")

    @property
    def marginal(self) -> float:
        """MiB of peak growth per extra input MB from 1x to 4x: the slope, free of any fixed cost."""
        return (self.large["growth_kb"] - self.small["growth_kb"]) / 1024 / (3 * self.mb_1x)


# ---------------------------------------------------------------- corpora


def cap(docs: list[str], max_bytes: int, seed: int) -> list[str]:
    """A seeded random subset of whole documents up to ``max_bytes``, so --quick stays representative."""
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    picked: list[int] = []
    total = 0
    for i in order:
        if total >= max_bytes:
            break
        picked.append(i)
        total += len(docs[i].encode("utf-8"))
    return [docs[i] for i in sorted(picked)]


def load_corpora(args: argparse.Namespace, budget: Callable[[str], Budget]) -> list[Corpus]:
    """The real corpora that could be prepared, then the synthetic one; the peers' budgets are worked out here."""
    ensure_real_corpora(not args.no_setup)
    corpora: list[Corpus] = []
    for real in corpus.REAL_CORPORA:
        docs = corpus.load(real.name)
        if docs:
            sample = cap(docs, int(args.max_mb * 1e6), args.seed)
            origin = f"Debian package {real.package}"
            corpora.append(Corpus(real.name, sample, origin, real=True, budgets=list(map(budget, sample))))
        else:
            print(f"bench: real corpus {real.name} unavailable (Debian package {real.package})", file=sys.stderr)
    docs = synthetic.generate(int(args.synthetic_mb * 1e6), seed=args.seed)
    origin = f"benchmarks/synthetic.py, seed {args.seed}"
    corpora.append(Corpus("synthetic-mix", docs, origin, real=False, budgets=list(map(budget, docs))))
    return corpora


# ---------------------------------------------------------------- timing


def document_groups(data: Corpus, group_bytes: int = GROUP_BYTES) -> list[list[tuple[str, int, int]]]:
    """Consecutive (document, size, overlap) runs of about ``group_bytes``: the unit the tools take turns on."""
    groups: list[list[tuple[str, int, int]]] = [[]]
    size = 0
    for doc, (target, overlap) in zip(data.docs, data.budgets, strict=True):
        if size >= group_bytes:
            groups.append([])
            size = 0
        groups[-1].append((doc, target, overlap))
        size += len(doc.encode("utf-8"))
    return groups


def time_group(tool: Tool, group: list[tuple[str, int, int]]) -> float:
    """CPU seconds of this process to chunk one group of documents; a collection first so no tool pays for
    another's garbage. CPU time, not wall time: on a shared machine a slice another process takes of the
    cores would land on whichever tool was running then."""
    gc.collect()
    start = time.process_time()
    for doc, size, overlap in group:
        tool.run(doc, size, overlap)
    return time.process_time() - start


def describe_output(tool: Tool, data: Corpus, result: Measured) -> float:
    """Untimed warm-up on the timed (document, size, overlap) triples, so every peer's chunkers exist before timing.

    Records chunk counts, mean size and zerda's per-document target.
    """
    start = time.perf_counter()
    sizes: list[int] = []
    for doc, (size, overlap) in zip(data.docs, data.budgets, strict=True):
        chunks = tool.run(doc, size, overlap)
        sizes.extend(len(t) for t in tool.texts(chunks))
        if tool.key == "zerda" and chunks:
            target = chunks[0].metadata.extra.get("target_size")
            if target is not None:
                result.zerda_targets.append(int(target))
    result.chunks = len(sizes)
    result.mean_chars = statistics.fmean(sizes) if sizes else 0.0
    return time.perf_counter() - start


def bench_corpus(data: Corpus, tools: list[Tool], reps: int, budget_s: float) -> dict[str, Measured]:
    """Warm up every tool, then run ``reps`` interleaved repetitions (fewer if over the time budget)."""
    results = {t.key: Measured(t) for t in tools}
    per_rep = sum(describe_output(t, data, results[t.key]) for t in tools)
    affordable = max(min(3, reps), int(budget_s / max(per_rep, 1e-9)))
    if affordable < reps:
        print(f"bench: {data.name}: {reps} repetitions would take ~{reps * per_rep:.0f}s; running {affordable}")
        reps = affordable
    groups = document_groups(data)
    for rep in range(reps):
        seconds = dict.fromkeys(results, 0.0)
        for index, group in enumerate(groups):
            shift = (rep + index) % len(tools)
            for tool in tools[shift:] + tools[:shift]:
                seconds[tool.key] += time_group(tool, group)
        for key, total in seconds.items():
            results[key].seconds.append(total)
        print(f"bench: {data.name}: repetition {rep + 1}/{reps} done", flush=True)
    return results


# ---------------------------------------------------------------- memory


def memory_doc(corpora: list[Corpus], n_bytes: int) -> str:
    """One long document of about ``n_bytes``: whole documents of the first corpus, joined as paragraphs."""
    parts: list[str] = []
    total = 0
    for doc in corpora[0].docs:
        parts.append(doc)
        total += len(doc.encode("utf-8"))
        if total >= n_bytes:
            break
    return "\n\n".join(parts)


def run_probe(key: str, text: str, sizes: Sizes, budget: Budget) -> dict[str, float] | None:
    """Run memprobe.py in a fresh interpreter on ``text``; None (with a message) if it fails.

    The peers' budget is worked out here, so the probe's heap holds nothing left over from doing it.
    """
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as handle:
        handle.write(text)
    try:
        sizes_json = json.dumps(dataclasses.asdict(sizes))
        cmd = [sys.executable, "-m", "benchmarks.memprobe", key, handle.name, "--sizes", sizes_json]
        cmd += ["--budget", *map(str, budget)]
        done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    finally:
        os.unlink(handle.name)
    if done.returncode != 0:
        print(f"bench: memory probe for {key} failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_memory(tools: list[Tool], corpora: list[Corpus], mb: float, sizes: Sizes) -> list[MemoryRow]:
    """Peak RSS growth per tool for one document at 1x and the same text repeated 4x."""
    one = memory_doc(corpora, int(mb * 1e6))
    four = "\n\n".join([one] * 4)
    budget = peer_budget(sizes)
    one_budget, four_budget = budget(one), budget(four)
    rows: list[MemoryRow] = []
    for tool in tools:
        small, large = run_probe(tool.key, one, sizes, one_budget), run_probe(tool.key, four, sizes, four_budget)
        if small and large:
            rows.append(MemoryRow(tool.name, corpora[0].name, len(one.encode()) / 1e6, small, large))
            growth = f"{small['growth_kb'] / 1024:.1f} MiB at 1x, {large['growth_kb'] / 1024:.1f} MiB at 4x"
            print(f"bench: memory {tool.name}: peak RSS growth {growth}", flush=True)
    return rows


# ---------------------------------------------------------------- cost per chunk

# (size, overlap) pairs: the second halves both, so a document gives about twice the chunks
CHUNK_COST_SIZES = ((800, 100), (400, 50))
# zerda also at its own, density-driven sizing, every size halved the same way: (min_size, max_size, overlap)
OWN_SIZING_COST = ((100, 1500, 128), (50, 750, 64))


@dataclass(frozen=True)
class CostRun:
    """A chunker timed at two settings, the second giving about twice the chunks: ``run(text, i)`` cuts ``text``
    at setting ``i`` (0 or 1); ``settings`` says what they are."""

    key: str
    name: str
    settings: str
    run: Callable[[str, int], Sequence[Any]]


@dataclass
class ChunkCostRow:
    """One chunker on one corpus at each of its two settings: chunk counts and seconds per repetition."""

    corpus: str
    tool: str
    settings: str
    chunks: list[int]
    seconds: list[list[float]]

    @property
    def medians(self) -> list[float]:
        return [statistics.median(times) for times in self.seconds]

    @property
    def time_ratio(self) -> float:
        """Median over repetitions of the time at the smaller size over the time at the larger one."""
        return statistics.median(small / large for large, small in zip(*self.seconds, strict=True))

    @property
    def us_per_extra_chunk(self) -> float:
        (large, small), (n_large, n_small) = self.medians, self.chunks
        return (small - large) / (n_small - n_large) * 1e6 if n_small != n_large else float("nan")


def cost_runs(tools: list[Tool]) -> list[CostRun]:
    """Every tool at ``CHUNK_COST_SIZES`` (zerda with its target fixed there: min_size = max_size), and zerda at
    ``OWN_SIZING_COST``."""
    from zerda_core.chunks import AdaptiveChunker

    def zerda(settings: tuple[tuple[int, int, int], ...]) -> Callable[[str, int], Sequence[Any]]:
        """zerda at each (min_size, max_size, overlap) of ``settings``, by index."""
        built = [AdaptiveChunker(min_size=low, max_size=high, overlap=lap) for low, high, lap in settings]
        return lambda text, i: built[i].chunk(text, doc_id="bench", source="bench")

    def peer(tool: Tool) -> Callable[[str, int], Sequence[Any]]:
        return lambda text, i: tool.run(text, *CHUNK_COST_SIZES[i])

    fixed = " → ".join(f"{size} / {overlap}" for size, overlap in CHUNK_COST_SIZES)
    own = " → ".join(f"{low}-{high} / {lap}" for low, high, lap in OWN_SIZING_COST)
    runs: list[CostRun] = []
    for tool in tools:
        if tool.key == "zerda":
            at_sizes = tuple((size, size, overlap) for size, overlap in CHUNK_COST_SIZES)
            runs.append(CostRun(tool.key, tool.name, fixed, zerda(at_sizes)))
            runs.append(CostRun("zerda-own", f"{tool.name}, own sizing", own, zerda(OWN_SIZING_COST)))
        else:
            runs.append(CostRun(tool.key, tool.name, fixed, peer(tool)))
    return runs


def bench_chunk_cost(data: Corpus, runs: list[CostRun], reps: int, max_bytes: int, seed: int) -> list[ChunkCostRow]:
    """Each chunker at each of its two settings on the same documents (a seeded sample of ``max_bytes``).

    The runs take turns on groups of about ``GROUP_BYTES`` (order rotated), a chunker's two settings next to
    each other, and are timed in CPU time of this process: the ratio of two settings is what is read, and a
    slice another process takes of the shared cores would land on one setting only.
    """
    docs = cap(data.docs, max_bytes, seed)
    steps = [(cost, i) for cost in runs for i in (0, 1)]
    chunks = {(cost.key, i): sum(len(cost.run(doc, i)) for doc in docs) for cost, i in steps}
    sample = Corpus(data.name, docs, data.origin, data.real, [(0, 0)] * len(docs))
    groups = [[doc for doc, _, _ in group] for group in document_groups(sample)]
    seconds: dict[tuple[str, int], list[float]] = {key: [] for key in chunks}
    for rep in range(reps):
        for key in seconds:
            seconds[key].append(0.0)
        for index, group in enumerate(groups):
            shift = 2 * ((rep + index) % len(runs))  # a chunker's two settings stay side by side
            for cost, i in steps[shift:] + steps[:shift]:
                gc.collect()
                start = time.process_time()
                for doc in group:
                    cost.run(doc, i)
                seconds[cost.key, i][-1] += time.process_time() - start
    rows = [
        ChunkCostRow(
            data.name,
            cost.name,
            cost.settings,
            [chunks[cost.key, i] for i in (0, 1)],
            [seconds[cost.key, i] for i in (0, 1)],
        )
        for cost in runs
    ]
    for row in rows:
        print(
            f"bench: cost per chunk, {data.name}, {row.tool}: x{row.time_ratio:.2f} time for"
            f" x{row.chunks[1] / row.chunks[0]:.2f} chunks, {row.us_per_extra_chunk:.1f} us per extra chunk",
            flush=True,
        )
    return rows


# ---------------------------------------------------------------- profile


def profile_zerda(tool: Tool, data: Corpus, top: int = 25) -> str:
    """cProfile of zerda over one corpus: the functions where its time goes, by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for doc, (size, overlap) in zip(data.docs, data.budgets, strict=True):
        tool.run(doc, size, overlap)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ---------------------------------------------------------------- report


def ratio(zerda: float | None, peer: float) -> str:
    """zerda's speed over a peer's, as '1.23x'; '—' when zerda did not run."""
    return "—" if zerda is None else f"{zerda / peer:.2f}x"


def speed_table(runs: list[tuple[Corpus, dict[str, Measured]]]) -> str:
    """The README table: one row per (corpus, tool), with zerda's speed over each peer's."""
    lines = [
        "| corpus | tool | MB/s (median) | range (min-max) | zerda / peer | chunks | mean chunk chars |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for data, results in runs:
        zerda = results.get("zerda")
        zerda_speed = statistics.median(zerda.mb_per_s(data.n_bytes)) if zerda else None
        for key, res in results.items():
            speeds = res.mb_per_s(data.n_bytes)
            med = statistics.median(speeds)
            shown = "1.00x" if key == "zerda" else ratio(zerda_speed, med)
            lines.append(
                f"| {data.name} | {res.tool.name} | {med:.2f} | {min(speeds):.2f}-{max(speeds):.2f} | {shown} "
                f"| {res.chunks} | {res.mean_chars:.0f} |"
            )
    return "\n".join(lines)


def memory_table(rows: list[MemoryRow]) -> str:
    """Peak RSS growth at 1x and 4x; linear memory shows as a ratio near 4, a fixed part pulls it below."""
    lines = [
        "| tool | document 1x / 4x | peak RSS growth 1x | peak RSS growth 4x | 4x / 1x | MiB per extra input MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row.tool} | {row.mb_1x:.1f} MB / {4 * row.mb_1x:.1f} MB | {row.small['growth_kb'] / 1024:.1f} MiB "
            f"| {row.large['growth_kb'] / 1024:.1f} MiB | {row.growth_ratio:.2f} | {row.marginal:.1f} |"
        )
    return "\n".join(lines)


def chunk_cost_table(rows: list[ChunkCostRow]) -> str:
    """Time at the second setting over time at the first, beside the chunk ratio, and the slope per extra chunk."""
    lines = [
        "| corpus | tool | size / overlap (own sizing: min-max size / overlap) | chunks | seconds (median) "
        "| time ratio | chunk ratio | µs per extra chunk |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        (n_large, n_small), (t_large, t_small) = row.chunks, row.medians
        lines.append(
            f"| {row.corpus} | {row.tool} | {row.settings} | {n_large} / {n_small} | {t_large:.3f} / {t_small:.3f} "
            f"| {row.time_ratio:.2f}x | {n_small / n_large:.2f}x | {row.us_per_extra_chunk:.1f} |"
        )
    return "\n".join(lines)


def target_lines(runs: list[tuple[Corpus, dict[str, Measured]]]) -> list[str]:
    """Met/missed for the issue's targets on each real corpus."""
    lines: list[str] = []
    for data, results in runs:
        if not data.real or "zerda" not in results:
            continue
        zerda = statistics.median(results["zerda"].mb_per_s(data.n_bytes))
        for key, goal in TARGETS.get(data.name, {}).items():
            if key not in results:
                lines.append(f"- {data.name}: {key} not installed, its target (≥ {goal}x) not checked")
            else:
                got = zerda / statistics.median(results[key].mb_per_s(data.n_bytes))
                verdict = "met" if got >= goal else "MISSED"
                peer = results[key].tool.name
                # the tools took turns within each repetition, so each repetition gives a ratio of its own
                each = [p / z for z, p in zip(results["zerda"].seconds, results[key].seconds, strict=True)]
                spread = f"{min(each):.2f}x-{max(each):.2f}x over {len(each)} repetitions"
                lines.append(f"- {data.name}: zerda / {peer} = {got:.2f}x ({spread}; target ≥ {goal}x): {verdict}")
    return lines


def corpus_lines(runs: list[tuple[Corpus, dict[str, Measured]]], reps: dict[str, int]) -> list[str]:
    """One line per corpus: size, origin and the chunk size zerda chose there."""
    lines: list[str] = []
    for data, results in runs:
        targets = results["zerda"].zerda_targets if "zerda" in results else []
        chosen = f"; zerda target_size median {statistics.median(targets):.0f} chars" if targets else ""
        lines.append(
            f"- **{data.name}**: {len(data.docs)} documents, {data.n_bytes / 1e6:.1f} MB, {data.origin}; "
            f"{reps[data.name]} repetitions{chosen}"
        )
    return lines


def peer_line(sizes: Sizes) -> str:
    """How the peers' chunk size and overlap were set, beside how zerda sets its own."""
    zerda = (
        f"zerda picks its own target per document between {sizes.min_size} and {sizes.max_size} characters"
        f" (median per corpus below) and overlap min({sizes.overlap}, target // 2)"
    )
    if sizes.peer_size is not None:
        return f"Peers get a fixed chunk size of {sizes.peer_size} characters with overlap {sizes.overlap}; {zerda}."
    return (
        f"Same budget: {zerda}, and every peer is given that same target and overlap on each document,"
        " worked out before timing (zerda's timed call includes working them out)."
    )


def report(
    runs: list[tuple[Corpus, dict[str, Measured]]],
    memory: list[MemoryRow],
    chunk_costs: list[ChunkCostRow],
    tools: list[Tool],
    sizes: Sizes,
    reps: dict[str, int],
    argv: list[str],
) -> str:
    """The whole markdown report: settings, the speed table, targets, memory."""
    parts = [
        *header("Chunker speed benchmark", "bench_chunker.py", argv),
        f"Measured: {source_line()}.",
        "",
        "Tools (every one counts characters, no tokenizer):",
        *[f"- {t.name} {t.version}: {t.settings}" for t in tools],
        "",
        peer_line(sizes),
        "MB/s is UTF-8 input bytes (10^6) per CPU second of the process through one `chunk`/`split_text` call per"
        " document;"
        f" within each repetition the tools take turns on groups of about {GROUP_BYTES // 1000} KB of documents,"
        " and medians over repetitions are reported."
        " `zerda / peer` above 1 means zerda is faster.",
        "",
        "Corpora:",
        *corpus_lines(runs, reps),
        "",
        speed_table(runs),
        "",
    ]
    targets = target_lines(runs)
    if targets:
        parts += ["Targets on the real corpora:", *targets, ""]
    if chunk_costs:
        (large, large_overlap), (small, small_overlap) = CHUNK_COST_SIZES
        parts += [
            f"Cost per chunk: every tool on the same documents at size / overlap {large} / {large_overlap} and at"
            f" {small} / {small_overlap} characters (zerda with its target fixed there: min_size = max_size),"
            " and zerda at its own density-driven sizing with every size halved, about twice the chunks each;"
            f" the runs take turns on groups of about {GROUP_BYTES // 1000} KB, a tool's two settings side by"
            " side, timed in CPU time of the process; medians over repetitions. A time ratio of 2 would mean all"
            " the cost is per chunk, 1 none of it; µs per extra chunk is the slope between the two.",
            "",
            chunk_cost_table(chunk_costs),
            "",
        ]
    if memory:
        size_1x, size_4x = (f"{m['size']:.0f} / {m['overlap']:.0f}" for m in (memory[0].small, memory[0].large))
        parts += [
            f"Memory: growth of peak RSS while chunking one document (whole {memory[0].source} documents joined; the 4x"
            " document is the 1x text repeated 4 times), each in a fresh process, output kept alive."
            f" Peers' chunk size / overlap: {size_1x} at 1x, {size_4x} at 4x."
            " A 4x / 1x ratio near 4 means memory linear in the document; below 4, a fixed part (working buffers)"
            " plus a linear part (the chunks returned); above 4, worse than linear.",
            "",
            memory_table(memory),
            "",
        ]
    return "\n".join(parts)


# ---------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Options; --quick shrinks every knob for a sanity run."""
    options = parser(__doc__, RESULTS, "small sanity run (~1 MB per corpus, 2 repetitions)")
    options.add_argument("--reps", type=int, default=7, help="repetitions per corpus (default 7)")
    options.add_argument("--max-mb", type=float, default=12.0, help="cap per real corpus in MB (default 12: all)")
    options.add_argument("--synthetic-mb", type=float, default=6.0, help="size of the synthetic corpus in MB")
    options.add_argument("--budget-s", type=float, default=60.0, help="time budget per corpus; fewer reps if over")
    options.add_argument("--memory-mb", type=float, default=2.0, help="size of the 1x document for the memory check")
    options.add_argument(
        "--peer-size", type=int, help="fixed chunk size in characters for the peers (default: zerda's, per document)"
    )
    options.add_argument("--overlap", type=int, default=128, help="overlap in characters, for every tool")
    options.add_argument("--no-memory", action="store_true", help="skip the memory check")
    options.add_argument(
        "--chunk-cost-mb", type=float, default=2.0, help="MB per real corpus for the cost per chunk (0 skips it)"
    )
    options.add_argument("--profile", action="store_true", help="also print a cProfile of zerda on the first corpus")
    args = options.parse_args(argv)
    if args.quick:
        args.reps, args.max_mb, args.synthetic_mb, args.memory_mb = min(args.reps, 2), 1.0, 1.0, 0.5
        args.chunk_cost_mb = min(args.chunk_cost_mb, 0.5)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run everything, print the report, and save it on full runs."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    sizes = Sizes(peer_size=args.peer_size, overlap=args.overlap)
    tools = build_tools(sizes)
    if not tools:
        print("bench: no chunker could be imported", file=sys.stderr)
        return 1
    try:
        budget = peer_budget(sizes)
    except ImportError as exc:
        print(f"bench: the peers take zerda's target, but {exc}; give --peer-size N to run without it", file=sys.stderr)
        return 1
    corpora = load_corpora(args, budget)
    runs: list[tuple[Corpus, dict[str, Measured]]] = []
    reps: dict[str, int] = {}
    for data in corpora:
        print(f"bench: {data.name}: {len(data.docs)} documents, {data.n_bytes / 1e6:.1f} MB", flush=True)
        results = bench_corpus(data, tools, args.reps, args.budget_s)
        reps[data.name] = len(next(iter(results.values())).seconds)
        runs.append((data, results))
    chunk_costs = [
        row
        for data in corpora
        if data.real and args.chunk_cost_mb > 0
        for row in bench_chunk_cost(data, cost_runs(tools), args.reps, int(args.chunk_cost_mb * 1e6), args.seed)
    ]
    memory = [] if args.no_memory else bench_memory(tools, corpora, args.memory_mb, sizes)
    text = report(runs, memory, chunk_costs, tools, sizes, reps, argv)
    zerda = by_key(tools, "zerda")
    if args.profile and zerda:
        print(f"\ncProfile of zerda on {corpora[0].name}, by own time:\n{profile_zerda(zerda, corpora[0])}")
    out = args.out or (None if args.quick else RESULTS)
    if out and zerda is None:
        print("bench: zerda did not run, so the results file is left as it was", file=sys.stderr)
        out = None
    save(text, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
