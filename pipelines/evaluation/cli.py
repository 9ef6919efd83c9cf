"""``zerda-eval``: how well chunks of the user's own corpus retrieve the answers to the user's own questions.

Reads the corpus with zerda's own readers (in process, no pipeline), chunks it with each ``--config``'s
chunking settings (and with ``--peers``, the peer splitters at sizes matched to zerda's mean chunk), ranks
chunks with BM25, a dense embedder and their fusion, and prints the scores; ``--json`` and ``--html``
write them. Exit code 2, with one ``zerda-eval: error:`` line, for anything the user must fix.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import fsspec

import pipelines.cli.quiet_beam  # noqa: F401  (first: the readers import Beam, whose import logs a warning)
import zerda_core
from pipelines.cli.options import raise_on_error
from pipelines.cli.process_exit import command
from pipelines.errors import InputError, SettingsError, UsageError
from pipelines.evaluation.evaluate import chunk_pool, evaluate, stderr_progress
from pipelines.evaluation.metrics import RESAMPLES
from pipelines.evaluation.questions import QuestionsError, parse_questions, place
from pipelines.evaluation.report import render_html, render_text, summarise
from pipelines.evaluation.retrievers import BM25, Hybrid, Retriever, dense_retriever
from pipelines.evaluation.splitters import PEERS, Splitter, peer_splitters, zerda_splitter
from pipelines.input.expand import expand_inputs
from pipelines.input.source import read_file
from pipelines.records import Reject, SourceRecord
from pipelines.redact import install, redact_url, remember_credentials
from pipelines.settings import InputSettings, Settings, load_settings
from pipelines.terminal_table import visible, visible_line, write_stdout
from zerda_core.chunks.tokens import TokenCounter, load_tokenizer

PROG = "zerda-eval"
EXIT_USAGE = 2
MAX_QUESTIONS_BYTES = 64 << 20


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return sorted(set(values))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected one positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", action="append", required=True, metavar="GLOB", help="corpus files (repeatable)")
    parser.add_argument("--questions", required=True, metavar="Q.jsonl", help="questions with their gold answers")
    parser.add_argument(
        "--config", action="append", default=[], metavar="YAML", help="a zerda config to evaluate (repeatable)"
    )
    parser.add_argument("--peers", action="store_true", help="also fixed windows, LangChain, chonkie and semchunk")
    parser.add_argument(
        "--peer-sizes", type=_positive_ints, metavar="N,N", help="the peers' chunk sizes (default: zerda's mean chunks)"
    )
    parser.add_argument("--budgets", type=_positive_ints, default=[1000, 2000, 4000], metavar="N,N,N")
    parser.add_argument(
        "--tokenizer",
        metavar="TOKENIZER",
        help="count --budgets in this tokenizer's tokens, not characters: a tokenizer.json path or package:NAME/PATH",
    )
    parser.add_argument("--k", type=_positive_int, default=5, help="chunks scored per question (default 5)")
    parser.add_argument(
        "--retrievers", default="bm25,dense,hybrid", metavar="LIST", help="of bm25, dense, hybrid (default all)"
    )
    parser.add_argument("--embedder", default="wordllama", help="wordllama (default) or sentence-transformers:NAME")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    parser.add_argument("--resamples", type=_positive_int, default=RESAMPLES, help="bootstrap resamples")
    parser.add_argument("--json", metavar="FILE", help="write the scores as JSON")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML page with recall-vs-budget plots")
    parser.add_argument("--version", action="version", version=f"{PROG} {zerda_core.__version__}")
    return raise_on_error(parser)


def read_corpus(patterns: Sequence[str], settings: InputSettings) -> tuple[list[SourceRecord], int]:
    """The documents of every file the patterns match, read by zerda's readers, and how many records were
    rejected. A document whose id was read already is left out (a question could not name it) and counted
    as rejected, with one message."""
    documents: list[SourceRecord] = []
    seen: set[str] = set()
    rejects = repeated = 0
    for file in expand_inputs(patterns):
        for item in read_file(file, settings):
            if isinstance(item, SourceRecord):
                if item.doc_id in seen:
                    repeated += 1
                    continue
                seen.add(item.doc_id)
                documents.append(item)
            elif isinstance(item, Reject):
                rejects += item.count
    if repeated:
        print(f"{PROG}: {repeated:,} document(s) with an id read already are left out", file=sys.stderr)
    return documents, rejects + repeated


def _read_questions(url: str) -> list[str]:
    try:
        with fsspec.open(url, "rb") as f:
            raw = f.read(MAX_QUESTIONS_BYTES + 1)
    except OSError as err:
        raise QuestionsError(f"cannot read --questions {url}: {err.strerror or err}") from err
    if len(raw) > MAX_QUESTIONS_BYTES:
        raise QuestionsError(f"--questions {url} is over {MAX_QUESTIONS_BYTES >> 20} MiB")
    try:
        return raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise QuestionsError(f"--questions {url} is not UTF-8: {err}") from None


def _settings(configs: Sequence[str]) -> list[tuple[str, Settings]]:
    if not configs:
        return [("zerda (defaults)", Settings())]
    named: list[tuple[str, Settings]] = []
    for config in configs:
        name = f"zerda {Path(config).stem}"
        if any(n == name for n, _ in named):
            name = f"zerda {config}"
        named.append((name, load_settings(config)))
    return named


def _retrievers(spec: str, embedder: str) -> tuple[list[Retriever], dict[str, str]]:
    wanted = [w.strip() for w in spec.split(",") if w.strip()]
    unknown = sorted(set(wanted) - {"bm25", "dense", "hybrid"})
    if unknown or not wanted:
        raise UsageError(f"--retrievers takes bm25, dense and hybrid, got {spec!r}")
    built: dict[str, Retriever] = {}
    for key, make in (("bm25", BM25), ("dense", lambda: dense_retriever(embedder))):
        if key in wanted or "hybrid" in wanted:
            try:
                built[key] = make()
            except ImportError as exc:
                print(f"{PROG}: skipping {key} retrieval: {exc} (pip install 'zerda[eval]')", file=sys.stderr)
            except ValueError as err:
                raise UsageError(str(err)) from None
    chosen = [built[k] for k in ("bm25", "dense") if k in wanted and k in built]
    if "hybrid" in wanted and len(built) == 2:
        chosen.append(Hybrid([built["bm25"], built["dense"]]))
    if not chosen:
        raise UsageError("no retriever can run: pip install 'zerda[eval]'")
    return chosen, {r.name: r.version for r in chosen}


def _budget_tokenizer(spec: str | None) -> TokenCounter | None:
    """The tokenizer ``--tokenizer`` names, loaded before the long work; ``None`` for budgets in characters."""
    if spec is None:
        return None
    try:
        return load_tokenizer(spec)
    except ValueError as err:
        raise UsageError(f"--tokenizer: {err}") from None


def _matched_sizes(zerda: Sequence[Splitter], texts: Sequence[str]) -> list[int]:
    """The peers' sizes: each zerda setting's mean chunk, to the nearest 10 characters."""
    sizes = set()
    for splitter in zerda:
        pool = chunk_pool(splitter, texts)
        if pool:
            sizes.add(max(10, round(statistics.fmean(map(len, pool)), -1)))
    return sorted(int(s) for s in sizes)


def _remembered(splitter: Splitter) -> Splitter:
    """``splitter`` with each document's cut kept, so matching the peers' sizes does not cut it twice."""
    return replace(splitter, cut=functools.cache(splitter.cut))


def run(args: argparse.Namespace) -> int:
    """Everything the user can get wrong is checked before the long work: the questions file's lines, the
    configs, the retrievers; then the corpus is read, chunked, ranked and scored."""
    for url in [*args.input, args.questions, *args.config, args.json or "", args.html or ""]:
        remember_credentials(url)  # a storage library may echo them in an error
    named = _settings(args.config)
    progress = stderr_progress(PROG)
    entries = parse_questions(_read_questions(args.questions))  # usage errors before the long work
    retrievers, versions = _retrievers(args.retrievers, args.embedder)
    tokenizer = _budget_tokenizer(args.tokenizer)
    documents, rejects = read_corpus(args.input, named[0][1].input)
    ids, texts = [d.doc_id for d in documents], [d.text for d in documents]
    if not texts:
        raise UsageError(f"no document read from --input ({rejects:,} rejected)")
    progress(f"read {len(texts):,} documents ({sum(map(len, texts)):,} characters), {rejects:,} rejected")
    questions, unlocated = place(entries, ids, texts)
    for u in unlocated:
        print(visible_line(f"{PROG}: question on line {u.line} not located: {u.reason}"), file=sys.stderr)
    if not questions:
        raise QuestionsError("no question could be located in the corpus")
    splitters = [
        _remembered(zerda_splitter(name, settings.chunking, settings.output.embed_text, documents))
        for name, settings in named
    ]
    if args.peers:
        splitters += peer_splitters(args.peer_sizes or _matched_sizes(splitters, texts), PEERS, PROG)
    measures = None if tokenizer is None else [tokenizer.measure(text) for text in texts]
    results = evaluate(
        texts, questions, splitters, retrievers, [args.k], args.budgets, progress=progress, measures=measures
    )
    corpus = {
        "documents": len(texts),
        "characters": sum(map(len, texts)),
        "rejected": rejects,
        "questions": len(questions),
    }
    budget = {"unit": "characters" if tokenizer is None else "tokens", "tokenizer": args.tokenizer}
    summary = summarise(results, corpus, unlocated, args.seed, args.resamples, versions, budget)
    for target, text in ((args.json, lambda: json.dumps(summary, indent=2)), (args.html, lambda: render_html(summary))):
        if target:
            try:
                with fsspec.open(target, "w", encoding="utf-8") as f:
                    f.write(text())
            except Exception as err:  # a folder, a denied path, an unknown protocol
                raise UsageError(f"cannot write {target}: {type(err).__name__}: {err}") from None
            progress(f"wrote {visible_line(redact_url(target))}")
    if not write_stdout(render_text(summary)):
        print(f"{PROG}: the table could not be written to stdout", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, evaluate, report; exit code 2 with one error line for a usage error."""
    install()  # the command's process, not an import of zerda: a library caller's hooks stay theirs
    try:
        return run(build_parser().parse_args(argv))
    except (UsageError, SettingsError, InputError, QuestionsError) as error:
        line = " ".join(redact_url(str(error)).split())
        print(visible(f"{PROG}: error: {line}"), file=sys.stderr)
        return EXIT_USAGE


cli = command(main)  # zerda-eval

if __name__ == "__main__":
    cli()
