"""Does adaptive sizing retrieve better? zerda's chunks beside fixed-size splitters, on known-item questions.

Why this shape:
- Questions no one here wrote or picked: section headings of the Python manual and of the Debian
  handbook (English and Arabic) as queries, the section's body as the gold character span; the rules
  that keep a question fair (the heading is outside its gold span and not repeated in it) are in
  questions.py. Documents and questions are sampled with ``--seed``; the sample sizes are printed.
- Every splitter chunks the same documents; its chunks become character spans of their document
  (zerda and the fixed windows give offsets, the peers' chunk texts are found in the document).
  Each corpus is one search pool: gold documents and distractors together.
- Three retrievers, all offline: BM25 (bm25s, English stop words), WordLlama's l2_supercat
  embeddings from its wheel (cosine similarity) and their reciprocal rank fusion (hybrid). Chunks are
  ranked and scored by zerda-eval's code (pipelines/evaluation: splitters, retrievers, metrics.py):
  recall, precision and IoU over the top k chunks, and recall when every splitter is read to the same
  number of characters (the budgets), which is the fair comparison between chunk sizes.
- zerda runs with its default settings (whole-document density) and the variants ``ZERDA_CONFIGS``
  lists, so a new one is one line there. The targets set zerda's best setting per corpus family
  beside the best peer setting of each cell, with a paired bootstrap interval of the difference.

Run from the repo root: ``python benchmarks/bench_retrieval.py`` (a few minutes on 2 cores) or
``--quick``. A full run rewrites benchmarks/results/retrieval.md.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `zerda_core` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import questions
from benchmarks.questions import Question, RetrievalCorpus
from benchmarks.scaffold import RESULTS_DIR, ensure_real_corpora, header, parser, save, source_line
from pipelines.evaluation import questions as asked
from pipelines.evaluation.evaluate import Result, evaluate, stderr_progress
from pipelines.evaluation.metrics import RESAMPLES, Span, bootstrap
from pipelines.evaluation.retrievers import BM25, Hybrid, Retriever, WordLlamaRetriever
from pipelines.evaluation.splitters import PEERS, Splitter, peer_splitters, zerda_splitter
from pipelines.settings import ChunkingSettings

RESULTS = RESULTS_DIR / "retrieval.md"
# zerda's settings under test, by name: chunking settings over the defaults (e.g. {"density_scope": "section"}).
# The defaults' chunks average 400-700 characters, the largest peers' 800-1,000. Sizes 400-2000 and 600-1600 put
# zerda's mean chunk near the largest peers' (adaptive sizing against fixed sizing at about the same mean size,
# rather than small chunks against large ones); the fixed target 1024 (min_size == max_size) is zerda's packer
# without density sizing, beside the peers at 1024: it tells the packer's share from the sizing's. An "embed_text"
# entry ranks the chunks by that template's text (the heading path before the chunk), their spans unchanged.
ZERDA_CONFIGS: dict[str, dict[str, Any]] = {
    "zerda (document density)": {},
    "zerda (document density, sizes 400-2000)": {"min_size": 400, "max_size": 2000},
    "zerda (document density, sizes 600-1600)": {"min_size": 600, "max_size": 1600},
    "zerda (section density)": {"density_scope": "section"},
    "zerda (section density, sizes 400-2000)": {"density_scope": "section", "min_size": 400, "max_size": 2000},
    "zerda (fixed target 1024)": {"min_size": 1024, "max_size": 1024},
    "zerda (document density, sizes 600-1600, heading path in the ranked text)": {
        "min_size": 600,
        "max_size": 1600,
        "embed_text": "{section}\n\n{text}",
    },
}
FIXED_TARGET = "zerda (fixed target 1024)"  # what density sizing is measured against
SIZES = (256, 512, 1024)
KS = (1, 3, 5)
BUDGETS = (1000, 2000, 4000)
Row = Result  # one (corpus, retriever, splitter), as zerda-eval scores it


def build_splitters(sizes: Sequence[int]) -> list[Splitter]:
    """zerda's configurations, then every peer at every size; a peer that is not installed is skipped."""
    built = []
    for name, overrides in ZERDA_CONFIGS.items():
        chunking = {key: value for key, value in overrides.items() if key != "embed_text"}
        built.append(zerda_splitter(name, ChunkingSettings(**chunking), overrides.get("embed_text")))
    return built + peer_splitters(sizes, PEERS, prog="bench")


def run_corpus(data: RetrievalCorpus, splitters: list[Splitter], retrievers: list[Retriever]) -> list[Row]:
    """Chunk the pool with every splitter and rank its chunks with every retriever (zerda-eval's evaluation)."""
    texts = [doc.text for doc in data.docs]
    gold = [asked.Question(q.query, (Span(q.doc, q.start, q.end),)) for q in data.questions]
    progress = stderr_progress("bench")
    return evaluate(texts, gold, splitters, retrievers, KS, BUDGETS, corpus=data.name, progress=progress)


# ---------------------------------------------------------------- report


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def table(rows: list[Row]) -> str:
    """One corpus and retriever: a row per splitter, scores at k and recall at each budget."""
    head = ["splitter", "chunks", "mean chars"]
    head += [f"{m}@{k}" for k in KS for m in ("R", "P", "IoU")] + [f"R@{b // 1000}k chars" for b in BUDGETS]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    best = {b: max(_mean(r.at_budget[b]) for r in rows) for b in BUDGETS}
    for row in rows:
        cells = [row.splitter.name, str(row.chunks), f"{row.mean_chars:.0f}"]
        for k in KS:
            scores = row.at_k[k]
            cells += [f"{_mean([s.recall for s in scores]):.3f}", f"{_mean([s.precision for s in scores]):.3f}"]
            cells.append(f"{_mean([s.iou for s in scores]):.3f}")
        for b in BUDGETS:
            got = _mean(row.at_budget[b])
            cells.append(f"**{got:.3f}**" if got == best[b] else f"{got:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Cell:
    """zerda's recall at one budget beside another setting's (the best peer's, or zerda's fixed target), on one
    corpus and retriever.

    ``delta`` is the mean of the per-question differences (zerda - peer), ``low``/``high`` its paired 95%
    bootstrap interval: both settings are read on the same resampled questions.
    """

    zerda: Row
    peer: Row
    budget: int
    delta: float
    low: float
    high: float

    @property
    def recalls(self) -> tuple[float, float]:
        """zerda's and the peer's mean recall at the budget."""
        return _mean(self.zerda.at_budget[self.budget]), _mean(self.peer.at_budget[self.budget])

    @property
    def holds_zero(self) -> bool:
        """Whether the interval of the difference holds 0: no difference shown."""
        return self.low <= 0 <= self.high

    @property
    def verdict(self) -> str:
        """met (zerda at or above the best peer), within (the interval holds 0) or missed."""
        if self.delta >= 0:
            return "met"
        return "within" if self.holds_zero else "missed"


def paired(zerda: Row, other: Row, budget: int, seed: int) -> Cell:
    """``zerda`` beside ``other`` (same corpus, retriever and questions) at ``budget``."""
    diffs = [z - p for z, p in zip(zerda.at_budget[budget], other.at_budget[budget], strict=True)]
    got = bootstrap(diffs, seed)
    return Cell(zerda, other, budget, got.mean, got.low, got.high)


def compare(zerda: Row, rows: Sequence[Row], budget: int, seed: int) -> Cell:
    """``zerda`` beside the peer with the highest mean recall at ``budget`` among ``rows`` (same corpus, retriever)."""
    peers = [r for r in rows if r.splitter.family != "zerda"]
    return paired(zerda, max(peers, key=lambda r: _mean(r.at_budget[budget])), budget, seed)


def sizing_lines(rows: Sequence[Row], seed: int) -> list[str]:
    """Each zerda setting beside ``FIXED_TARGET`` (zerda's packing without density sizing), per corpus: the mean
    difference over its retrievers and budgets, and the cells whose paired interval leaves out 0."""
    lines = []
    for corpus in dict.fromkeys(r.corpus for r in rows):
        mine = [r for r in rows if r.corpus == corpus and r.splitter.family == "zerda"]
        fixed = {r.retriever: r for r in mine if r.splitter.name == FIXED_TARGET}
        for name in dict.fromkeys(r.splitter.name for r in mine if r.retriever in fixed):
            if name == FIXED_TARGET:
                continue
            cells = [paired(r, fixed[r.retriever], b, seed) for r in mine if r.splitter.name == name for b in BUDGETS]
            apart = [f"{c.zerda.retriever} {c.budget // 1000}k {c.delta:+.3f}" for c in cells if not c.holds_zero]
            lines.append(
                f"- {corpus}, {name}: mean Δ {_mean([c.delta for c in cells]):+.3f} over {len(cells)} cells;"
                f" interval without 0: {', '.join(apart) or 'none'}"
            )
    return lines


def family(corpus: str) -> str:
    """A corpus's family, which shares one zerda setting: its source (python-docs: python; handbook-en and
    handbook-ar: handbook)."""
    return corpus.split("-")[0]


def setting_cells(rows: Sequence[Row], seed: int) -> dict[tuple[str, str], list[Cell]]:
    """Every zerda setting's cells, by (corpus family, setting): each (corpus, retriever, budget) of the family
    beside that cell's best peer.

    Settings that rank chunks by an ``embed_text`` template are left out: the questions are section headings,
    so a heading path in the ranked text holds the question itself, which no peer's chunk is given.
    """
    cells: dict[tuple[str, str], list[Cell]] = {}
    for corpus, retriever in dict.fromkeys((r.corpus, r.retriever) for r in rows):
        group = [r for r in rows if r.corpus == corpus and r.retriever == retriever]
        for row in group:
            if row.splitter.family == "zerda" and "embed_text" not in ZERDA_CONFIGS.get(row.splitter.name, {}):
                key = (family(corpus), row.splitter.name)
                cells.setdefault(key, []).extend(compare(row, group, b, seed) for b in BUDGETS)
    return cells


def best_settings(by_setting: dict[tuple[str, str], list[Cell]]) -> dict[str, str]:
    """Per corpus family, the zerda setting that misses the fewest of the family's cells, then has the highest
    mean recall over them: one setting per family, not one per cell (the best peer is chosen per cell)."""

    def rank(cells: list[Cell]) -> tuple[int, float]:
        return -sum(c.verdict == "missed" for c in cells), _mean([c.recalls[0] for c in cells])

    best: dict[str, str] = {}
    for (group, name), cells in by_setting.items():
        if group not in best or rank(cells) > rank(by_setting[(group, best[group])]):
            best[group] = name
    return best


def target_cells(rows: Sequence[Row], seed: int) -> tuple[dict[str, str], list[Cell]]:
    """Each family's best zerda setting, and its cells: every (corpus, retriever, budget) of the family."""
    by_setting = setting_cells(rows, seed)
    best = best_settings(by_setting)
    return best, [cell for group, name in best.items() for cell in by_setting[(group, name)]]


def target_table(cells: Sequence[Cell]) -> str:
    """The targets as a markdown table, a row per cell."""
    lines = [
        "| corpus | retriever | budget | zerda setting | zerda | best peer | peer | Δ | 95% interval of Δ | verdict |",
        "| --- | --- | ---: | --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for c in cells:
        zerda, peer = c.recalls
        lines.append(
            f"| {c.zerda.corpus} | {c.zerda.retriever} | {c.budget // 1000}k | {c.zerda.splitter.name} | {zerda:.3f}"
            f" | {c.peer.splitter.name} | {peer:.3f} | {c.delta:+.3f} | [{c.low:+.3f}, {c.high:+.3f}] | {c.verdict} |"
        )
    return "\n".join(lines)


def target_summary(cells: Sequence[Cell]) -> str:
    """How many cells are met, within the interval and missed, the missed ones named."""
    counts = {v: sum(c.verdict == v for c in cells) for v in ("met", "within", "missed")}
    missed = [f"{c.zerda.corpus} {c.zerda.retriever} {c.budget // 1000}k" for c in cells if c.verdict == "missed"]
    return (
        f"{len(cells)} cells: {counts['met']} met, {counts['within']} within the interval, {counts['missed']} missed"
        + (f" ({'; '.join(missed)})" if missed else "")
        + "."
    )


def verdicts(rows: Sequence[Row], seed: int) -> list[str]:
    """For each zerda setting and budget in one corpus and retriever: its recall beside the best peer's."""
    lines = []
    for row in (r for r in rows if r.splitter.family == "zerda"):
        parts = []
        for b in BUDGETS:
            c = compare(row, rows, b, seed)
            zerda, peer = c.recalls
            parts.append(
                f"{b // 1000}k: {zerda:.3f} vs {c.peer.splitter.name} {peer:.3f}"
                f" (Δ {c.delta:+.3f} [{c.low:+.3f}, {c.high:+.3f}], {c.verdict})"
            )
        lines.append(f"- {row.corpus}, {row.retriever}, {row.splitter.name}: " + "; ".join(parts))
    return lines


def corpus_line(data: RetrievalCorpus) -> str:
    chars = sum(len(d.text) for d in data.docs)
    gold = statistics.median(q.end - q.start for q in data.questions) if data.questions else 0
    return (
        f"- **{data.name}** ({data.origin}): {len(data.docs)} documents, {chars / 1e6:.2f} M characters;"
        f" {len(data.questions)} questions sampled of {data.candidates} that pass the rules;"
        f" median gold span {gold:.0f} characters"
    )


def example_lines(corpora: list[RetrievalCorpus]) -> list[str]:
    """The first question of each corpus, so a reader sees what is asked."""
    lines = []
    for data in corpora:
        if data.questions:
            q: Question = data.questions[0]
            gold = data.docs[q.doc].text[q.start : q.start + 100].replace("\n", " ").replace("|", "\\|")
            lines.append(f"- {data.name}: query `{q.query}` → gold begins “{gold}…” ({q.end - q.start} characters)")
    return lines


def report(
    corpora: list[RetrievalCorpus],
    rows: list[Row],
    splitters: list[Splitter],
    retrievers: list[Retriever],
    argv: list[str],
    seed: int,
) -> str:
    """The whole markdown report: the targets first, then corpora, settings, a table per corpus and retriever,
    and every zerda setting beside the best peer."""
    best, cells = target_cells(rows, seed)
    parts = [
        *header("Retrieval benchmark: known-item questions from document structure", "bench_retrieval.py", argv),
        f"Measured: {source_line()}.",
        "",
        "Corpora (documents and questions sampled with the seed; each corpus is one search pool):",
        *[corpus_line(c) for c in corpora],
        "",
        "Examples:",
        *example_lines(corpora),
        "",
        "## Targets: zerda's best setting beside the best peer setting, in every cell",
        "",
        "zerda's setting is one per corpus family, the one that misses the fewest of the family's cells, then has"
        " the highest mean recall over them ("
        + "; ".join(f"{group}: {name}" for group, name in best.items())
        + "); the best peer is chosen per cell, the peer setting with the highest mean recall at that budget."
        f" Δ = zerda - best peer, the mean of the per-question differences, with its paired 95% bootstrap interval"
        f" ({RESAMPLES:,} resamples of the questions, seed {seed}, the same resamples for both). A cell is met when"
        " Δ >= 0, within when the interval holds 0, else missed.",
        "",
        target_table(cells),
        "",
        target_summary(cells),
        "",
        f"Retrievers: {'; '.join(r.version for r in retrievers)}. Splitters: zerda as"
        " its chunking settings (`ChunkingSettings(...)`, a config's `chunking:` section) with their defaults"
        " (sizes 100-1500, overlap 128) or the sizes its"
        " name gives (with the heading path in the ranked text: each chunk ranked as `{section}` + blank line +"
        " its text, its span unchanged); fixed windows, langchain's"
        f" RecursiveCharacterTextSplitter, chonkie's SentenceChunker (character tokenizer) and semchunk (len) at"
        f" {', '.join(map(str, SIZES))} characters with overlap min(128, size / 4). Versions: "
        + ", ".join(sorted({f"{s.family} {s.version}" for s in splitters if s.version != "-"}))
        + ".",
        "",
        "Scores (pipelines/evaluation/metrics.py, as zerda-eval scores): R/P/IoU@k over the top k chunks — recall is"
        " the share of the gold span"
        " covered, precision the share of retrieved characters that are gold (overlapping chunks count twice),"
        " IoU covered / (gold + retrieved - covered). R@N chars: recall when the ranked chunks are read up to N"
        " characters (the last one cut), the same text budget for every splitter; the best per column in bold.",
        "",
    ]
    groups = [
        (f"{data.name}, {retriever.name}", [r for r in rows if r.corpus == data.name and r.retriever == retriever.name])
        for data in corpora
        for retriever in retrievers
    ]
    for title, chosen in groups:
        parts += [f"## {title}", "", table(chosen), ""]
    parts += [
        "## Density sizing: each zerda setting beside zerda's fixed target",
        "",
        f"Δ = the setting's recall - {FIXED_TARGET}'s (zerda's packing with min_size = max_size), per question,"
        " averaged over the corpus's retrievers and budgets; the cells whose paired 95% bootstrap interval leaves"
        " out 0 are named. The settings differ in mean size as well as in how sizes are chosen (see the tables).",
        "",
        *sizing_lines(rows, seed),
        "",
        "## Every zerda setting beside the best peer setting at each budget",
        "",
        "As the targets above: Δ = zerda - best peer with its paired 95% bootstrap interval.",
        "",
        *[line for _, chosen in groups for line in verdicts(chosen, seed)],
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Build the question sets, chunk and rank, print the report and save it on full runs."""
    argv = sys.argv[1:] if argv is None else argv
    options = parser(__doc__, RESULTS, "sanity run: 60 questions and 0.5 M characters per corpus, BM25 only")
    options.add_argument("--questions", type=int, default=200, help="questions sampled per corpus (default 200)")
    options.add_argument("--max-chars", type=float, default=1.5, help="M characters of documents per corpus")
    options.add_argument("--sizes", default=",".join(map(str, SIZES)), help="peers' chunk sizes, comma-separated")
    args = options.parse_args(argv)
    if args.quick:
        args.questions, args.max_chars = min(args.questions, 60), min(args.max_chars, 0.5)
    ensure_real_corpora(not args.no_setup)
    corpora = list(questions.load_all(int(args.max_chars * 1e6), args.questions, args.seed))
    if not corpora:
        print("bench: no corpus: install python3-doc and debian-handbook (benchmarks/setup_corpus.sh)", file=sys.stderr)
        return 1
    for data in corpora:
        print(corpus_line(data).replace("**", ""), flush=True)
    splitters = build_splitters([int(s) for s in args.sizes.split(",")])
    lexical = BM25()
    retrievers: list[Retriever] = [lexical]
    if not args.quick:
        dense = WordLlamaRetriever()
        retrievers += [dense, Hybrid([lexical, dense])]
    rows = [row for data in corpora for row in run_corpus(data, splitters, retrievers)]
    save(report(corpora, rows, splitters, retrievers, argv, args.seed), args.out or (None if args.quick else RESULTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
