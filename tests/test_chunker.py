"""AdaptiveChunker: the reference page's examples and DESIGN.md's chunker contract."""

from __future__ import annotations

import itertools
import logging
import re
import statistics
import threading
import unicodedata
from pathlib import Path

import pytest

from tests.chunk_checks import assert_chunk_contract
from tests.common import DATA
from tests.debian_texts import LICENSES, PYTHON_LIB, require
from zerda_core.chunks import (
    AdaptiveChunker,
    BaseChunker,
    ChunkConfig,
    ChunkMetadata,
    ChunkType,
    Document,
    DocumentChunk,
)
from zerda_core.chunks.adaptive_chunker import _estimate_density

SAMPLES = sorted(DATA.iterdir())


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_reference_basic_example() -> None:
    chunker = AdaptiveChunker()
    chunks = chunker.chunk(read("english_prose.txt"), source="report.pdf")
    assert chunks and all(isinstance(c, DocumentChunk) for c in chunks)
    for c in chunks:
        assert isinstance(c.metadata, ChunkMetadata)
        assert 0.0 <= c.metadata.extra["density"] <= 1.0
        assert c.metadata.source == "report.pdf"
        assert c.metadata.chunk_type is ChunkType.ADAPTIVE


def test_reference_technical_example_config_takes_precedence() -> None:
    config = ChunkConfig(adaptive_min_size=80, adaptive_max_size=800, adaptive_base_size=300, overlap=64)
    chunker = AdaptiveChunker(config=config, min_size=1, max_size=5, overlap=0, base_size=2)
    assert (chunker.min_size, chunker.max_size, chunker.base_size, chunker.overlap) == (80, 800, 300, 64)
    chunks = chunker.chunk(read("guide.md"), source="api_docs.md")
    assert all(80 <= c.metadata.extra["target_size"] <= 800 for c in chunks)
    assert_chunk_contract(chunker, read("guide.md"), chunks)


def test_the_reference_names_are_the_short_names_by_another_spelling() -> None:
    spec = ChunkConfig(
        adaptive_min_size=80, adaptive_max_size=800, adaptive_base_size=300, adaptive_technical_threshold=0.7
    )
    short = ChunkConfig(min_size=80, max_size=800, base_size=300, technical_threshold=0.7)
    assert spec == short and hash(spec) == hash(short)
    assert (spec.adaptive_min_size, spec.adaptive_max_size, spec.adaptive_base_size) == (80, 800, 300)
    assert spec.adaptive_technical_threshold == 0.7
    assert AdaptiveChunker(spec).chunk(read("guide.md")) == AdaptiveChunker(
        min_size=80, max_size=800, base_size=300
    ).chunk(read("guide.md"))
    with pytest.raises(TypeError, match="min_size and adaptive_min_size, two names for one setting"):
        ChunkConfig(min_size=50, adaptive_min_size=80)
    with pytest.raises(TypeError, match="adaptive_overlap"):
        ChunkConfig(adaptive_overlap=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"ChunkConfig\.min_size must be"):
        ChunkConfig(adaptive_min_size=0)


def test_reference_density_examples_order() -> None:
    code_text = "def fibonacci(n): return n if n <= 1 else fibonacci(n-1) + fibonacci(n-2)"
    prose_text = "Once upon a time in a land far away there lived a young princess."
    assert _estimate_density(code_text) >= 0.6
    assert _estimate_density(prose_text) <= 0.35


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t "])
def test_empty_text_gives_no_chunks(text: str) -> None:
    assert AdaptiveChunker().chunk(text, source="empty.txt") == []


def test_document_shorter_than_min_chunk_size_is_dropped() -> None:
    short = "A short note of under one hundred characters."
    assert AdaptiveChunker().chunk(short) == []
    kept = AdaptiveChunker(ChunkConfig(min_chunk_size=10)).chunk(short)
    assert [c.text for c in kept] == [short]


def test_non_string_text_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="text must be str"):
        AdaptiveChunker().chunk(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "value"), [("doc_id", 5), ("doc_id", None), ("source", b"a.txt"), ("source", None)])
def test_non_string_doc_id_or_source_is_a_type_error_at_the_call(name: str, value: object) -> None:
    # They used to be stored as given, and each chunk's chunk_id (which hashes them) failed later.
    text = "A fennec fox sleeps by day. It hunts at night in the desert sand. " * 30
    with pytest.raises(TypeError, match=f"{name} must be str, got {type(value).__name__}"):
        AdaptiveChunker().chunk(text, **{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_contract_holds_on_shipped_texts(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for chunker in (AdaptiveChunker(), AdaptiveChunker(min_size=60, max_size=300, overlap=40)):
        chunks = chunker.chunk(text, doc_id=path.stem, source=path.name)
        assert_chunk_contract(chunker, text, chunks)


def test_dense_text_gets_smaller_target_than_prose() -> None:
    chunker = AdaptiveChunker()
    code = chunker.chunk(read("code_python.txt"))[0].metadata.extra
    prose = chunker.chunk(read("english_prose.txt"))[0].metadata.extra
    assert code["density"] > prose["density"]
    assert code["target_size"] < prose["target_size"]


def test_target_size_interpolates_and_clamps() -> None:
    chunker = AdaptiveChunker()
    assert chunker.target_size(0.0) == 1500
    assert chunker.target_size(0.5) == 800
    assert chunker.target_size(1.0) == 100
    assert chunker.target_size(1.7) == 100
    assert chunker.target_size(-1.0) == 1500


def test_min_size_above_max_size_collapses_to_min_size_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        chunker = AdaptiveChunker(min_size=900, max_size=300)
    assert "collapses to min_size" in caplog.text
    chunks = chunker.chunk(read("english_prose.txt"))
    assert {c.metadata.extra["target_size"] for c in chunks} == {900}


def test_overlap_larger_than_half_target_is_capped_and_chunks_advance() -> None:
    text = read("code_python.txt") * 3
    chunker = AdaptiveChunker(min_size=100, max_size=100, overlap=128)
    chunks = chunker.chunk(text)
    assert len(chunks) > 10
    assert_chunk_contract(chunker, text, chunks)
    for previous, current in itertools.pairwise(chunks):
        assert previous.metadata.end_char - current.metadata.start_char <= 50


def test_overlap_snaps_forward_to_a_word_start() -> None:
    text = " ".join(f"word{i:03d}" for i in range(400)) + "."
    chunker = AdaptiveChunker(min_size=200, max_size=200, overlap=30)
    chunks = chunker.chunk(text)
    for chunk in chunks[1:]:
        start = chunk.metadata.start_char
        assert text[start - 1] == " " and chunk.text.startswith("word")


def test_overlap_starts_at_a_sentence_start_when_one_is_in_reach() -> None:
    """The next chunk starts at a sentence (or a heading line), not at the word the overlap's length reaches."""
    body = " ".join(f"Sentence number {i} says a little more." for i in range(12))
    text = f"{body}\n\nInstalling the tools\n\n{body}\n\nUsing the tools\n\n{body}"
    chunker = AdaptiveChunker(min_size=500, max_size=500, overlap=128)
    chunks = chunker.chunk(text)
    assert_chunk_contract(chunker, text, chunks)
    sentence_starts = {text.index(word) for word in ("Installing", "Using")} | {
        m.start() for m in re.finditer(r"(?<=\. )Sentence", text)
    }
    for previous, chunk in itertools.pairwise(chunks):
        assert chunk.metadata.start_char < previous.metadata.end_char  # an overlap is carried
        assert chunk.metadata.start_char in sentence_starts, chunk.text[:40]


def test_zero_overlap_gives_disjoint_chunks() -> None:
    text = read("english_prose.txt")
    chunks = AdaptiveChunker(min_size=200, max_size=200, overlap=0).chunk(text)
    for previous, current in itertools.pairwise(chunks):
        assert current.metadata.start_char >= previous.metadata.end_char


def test_sentences_stay_whole_when_they_fit() -> None:
    text = read("english_prose.txt")
    chunks = AdaptiveChunker(min_size=400, max_size=400, overlap=0).chunk(text)
    for chunk in chunks[:-1]:
        assert chunk.text.endswith((".", "?", "!", '"', "...")), chunk.text[-20:]


def test_long_sentence_is_cut_at_word_boundaries() -> None:
    text = " ".join(["lorem"] * 2000)
    chunker = AdaptiveChunker(min_size=100, max_size=300, overlap=32)
    chunks = chunker.chunk(text)
    assert_chunk_contract(chunker, text, chunks)
    assert all(c.text.startswith("lorem") and c.text.endswith("lorem") for c in chunks)


def test_word_longer_than_target_is_cut_at_characters() -> None:
    text = "x" * 5000
    chunker = AdaptiveChunker(min_size=100, max_size=300, overlap=20)
    chunks = chunker.chunk(text)
    assert_chunk_contract(chunker, text, chunks)
    assert max(c.char_count for c in chunks[:-1]) == chunks[0].metadata.extra["target_size"]


def test_short_tail_joins_previous_chunk() -> None:
    body = " ".join(f"Sentence number {i} is here." for i in range(40))
    text = body + " Tail."
    chunker = AdaptiveChunker(ChunkConfig(min_size=200, max_size=200, overlap=0, min_chunk_size=50))
    chunks = chunker.chunk(text)
    assert chunks[-1].text.endswith("Tail.")
    assert len(chunks[-1].text) > len("Tail.") + 50


def test_language_auto_resolves_per_document() -> None:
    chunker = AdaptiveChunker()
    assert chunker.chunk(read("english_prose.txt"))[0].metadata.language == "en"
    assert chunker.chunk(read("arabic_prose.txt"))[0].metadata.language == "ar"
    assert chunker.chunk(read("mixed_en_ar.md"))[0].metadata.language == "mixed"
    fixed = AdaptiveChunker(language="en").chunk(read("arabic_prose.txt"))
    assert {c.metadata.language for c in fixed} == {"en"}


def test_output_and_ids_are_deterministic() -> None:
    text = read("mixed_en_ar.md") + read("guide.md")
    first = AdaptiveChunker(min_size=80, max_size=400).chunk(text, doc_id="d1", source="s")
    second = AdaptiveChunker(min_size=80, max_size=400).chunk(text, doc_id="d1", source="s")
    assert [(c.chunk_id, c.text, c.metadata) for c in first] == [(c.chunk_id, c.text, c.metadata) for c in second]
    other_doc = AdaptiveChunker(min_size=80, max_size=400).chunk(text, doc_id="d2", source="s")
    assert not {c.chunk_id for c in first} & {c.chunk_id for c in other_doc}


def test_chunk_documents_accepts_documents_and_dicts() -> None:
    text = read("english_prose.txt")
    chunker = AdaptiveChunker()
    chunks = chunker.chunk_documents(
        [Document(text=text, doc_id="a", source="x.txt"), {"text": text, "doc_id": "b", "source": "y.txt"}]
    )
    assert {(c.metadata.doc_id, c.metadata.source) for c in chunks} == {("a", "x.txt"), ("b", "y.txt")}
    assert isinstance(chunker, BaseChunker)
    with pytest.raises(ValueError, match="'text'"):
        chunker.chunk_documents([{"doc_id": "no text"}])
    with pytest.raises(TypeError):
        chunker.chunk_documents([42])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("field", "value"),
    [("min_size", 0), ("max_size", -5), ("overlap", -1), ("technical_threshold", 1.5)],
)
def test_invalid_config_is_a_clear_value_error(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        ChunkConfig(**{field: value})  # type: ignore[arg-type]


def test_concurrent_calls_give_the_same_chunks() -> None:
    chunker = AdaptiveChunker(min_size=80, max_size=500)
    texts = [p.read_text(encoding="utf-8") for p in SAMPLES]
    expected = [[c.text for c in chunker.chunk(t)] for t in texts]
    results: list[list[list[str]]] = []

    def work() -> None:
        results.append([[c.text for c in chunker.chunk(t)] for t in texts * 5][: len(texts)])

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 8


def test_sizing_is_what_chunk_uses() -> None:
    chunker = AdaptiveChunker(min_size=100, max_size=1500, overlap=128)
    for name in ("english_prose.txt", "code_python.txt", "arabic_prose.txt"):
        text = (DATA / name).read_text(encoding="utf-8")
        density, target, overlap = chunker.sizing(text)
        first = chunker.chunk(text)[0].metadata.extra
        assert (first["density"], first["target_size"]) == (density, target)
        assert overlap == min(128, target // 2)


def _prose_then_code() -> tuple[str, int]:
    """The GPL's first 12,000 characters, then as much of a Python module, and where the code starts."""
    prose = (require(LICENSES, "base-files") / "GPL-3").read_text(encoding="utf-8")[:12_000]
    code = (require(PYTHON_LIB, "libpython3.11-stdlib") / "json" / "decoder.py").read_text(encoding="utf-8")
    return prose + "\n\n" + code[: len(prose)], len(prose) + 2


def test_section_density_gives_prose_larger_chunks_than_code_in_one_document() -> None:
    text, code_start = _prose_then_code()
    chunker = AdaptiveChunker(density_scope="section")
    chunks = chunker.chunk(text, doc_id="mixed")
    assert_chunk_contract(chunker, text, chunks)
    prose = [c.char_count for c in chunks[:-1] if c.metadata.end_char <= code_start]
    code = [c.char_count for c in chunks[:-1] if c.metadata.start_char >= code_start]
    assert prose and code
    assert statistics.median(prose) >= 2 * statistics.median(code), (statistics.median(prose), statistics.median(code))
    whole = round(_estimate_density(text), 4)
    assert {c.metadata.extra["density"] for c in chunks} == {whole}
    locals_ = [c.metadata.extra["local_density"] for c in chunks]
    assert min(locals_) < whole < max(locals_)


def test_document_density_scope_is_the_default_one_target() -> None:
    text, _ = _prose_then_code()
    chunks = AdaptiveChunker().chunk(text)
    assert len({c.metadata.extra["target_size"] for c in chunks}) == 1
    assert all("local_density" not in c.metadata.extra for c in chunks)
    assert ChunkConfig().density_scope == "document"


def test_density_scope_must_be_known() -> None:
    with pytest.raises(ValueError, match="density_scope"):
        ChunkConfig(density_scope="paragraph")


CLUSTERED = {
    # scripts and symbols whose characters carry marks or joiners, written without spaces: every cut is a hard one
    "thai": "ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำแน่นอนหรือวรรณยุกต์" * 200,
    "accents": "e\u0301a\u0300o\u0302" * 1500,
    "arabic-harakat": "بَيْتٌكَبِيرٌ" * 1000,
    "zwj-family": "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466" * 400,
    "skin-tones": "\U0001f44d\U0001f3fd" * 1000,
    "flags": "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f" * 300,
}


def _inside_a_cluster(text: str, i: int) -> bool:
    if not 0 < i < len(text):
        return False
    return (
        unicodedata.category(text[i])[0] == "M"
        or text[i - 1] == "\u200d"
        or text[i] == "\u200d"
        or ("\U0001f3fb" <= text[i] <= "\U0001f3ff" or "\U000e0020" <= text[i] <= "\U000e007f")
    )


@pytest.mark.parametrize("name", list(CLUSTERED))
def test_a_cut_inside_a_long_word_never_splits_a_character_cluster(name: str) -> None:
    """A word longer than the target is cut inside, but between clusters: no chunk starts with a stranded
    accent or vowel mark, and no emoji sequence is split across chunks."""
    text = CLUSTERED[name]
    chunks = AdaptiveChunker(min_size=100, max_size=300, overlap=40).chunk(text)
    assert len(chunks) > 5
    for chunk in chunks:
        start, end = chunk.metadata.start_char, chunk.metadata.end_char
        assert text[start:end] == chunk.text
        assert len(chunk.text) <= 300
        assert not _inside_a_cluster(text, start) and not _inside_a_cluster(text, end), (start, end)
