"""Property tests: the chunker contract on random and adversarial text."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.chunk_checks import assert_chunk_contract
from tests.common import LLAMA_TOKENIZER
from zerda_core.chunks import AdaptiveChunker, ChunkConfig
from zerda_core.chunks.adaptive_chunker import _estimate_density
from zerda_core.chunks.sentences import sentence_spans

PIECES = [
    "The fox sleeps. ",
    "Dr. Who? ",
    "e.g. this ",
    "3.14 ",
    "v2.0.1 ",
    "https://x.org/a.b?c=1 ",
    "... ",
    "?! ",
    "def f(x): return x ",
    "SELECT * FROM t; ",
    "{[()]} ",
    "مرحبا بك؟",
    "كيف حالك؟! ",
    "د. أحمد، ",
    "؛ ",
    "۔",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "\t",
    "   ",
    "\u200f",
    "\u200e",
    "😀",
    "👩‍👩‍👧",
    "\u00a0",
    "\u3000",
    "\x00",
    "x" * 300,
    "word " * 80,
    "ـــ",
    "A",
    ".",
    "\u0301",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]
odd_text = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)
# prose and code blocks, headings and fences: where section density and structural cuts change the cuts
BLOCKS = [
    "# Install\n\n",
    "## From source\n\n",
    "Usage\n=====\n\n",
    "```python\ndef f(x):\n    return {x: [x]}\n```\n\n",
    "```\nSELECT 1;\n\nSELECT 2;\n```\n",
    "~~~\nunclosed fence\n",
    "The river ran past the old mill, and the children watched the wheel turn. " * 4 + "\n\n",
    "for i in range(10): print(i, [i * 2], {i: i})\n" * 6 + "\n",
]
structured_text = st.lists(st.sampled_from(BLOCKS), max_size=40).map("".join)
any_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=3000)
texts = st.one_of(odd_text, any_text, structured_text)


def chunk_configs(lowest: int, highest: int, unit: str = "characters", tokenizer: str | None = None) -> Any:
    """Random sizes from ``lowest`` (min_size) up to ``highest`` x 2.5 (max_size), overlap up to ``highest`` x 0.75."""
    return st.builds(
        lambda lo, span, overlap, min_chunk, scope: ChunkConfig(
            min_size=lo,
            max_size=lo + span,
            overlap=overlap,
            min_chunk_size=min_chunk,
            density_scope=scope,
            size_unit=unit,
            tokenizer=tokenizer,
        ),
        st.integers(lowest, highest),
        st.integers(0, highest * 3 // 2),
        st.integers(0, highest * 3 // 4),
        st.integers(0, 150),
        st.sampled_from(["document", "section"]),
    )


# both units: characters, and tokens of a real tokenizer (smaller sizes: a token is about 4 characters)
configs = st.one_of(chunk_configs(2, 400), chunk_configs(8, 120, "tokens", LLAMA_TOKENIZER))
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(text=texts, config=configs)
def test_contract_on_random_text(text: str, config: ChunkConfig) -> None:
    chunker = AdaptiveChunker(config)
    assert_chunk_contract(chunker, text, chunker.chunk(text, doc_id="d", source="s"))


# Found by test_contract_on_random_text: a section's first chunk started in the previous chunk's overlap
# and was cut back to the section break where that chunk ended, so it did not advance.
_SECTION_BREAK_TEXT = (
    "000000000000000000000000000000000000                          0000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000                     000000000000"
    "0 00 0000  00 00000   00.\n\n0000 00000 000 000   00 000 00000 000 000000000   000. 000 0000"
    "0 000 000   00 000 00000 000  00 00000000 00 0000  00 00000  000. 0 0      0.0000000      "
    "       00000000000000000000000000000000000000000  \n       \n  .0000000000000000000000000000"
    "000000000000000000000           000000000. 0     0000 000000000000000000  0 000  00 000000"
    "00 00 0000  00 00000  000. 000 00000 000 000  0 00 0 0 0 0 0 0 . 00000000000000000000\n    "
    "\n0 0 0000000000000000 0     000  00 00000000 00 0000  00 00000  000. 000 00000 000 000   0"
    "0 000 00000 000  00 00000000 00 0000  00 00000  000. 000 00000 000 000   00 000 00000 000 "
    " 00 00000000 00 0000  00 00000  000. 000 00000 000 000   00 000 00000 000  00 00000000 00 "
    "0000  00 00000  000.\n)))))))))))))))))) [[[[00{{{{{{{"
)


def test_a_chunk_starting_in_the_overlap_before_a_section_break_still_advances() -> None:
    config = ChunkConfig(min_size=155, max_size=323, overlap=155, min_chunk_size=0, density_scope="section")
    chunker = AdaptiveChunker(config)
    assert_chunk_contract(chunker, _SECTION_BREAK_TEXT, chunker.chunk(_SECTION_BREAK_TEXT, doc_id="d", source="s"))


@FAST
@given(text=texts, config=configs)
def test_deterministic(text: str, config: ChunkConfig) -> None:
    first = AdaptiveChunker(config).chunk(text, doc_id="d")
    second = AdaptiveChunker(config).chunk(text, doc_id="d")
    assert [(c.chunk_id, c.metadata) for c in first] == [(c.chunk_id, c.metadata) for c in second]


@FAST
@given(text=texts)
def test_density_in_unit_interval(text: str) -> None:
    assert 0.0 <= _estimate_density(text) <= 1.0


@FAST
@given(text=texts)
def test_sentence_spans_cover_visible_text(text: str) -> None:
    spans = sentence_spans(text)
    covered = {i for a, b in spans for i in range(a, b)}
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    assert all(text[a:b] == text[a:b].strip() and a < b for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(spans))


@settings(max_examples=25, deadline=None)
@given(word=st.sampled_from(["x", "ab ", "مرحبا ", "😀", "\u200f", "a.b"]), repeat=st.integers(5_000, 60_000))
def test_huge_sentences_without_ends(word: str, repeat: int) -> None:
    text = word * repeat
    chunker = AdaptiveChunker(min_size=50, max_size=400, overlap=64)
    assert_chunk_contract(chunker, text, chunker.chunk(text))
