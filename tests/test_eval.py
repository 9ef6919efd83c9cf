"""zerda-eval: span metrics worked out by hand, the bootstrap, locating answers, and the command end to end."""

from __future__ import annotations

import importlib.util
import json
from array import array
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipelines.evaluation.cli import main
from pipelines.evaluation.evaluate import chunk_pool, evaluate, score_ranking
from pipelines.evaluation.metrics import Span, bootstrap, score, within_budget
from pipelines.evaluation.questions import Question, QuestionsError, load_questions, locate
from pipelines.evaluation.retrievers import Retriever, fuse
from pipelines.evaluation.splitters import zerda_splitter
from pipelines.records import SourceRecord
from pipelines.settings import ChunkingSettings
from tests.browser import png_pixels, screenshot
from zerda_core.chunks import AdaptiveChunker
from zerda_core.chunks.tokens import TokenMeasure

# ---- metrics on a case worked out by hand ------------------------------------------------------------------

# gold: 100 characters of document 0 and 50 of document 1 (150 in all)
GOLD = (Span(0, 100, 200), Span(1, 0, 50))
POOL = [Span(0, 50, 150), Span(1, 0, 100), Span(0, 150, 250), Span(2, 0, 100)]


def test_scores_at_k_over_two_gold_spans() -> None:
    at_k, _ = score_ranking([Question("q", GOLD)], POOL, np.array([[0, 1, 2, 3]]), [1, 2, 3], [])
    # k=1: chunk 0 covers 100..150 (50 of 150); 100 retrieved; IoU 50 / (150 + 100 - 50)
    assert at_k[1][0].recall == pytest.approx(1 / 3)
    assert at_k[1][0].precision == pytest.approx(0.5)
    assert at_k[1][0].iou == pytest.approx(50 / 200)
    # k=2: + chunk 1 covers 0..50 of document 1: 100 of 150, 200 retrieved, IoU 100 / 250
    assert (at_k[2][0].recall, at_k[2][0].precision, at_k[2][0].iou) == pytest.approx((2 / 3, 0.5, 0.4))
    # k=3: + chunk 2 covers 150..200: all 150, 300 retrieved, IoU 150 / 300
    assert (at_k[3][0].recall, at_k[3][0].precision, at_k[3][0].iou) == pytest.approx((1.0, 0.5, 0.5))


def test_recall_at_a_budget_reads_whole_chunks_then_the_start_of_the_next() -> None:
    ranked = np.array([[3, 0, 1, 2]])
    _, at_budget = score_ranking([Question("q", GOLD)], POOL, ranked, [], [100, 150, 220, 1000])
    # 100: only the miss in document 2; 150: + the first half of chunk 0 ([50, 100), outside the gold);
    # 220: + chunk 0 whole (50 gold) and chunk 1 cut to [0, 20) (20 gold); 1000: everything, all 150
    assert at_budget[100] == [0.0]
    assert at_budget[150] == [0.0]
    assert at_budget[220] == [pytest.approx(70 / 150)]
    assert at_budget[1000] == [1.0]


def test_overlapping_gold_spans_count_each_character_once() -> None:
    got = score((Span(0, 0, 100), Span(0, 50, 150)), [Span(0, 0, 150)])
    assert (got.recall, got.precision, got.iou) == (1.0, 1.0, 1.0)
    assert score((Span(0, 0, 100), Span(0, 50, 150)), within_budget([Span(0, 0, 150)], 75)).recall == 0.5


def test_a_token_budget_counts_each_document_s_tokens() -> None:
    # document 0: ten tokens of 10 characters; document 1 (say, Arabic or code): fifty tokens of 2 characters
    tens = TokenMeasure(array("q", range(0, 100, 10)), array("q", range(10, 101, 10)), 100)
    twos = TokenMeasure(array("q", range(0, 100, 2)), array("q", range(2, 101, 2)), 100)
    ranked = [Span(1, 0, 20), Span(0, 0, 50), Span(0, 50, 100)]
    # 10 tokens of document 1 (20 characters), 5 of document 0 (50), then 2 tokens of the next: [50, 70)
    assert within_budget(ranked, 17, [tens, twos]) == [Span(1, 0, 20), Span(0, 0, 50), Span(0, 50, 70)]
    # the same budget in characters stops inside the second span
    assert within_budget(ranked, 17) == [Span(1, 0, 17)]
    _, at_budget = score_ranking([Question("q", (Span(0, 40, 80),))], [*ranked], np.array([[0, 1, 2]]), [], [17])
    assert at_budget[17] == [0.0]
    _, at_budget = score_ranking(
        [Question("q", (Span(0, 40, 80),))], [*ranked], np.array([[0, 1, 2]]), [], [17], [tens, twos]
    )
    assert at_budget[17] == [pytest.approx(30 / 40)]  # [40, 50) and [50, 70) of the gold [40, 80)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 0.2, 0.5, 0.9, 1.0, 1.0, 0.3, 0.7]
    first, again = bootstrap(values, seed=7), bootstrap(values, seed=7)
    assert first == again
    assert first.low < first.mean < first.high
    assert first.mean == pytest.approx(np.mean(values))
    assert bootstrap(values, seed=8) != first
    assert bootstrap([0.5] * 5, seed=1) == type(first)(0.5, 0.5, 0.5)
    assert bootstrap([], seed=1) == type(first)(0.0, 0.0, 0.0)


def test_fusion_ranks_what_both_rank_high_first() -> None:
    fused = fuse([np.array([[0, 1, 2]]), np.array([[1, 2, 0]])], 3)
    assert fused.tolist() == [[1, 0, 2]]  # chunk 1: 1/62 + 1/61 beats chunk 0: 1/61 + 1/63


# ---- questions ------------------------------------------------------------------------------------------------

TEXTS = ["The fox  sleeps\nby day in a cool burrow. It hunts at night.", "Parquet stores columns together."]
IDS = ["fox", "parquet"]


def test_answers_are_located_as_written_then_with_white_space_normalised() -> None:
    assert locate(TEXTS[0], "It hunts at night") == (41, 58)
    start, end = locate(TEXTS[0], "fox sleeps by day") or (0, 0)
    assert TEXTS[0][start:end] == "fox  sleeps\nby day"
    assert locate(TEXTS[0], "the badger") is None


def test_questions_come_as_spans_or_answers_and_the_unlocated_are_reported() -> None:
    lines = [
        json.dumps({"question": "a", "doc_id": "fox", "start": 4, "end": 15}),
        json.dumps(
            {
                "question": "b",
                "spans": [{"doc_id": "fox", "start": 0, "end": 3}, {"doc_id": "parquet", "start": 0, "end": 7}],
            }
        ),
        json.dumps({"question": "c", "answer": "columns   together"}),
        "",
        json.dumps({"question": "d", "answer": "a badger"}),
        json.dumps({"question": "e", "doc_id": "nope", "start": 0, "end": 3}),
        json.dumps({"question": "f", "doc_id": "fox", "start": 10, "end": 999}),
        json.dumps({"question": "g", "answer": "t"}),  # in both documents: not guessed
    ]
    questions, unlocated = load_questions(lines, IDS, TEXTS)
    assert questions == [
        Question("a", (Span(0, 4, 15),)),
        Question("b", (Span(0, 0, 3), Span(1, 0, 7))),
        Question("c", (Span(1, 15, 31),)),
    ]
    assert [(u.line, u.query) for u in unlocated] == [(5, "d"), (6, "e"), (7, "f"), (8, "g")]
    assert "not found" in unlocated[0].reason and "2 documents" in unlocated[3].reason


@pytest.mark.parametrize(
    ("line", "message"),
    [("{not json", "line 1: not JSON"), ("[1, 2]", "JSON object"), ('{"answer": "x"}', "no question")],
)
def test_a_line_that_is_no_question_fails_the_file(line: str, message: str) -> None:
    with pytest.raises(QuestionsError, match=message):
        load_questions([line], IDS, TEXTS)


# ---- the command ----------------------------------------------------------------------------------------------

FOX = (
    "The fennec fox lives in the sand seas of the Sahara. Its ears can reach fifteen centimetres and act as"
    " radiators: blood flowing through them gives off heat to the air, so the fox stays cool without sweating.\n\n"
    "It hunts at night for beetle larvae, burrowing insects, small lizards and gerbils, hearing them under the"
    " sand and digging them out with a few strokes of its forepaws.\n\n"
) * 3
PARQUET = (
    "Parquet is a columnar file format. A file is divided into row groups; each column of a row group is a"
    " column chunk made of pages. The footer holds the schema and statistics for every column chunk, so a"
    " reader skips row groups that cannot match a filter.\n\n"
    "```python\nimport pyarrow.parquet as pq\ntable = pq.read_table('data.parquet', columns=['id', 'text'])\n```\n\n"
) * 3
SALT = (
    "Salt caravans crossed the desert for a thousand years. At Taghaza and later Taoudenni miners sawed rock salt"
    " into bars that camels carried south to the savanna kingdoms, where salt was scarce and precious.\n\n"
) * 4


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "fox.md").write_text(FOX, encoding="utf-8")
    rows = [{"id": "parquet", "text": PARQUET}, {"id": "salt", "text": SALT}]
    (folder / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    start = PARQUET.index("The footer")
    lines = [
        {"question": "How does the fennec fox keep cool?", "doc_id": "fox.md", "answer": "act as radiators"},
        {"question": "What does the Parquet footer hold?", "doc_id": "parquet", "start": start, "end": start + 80},
        {"question": "Where was salt mined?", "answer": "At Taghaza and later\nTaoudenni miners"},
        {"question": "Who built the pyramids?", "answer": "the pharaohs of Egypt"},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in lines), encoding="utf-8")
    return path


def test_the_command_writes_the_table_json_and_html(
    corpus: Path, questions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "big.yaml"
    config.write_text("chunking:\n  min_size: 300\n  max_size: 900\n  overlap: 64\n", encoding="utf-8")
    out_json, out_html = tmp_path / "eval.json", tmp_path / "eval.html"
    argv = ["--input", str(corpus), "--questions", str(questions), "--config", str(config)]
    argv += ["--budgets", "500,1000", "--k", "2", "--json", str(out_json), "--html", str(out_html)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "question on line 4 not located: answer text not found in the corpus" in err
    assert "zerda big" in out and "R@2" in out and "R@1,000 chars" in out
    assert {"BM25:", "WordLlama:", "hybrid:"} <= set(out.splitlines())
    summary = json.loads(out_json.read_text(encoding="utf-8"))
    assert summary["corpus"]["documents"] == 3 and summary["corpus"]["questions"] == 3
    assert summary["unlocated"] == [
        {"line": 4, "question": "Who built the pyramids?", "reason": "answer text not found in the corpus"}
    ]
    assert summary["budgets"] == [500, 1000] and summary["k"] == [2]
    assert [r["retriever"] for r in summary["results"]] == ["BM25", "WordLlama", "hybrid"]
    for row in summary["results"]:
        for cell in [*row["recall_at_budget"].values(), *row["at_k"]["2"].values()]:
            assert 0.0 <= cell["low"] <= cell["mean"] <= cell["high"] <= 1.0
    page = out_html.read_text(encoding="utf-8")
    assert page.count("<svg") == 3 and "<script" not in page and "http" not in page.replace("http://www.w3.org", "")
    assert "Who built the pyramids?" in page
    # the same run again gives the same figures: the bootstrap is seeded
    assert main(argv) == 0
    assert json.loads(out_json.read_text(encoding="utf-8")) == summary


LLAMA_TOKENIZER = "package:wordllama/tokenizers/l2_supercat_tokenizer_config.json"


def test_budgets_in_a_tokenizer_s_tokens(
    corpus: Path, questions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--input", str(corpus), "--questions", str(questions), "--retrievers", "bm25", "--budgets", "100,200"]
    in_chars, in_tokens = tmp_path / "chars.json", tmp_path / "tokens.json"
    assert main([*base, "--json", str(in_chars)]) == 0
    capsys.readouterr()
    assert (
        main([*base, "--tokenizer", LLAMA_TOKENIZER, "--json", str(in_tokens), "--html", str(tmp_path / "e.html")]) == 0
    )
    assert "R@100 tokens" in capsys.readouterr().out
    chars, tokens = (json.loads(p.read_text(encoding="utf-8")) for p in (in_chars, in_tokens))
    assert chars["budget_unit"] == {"unit": "characters", "tokenizer": None}
    assert tokens["budget_unit"] == {"unit": "tokens", "tokenizer": LLAMA_TOKENIZER}
    assert "token budget (tokens of package:wordllama" in (tmp_path / "e.html").read_text(encoding="utf-8")
    # a token holds several characters of this English text: 100 tokens read more of every answer than 100
    # characters, and the ranking is the same
    for budget in ("100", "200"):
        (by_chars,), (by_tokens,) = (
            [r["recall_at_budget"][budget]["mean"] for r in s["results"]] for s in (chars, tokens)
        )
        assert by_tokens > by_chars
    assert main([*base, "--tokenizer", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zerda-eval: error: --tokenizer: cannot read tokenizer")


PEER_MODULES = {"langchain": "langchain_text_splitters", "chonkie": "chonkie", "semchunk": "semchunk"}


def test_peers_are_chunked_at_sizes_matched_to_zerda(
    corpus: Path, questions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "eval.json"
    argv = ["--input", str(corpus), "--questions", str(questions), "--peers", "--retrievers", "bm25"]
    assert main([*argv, "--json", str(out_json)]) == 0
    summary = json.loads(out_json.read_text(encoding="utf-8"))
    families = {s["family"] for s in summary["splitters"]}
    installed = {name for name, module in PEER_MODULES.items() if importlib.util.find_spec(module)}
    assert families == {"zerda", "fixed", *installed}
    (zerda,) = [s for s in summary["splitters"] if s["family"] == "zerda"]
    fixed = next(s for s in summary["splitters"] if s["family"] == "fixed")
    assert fixed["name"] == f"fixed {round(zerda['mean_chars'], -1):.0f}"
    assert main([*argv, "--peer-sizes", "300,600"]) == 0
    assert "fixed 300" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budgets", "0"], "--budgets"),
        (["--retrievers", "grep"], "--retrievers"),
        (["--k", "0"], "--k"),
        (["--embedder", "word2vec"], "--embedder"),
        (["--input", "/nonexistent/*.jsonl"], "matches no file"),
        (["--config", "/nonexistent.yaml"], "cannot read config"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    corpus: Path, questions: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--input", str(corpus), "--questions", str(questions), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zerda-eval: error:") and message in err


def test_a_bad_questions_file_exits_2_with_one_line(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok", "answer": "Parquet"}\n{"answer": "no question"}\n', encoding="utf-8")
    assert main(["--input", str(corpus), "--questions", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == 'zerda-eval: error: line 2: no question (a non-empty string under "question")\n'
    assert main(["--input", str(corpus), "--questions", str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("zerda-eval: error: cannot read --questions")


def test_the_page_renders_its_plots_in_headless_chromium(corpus: Path, questions: Path, tmp_path: Path) -> None:
    page, png = tmp_path / "eval.html", tmp_path / "eval.png"
    argv = ["--input", str(corpus), "--questions", str(questions), "--peers", "--peer-sizes", "400"]
    assert main([*argv, "--html", str(page)]) == 0
    width, height, pixels = png_pixels(screenshot(page, png, 1600))
    assert (width, height) == (1200, 1600)
    colours = Counter(pixels)
    background = colours.most_common(1)[0][0]
    # each splitter's line in its own colour: the first plot holds several saturated colours
    first_plot = pixels[: 700 * width]
    drawn = {p for p in first_plot if p != background and max(p) - min(p) > 80}
    assert len(drawn) >= 4, "lines of several colours"
    assert sum(p != background for p in pixels) > 0.03 * len(pixels)


@pytest.mark.skipif(bool(importlib.util.find_spec("sentence_transformers")), reason="sentence-transformers installed")
def test_a_missing_embedder_is_skipped_with_a_message(
    corpus: Path, questions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--input", str(corpus), "--questions", str(questions), "--embedder", "sentence-transformers:any-model"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "skipping dense retrieval" in err
    assert "BM25:" in out.splitlines() and "hybrid:" not in out.splitlines()


# ---- embed_text: ranked by the rendered text, scored by the chunk's offsets ----------------------------------


class _Recording(Retriever):
    """Ranks the pool in its own order and keeps the texts it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def rank(self, chunks: list[str], queries: list[str], depth: int) -> np.ndarray:
        self.seen = list(chunks)
        return np.tile(np.arange(min(depth, len(chunks))), (len(queries), 1))


def test_a_template_ranks_the_rendered_text_while_the_spans_stay_the_offsets() -> None:
    texts = ["# Fennec\n\n## Ears\n\n" + FOX, PARQUET]
    settings = ChunkingSettings(min_size=100, max_size=300, overlap=32)
    plain = zerda_splitter("plain", settings)
    documents = [SourceRecord("", 0, doc_id, text) for doc_id, text in zip(["fox", "parquet"], texts, strict=True)]
    with_context = zerda_splitter("context", settings, "{doc_id} | {section} | {text}", documents)
    question = Question("How does the fennec fox keep cool?", (Span(0, 0, 40),))
    seen = []
    for splitter in (plain, with_context):
        retriever = _Recording()
        (result,) = evaluate(texts, [question], [splitter], [retriever], [3], [500])
        seen.append(retriever.seen)
        assert result.at_k[3][0].recall > 0, "the gold overlap is measured on the chunk's offsets"
    pool = chunk_pool(plain, texts)
    assert seen[0] == [texts[s.doc][s.start : s.end] for s in pool]
    assert len(seen[1]) == len(pool)
    for span, ranked in zip(pool, seen[1], strict=True):
        doc_id = ["fox", "parquet"][span.doc]
        assert ranked.startswith(f"{doc_id} | ") and ranked.endswith(f" | {texts[span.doc][span.start : span.end]}")
    assert any(r.startswith("fox | Fennec > Ears | ") for r in seen[1]), "the heading path is in the ranked text"
    with pytest.raises(ValueError, match="unknown placeholder"):
        zerda_splitter("bad", settings, "{author} {text}")


@pytest.mark.skipif(not importlib.util.find_spec("bm25s"), reason="bm25s not installed")
def test_the_command_evaluates_a_config_with_embed_text(
    corpus: Path, questions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "context.yaml"
    config.write_text('output:\n  embed_text: "{doc_id}: {section}\\n\\n{text}"\n', encoding="utf-8")
    out_json = tmp_path / "eval.json"
    argv = ["--input", str(corpus), "--questions", str(questions), "--config", str(config), "--retrievers", "bm25"]
    assert main([*argv, "--json", str(out_json)]) == 0
    assert "zerda context" in capsys.readouterr().out
    (row,) = json.loads(out_json.read_text(encoding="utf-8"))["results"]
    assert row["retriever"] == "BM25"


@pytest.mark.skipif(not importlib.util.find_spec("bm25s"), reason="bm25s not installed")
def test_a_config_with_embed_text_cuts_each_document_once(
    corpus: Path, questions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spans and the rendered texts come from one cut (each document was chunked twice with a template),
    and matching the peers' sizes to zerda's chunks reuses that cut too."""
    config = tmp_path / "context.yaml"
    config.write_text('output:\n  embed_text: "{doc_id}: {section}\\n\\n{text}"\n', encoding="utf-8")
    cut: Counter[str] = Counter()
    chunk = AdaptiveChunker.chunk

    def counted(self: AdaptiveChunker, text: str, *args: object, **kwargs: object) -> object:
        cut[text] += 1
        return chunk(self, text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(AdaptiveChunker, "chunk", counted)
    argv = ["--input", str(corpus), "--questions", str(questions), "--config", str(config), "--retrievers", "bm25"]
    assert main([*argv, "--peers"]) == 0
    assert len(cut) == 3 and set(cut.values()) == {1}, cut.values()


def test_a_template_s_title_is_the_document_s_title() -> None:
    documents = [SourceRecord("", 0, "fox", FOX, "Fennec fox"), SourceRecord("", 0, "salt", SALT)]
    splitter = zerda_splitter("titled", ChunkingSettings(min_size=100, max_size=300), "{title}\n\n{text}", documents)
    (fox_spans, fox_texts), (salt_spans, salt_texts) = splitter.cut(0, FOX), splitter.cut(1, SALT)
    assert fox_texts == [f"Fennec fox\n\n{FOX[start:end]}" for start, end in fox_spans] and fox_spans
    assert salt_texts == [SALT[start:end] for start, end in salt_spans], "no title: the chunk's text alone"
