"""Does adaptive sizing retrieve better? zerda's chunks beside fixed-size splitters, on known-item questions.

Why this shape:
- Questions no one here wrote or picked: section headings of the Python manual and of the Debian
  handbook (English and Arabic) as queries, the section's body as the gold character span; the rules
  that keep a question fair (the heading is outside its gold span and not repeated in it) are in
  questions.py. Documents and questions are sampled with ``--seed``; the sample sizes are printed.
- Every splitter chunks the same documents; its chunks become character spans of their document
  (zerda and the fixed windows give offsets, the peers' chunk texts are found in the document).
  Each corpus is one search pool: gold documents and distractors together.
- Two retrievers, both offline: BM25 (bm25s, English stop words) and WordLlama's l2_supercat
  embeddings from its wheel (cosine similarity). Chunks are ranked; scores follow spans.py: recall,
  precision and IoU over the top k chunks, and recall when every splitter is read to the same
  number of characters (the budgets), which is the fair comparison between chunk sizes.
- zerda runs with its default settings (whole-document density); ``ZERDA_CONFIGS`` lists its
  variants, so a new one is one line there.

Run from the repo root: ``python benchmarks/bench_retrieval.py`` (a few minutes on 2 cores) or
``--quick``. A full run rewrites benchmarks/results/retrieval.md.
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `zerda_core` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks import questions
from benchmarks.questions import Question, RetrievalCorpus
from benchmarks.scaffold import RESULTS_DIR, ensure_real_corpora, header, parser, save, source_line
from pipelines.evaluation.metrics import Scores, Span, score, within_budget
from benchmarks.tools import FACTORIES, Sizes, _version

RESULTS = RESULTS_DIR / "retrieval.md"
# zerda's settings under test, by name: ChunkConfig fields over its defaults (e.g. {"density_scope": "section"}).
# The second is sized so that its mean chunk is near the largest peers' (about 1,000 characters): adaptive
# sizing against fixed sizing at the same mean size, rather than small chunks against large ones.
ZERDA_CONFIGS: dict[str, dict[str, Any]] = {
    "zerda (document density)": {},
    "zerda (document density, sizes 400-2000)": {"adaptive_min_size": 400, "adaptive_max_size": 2000},
    "zerda (section density)": {"density_scope": "section"},
    "zerda (section density, sizes 400-2000)": {
        "density_scope": "section",
        "adaptive_min_size": 400,
        "adaptive_max_size": 2000,
    },
}
PEERS = ("fixed", "langchain", "chonkie", "semchunk")
SIZES = (256, 512, 1024)
KS = (1, 3, 5)
BUDGETS = (1000, 2000, 4000)
DEPTH = 64  # chunks ranked per query: enough to fill the largest budget with the smallest chunks
TextSpans = list[tuple[int, int]]


def peer_overlap(size: int) -> int:
    """The peers' overlap: zerda's default 128 characters, at most a quarter of the chunk."""
    return min(128, size // 4)


@dataclass(frozen=True)
class Splitter:
    """A named way to cut a document into character spans."""

    name: str
    family: str
    version: str
    spans: Callable[[str], TextSpans]


def located(text: str, pieces: Sequence[str]) -> TextSpans:
    """Where each chunk text stands in ``text``: searched from the previous chunk's start, as chunks come in order.

    A chunk that cannot be found (a splitter that rewrote the text) is an error, not a silent miss.
    """
    spans, cursor = [], 0
    for piece in pieces:
        at = text.find(piece, cursor)
        if at < 0:
            raise ValueError(f"chunk not found in its document after offset {cursor}: {piece[:60]!r}")
        spans.append((at, at + len(piece)))
        cursor = at
    return spans


def zerda_splitter(name: str, overrides: dict[str, Any]) -> Splitter:
    """zerda's AdaptiveChunker on a ChunkConfig with ``overrides``; its own offsets are the spans."""
    import zerda_core
    from zerda_core.chunks import AdaptiveChunker, ChunkConfig

    chunker = AdaptiveChunker(ChunkConfig(**overrides))

    def spans(text: str) -> TextSpans:
        return [(c.metadata.start_char, c.metadata.end_char) for c in chunker.chunk(text)]

    return Splitter(name, "zerda", getattr(zerda_core, "__version__", "?"), spans)


def fixed_splitter(size: int) -> Splitter:
    """Windows of ``size`` characters, each starting ``size - overlap`` after the one before."""
    overlap = peer_overlap(size)

    def spans(text: str) -> TextSpans:
        # the last window starts before len - overlap, so it reaches the end of the text
        starts = range(0, max(len(text) - overlap, 1), size - overlap)
        return [(start, min(start + size, len(text))) for start in starts]

    return Splitter(f"fixed {size}", "fixed", "-", spans)


def peer_splitter(key: str, size: int) -> Splitter:
    """One of benchmarks/tools.py's peers at a fixed size; raises ImportError when it is not installed."""
    tool = FACTORIES[key](Sizes(peer_size=size, overlap=peer_overlap(size)))

    def spans(text: str) -> TextSpans:
        return located(text, tool.texts(tool.run(text, size, peer_overlap(size))))

    return Splitter(f"{key} {size}", key, tool.version, spans)


def build_splitters(sizes: Sequence[int]) -> list[Splitter]:
    """zerda's configurations, then every peer at every size; a peer that is not installed is skipped."""
    built = [zerda_splitter(name, overrides) for name, overrides in ZERDA_CONFIGS.items()]
    for key in PEERS:
        for size in sizes:
            try:
                built.append(fixed_splitter(size) if key == "fixed" else peer_splitter(key, size))
            except ImportError as exc:
                print(f"bench: skipping {key}: {exc} (pip install -e '.[bench]')", file=sys.stderr)
                break
    return built


# ---------------------------------------------------------------- retrievers


class Retriever:
    """Ranks the chunks of one pool for every query: ``rank(chunk texts, queries, depth)`` -> chunk indices."""

    name = ""
    version = ""

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        raise NotImplementedError


class BM25(Retriever):
    """bm25s with its default parameters and English stop words; Arabic words pass through its tokenizer."""

    name = "BM25"

    def __init__(self) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
        self._bm25s = bm25s
        self.version = f"bm25s {_version('bm25s')}"

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        tokenizer = self._bm25s.tokenization.Tokenizer(stopwords="en")
        index = self._bm25s.BM25()
        index.index(tokenizer.tokenize(chunks, return_as="tuple", show_progress=False), show_progress=False)
        asked = tokenizer.tokenize(queries, update_vocab=False, return_as="string", show_progress=False)
        found, _ = index.retrieve(asked, k=min(depth, len(chunks)), show_progress=False, n_threads=1)
        return np.asarray(found)


class WordLlamaRetriever(Retriever):
    """WordLlama's l2_supercat (256 dimensions) from the files in its wheel, cosine similarity."""

    name = "WordLlama"

    def __init__(self) -> None:
        import wordllama

        # the wheel ships the weights; cache_dir points at them (see examples/rag_embeddings.py)
        self._model = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        self.version = f"wordllama {_version('wordllama')} l2_supercat"

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        vectors = self._model.embed(chunks, norm=True)
        asked = self._model.embed(queries, norm=True)
        similarity = asked @ vectors.T
        depth = min(depth, len(chunks))
        top = np.argpartition(-similarity, depth - 1, axis=1)[:, :depth]
        order = np.take_along_axis(similarity, top, axis=1).argsort(axis=1)[:, ::-1]
        return np.take_along_axis(top, order, axis=1)


# ---------------------------------------------------------------- one splitter on one corpus


@dataclass
class Row:
    """One (corpus, retriever, splitter): chunk statistics and per-question scores."""

    corpus: str
    retriever: str
    splitter: Splitter
    chunks: int
    mean_chars: float
    at_k: dict[int, list[Scores]]
    at_budget: dict[int, list[float]]  # recall per question


def chunk_pool(splitter: Splitter, data: RetrievalCorpus) -> list[Span]:
    """Every chunk of every document of the pool, as spans."""
    return [Span(i, s, e) for i, doc in enumerate(data.docs) for s, e in splitter.spans(doc.text)]


def evaluate(
    data: RetrievalCorpus, splitter: Splitter, pool: list[Span], retriever: Retriever, ranked: np.ndarray
) -> Row:
    """Scores of the ranked chunks against each question's gold span."""
    at_k: dict[int, list[Scores]] = {k: [] for k in KS}
    at_budget: dict[int, list[float]] = {b: [] for b in BUDGETS}
    for question, order in zip(data.questions, ranked, strict=True):
        gold = Span(question.doc, question.start, question.end)
        spans = [pool[i] for i in order]
        for k in KS:
            at_k[k].append(score(gold, spans[:k]))
        for budget in BUDGETS:
            at_budget[budget].append(score(gold, within_budget(spans, budget)).recall)
    mean = statistics.fmean(map(len, pool)) if pool else 0.0
    return Row(data.name, retriever.name, splitter, len(pool), mean, at_k, at_budget)


def run_corpus(data: RetrievalCorpus, splitters: list[Splitter], retrievers: list[Retriever]) -> list[Row]:
    """Chunk the pool with every splitter and rank its chunks with every retriever."""
    rows = []
    queries = [q.query for q in data.questions]
    for splitter in splitters:
        started = time.perf_counter()
        pool = chunk_pool(splitter, data)
        texts = [data.docs[s.doc].text[s.start : s.end] for s in pool]
        for retriever in retrievers:
            rows.append(evaluate(data, splitter, pool, retriever, retriever.rank(texts, queries, DEPTH)))
        seconds = time.perf_counter() - started
        print(f"bench: {data.name}: {splitter.name}: {len(pool)} chunks, {seconds:.1f}s", flush=True)
    return rows


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


def verdicts(rows: list[Row]) -> list[str]:
    """For each zerda configuration and budget in one corpus and retriever: its recall beside the best peer's.

    The standard error is that of the mean per-question difference; |difference| under two of them is a tie.
    """
    lines = []
    peers = [r for r in rows if r.splitter.family != "zerda"]
    for row in (r for r in rows if r.splitter.family == "zerda"):
        parts = []
        for b in BUDGETS:
            best = max(peers, key=lambda r: _mean(r.at_budget[b]))
            diffs = [z - p for z, p in zip(row.at_budget[b], best.at_budget[b], strict=True)]
            delta = _mean(diffs)
            se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else 0.0
            verdict = "better" if delta > 2 * se else "worse" if delta < -2 * se else "tie"
            parts.append(
                f"{b // 1000}k: {_mean(row.at_budget[b]):.3f} vs {best.splitter.name} {_mean(best.at_budget[b]):.3f}"
                f" (Δ {delta:+.3f} ± {se:.3f}, {verdict})"
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
) -> str:
    """The whole markdown report: corpora, settings, a table per corpus and retriever, the verdicts."""
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
        f"Retrievers: {'; '.join(r.version for r in retrievers)}. Splitters: zerda as"
        " `AdaptiveChunker(ChunkConfig(...))` with its defaults (sizes 100-1500, overlap 128) or the sizes its"
        " name gives; fixed windows, langchain's"
        f" RecursiveCharacterTextSplitter, chonkie's SentenceChunker (character tokenizer) and semchunk (len) at"
        f" {', '.join(map(str, SIZES))} characters with overlap min(128, size / 4). Versions: "
        + ", ".join(sorted({f"{s.family} {s.version}" for s in splitters if s.version != "-"}))
        + ".",
        "",
        "Scores (benchmarks/spans.py): R/P/IoU@k over the top k chunks — recall is the share of the gold span"
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
        "## zerda beside the best peer setting at each budget",
        "",
        "Best peer = the splitter with the highest mean recall at that budget on that corpus and retriever;"
        " Δ = zerda - best, ± its standard error over the questions (paired); a tie is |Δ| < 2 standard errors.",
        "",
        *[line for _, chosen in groups for line in verdicts(chosen)],
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
    retrievers: list[Retriever] = [BM25()] if args.quick else [BM25(), WordLlamaRetriever()]
    rows = [row for data in corpora for row in run_corpus(data, splitters, retrievers)]
    save(report(corpora, rows, splitters, retrievers, argv), args.out or (None if args.quick else RESULTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
