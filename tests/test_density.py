"""_estimate_density: each term of the reference formula moves the score the right way."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.common import DATA
from zerda_core.chunks.adaptive_chunker import (
    _ARABIC_LONG_WORD,
    CODE_PUNCTUATION,
    TECHNICAL_WORDS,
    _estimate_density,
)
from zerda_core.chunks.language import _LATIN_LETTERS, detect_language, latin_letters


@pytest.mark.parametrize("text", ["", " ", "\n\n", "😀😀😀", "٣٤٥ ١٢", "\x00\x01"])
def test_density_stays_in_unit_interval(text: str) -> None:
    assert 0.0 <= _estimate_density(text) <= 1.0


def test_empty_text_has_zero_density() -> None:
    assert _estimate_density("") == 0.0


def test_technical_hits_raise_density() -> None:
    prose = "the river ran past the old mill and the children watched the water turn the wheel slowly"
    sql = "SELECT id FROM users WHERE score >= 0.75 AND name = 'x' ORDER BY id; SELECT now() FROM t"
    assert _estimate_density(sql) > _estimate_density(prose) + 0.2


def test_repeated_vocabulary_lowers_density() -> None:
    varied = "desert foxes hunt beetles while owls watch silent dunes under bright cold stars"
    repeated = "fox fox fox fox fox fox fox fox fox fox fox fox fox fox"
    assert _estimate_density(varied) > _estimate_density(repeated)


def test_long_words_raise_density() -> None:
    short = "a b c d e f g h i j a b c d e f g h i j"
    long_ = "abcdefghij klmnopqrst abcdefghij klmnopqrst abcdefghij klmnopqrst abcdefghij"
    assert _estimate_density(long_) > _estimate_density(short)


def test_long_arabic_words_raise_density() -> None:
    simple = "ذهب الولد إلى البيت ثم أكل الخبز ونام"
    formal = "الاستراتيجيات والمستشفيات والمعلوماتية والمتخصصين"
    assert _estimate_density(formal) > _estimate_density(simple)


def test_arabic_diacritics_do_not_count_as_letters() -> None:
    assert _estimate_density("كَتَبَ كَتَبَ") == _estimate_density("كَتَبَ كَتَبَ")
    plain, vowelled = "مكتبة مكتبة مكتبة", "مَكْتَبَة مَكْتَبَة مَكْتَبَة"
    # six letters: not a complex word, with or without vowel marks
    assert _estimate_density(vowelled) - _estimate_density(plain) < 0.2


@given(st.text(alphabet="كتبمرسلاو\u064b\u064e\u0650\u0651\u0652 ،.\n", max_size=80))
def test_long_arabic_words_are_counted_as_if_diacritics_were_removed(text: str) -> None:
    without_marks = re.sub("[\u064b-\u0652]", "", text)
    assert len(_ARABIC_LONG_WORD.findall(text)) == len(re.findall("[\u0620-\u064a]{7,}", without_marks))


def test_code_is_denser_than_narrative_on_shipped_texts() -> None:
    code = _estimate_density((DATA / "code_python.txt").read_text(encoding="utf-8"))
    sql = _estimate_density((DATA / "query.sql").read_text(encoding="utf-8"))
    prose = _estimate_density((DATA / "english_prose.txt").read_text(encoding="utf-8"))
    assert min(code, sql) > prose


def test_huge_document_is_scored_in_windows_like_a_small_one() -> None:
    paragraph = (DATA / "english_prose.txt").read_text(encoding="utf-8")
    huge = paragraph * 2000  # about 2.6 MB: several scan windows
    assert abs(_estimate_density(huge) - _estimate_density(paragraph * 800)) < 0.01


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("The fox sleeps by day.", "en"),
        ("ينام الثعلب في النهار.", "ar"),
        ("The fox الثعلب sleeps ينام by day في النهار", "mixed"),
        ("1234 + 5678 = 6912", "und"),
    ],
)
def test_language_by_script_share(text: str, language: str) -> None:
    assert detect_language(text) == language


def reference_density(text: str) -> float:
    """The formula exactly as _estimate_density's docstring states it, written plainly and slowly."""
    if not text:
        return 0.0
    words = text.split()
    technical = sum(word in TECHNICAL_WORDS for word in words)
    technical += sum(text.count(mark) for mark in CODE_PUNCTUATION)
    technical += len(re.findall(r"(?<=[0-9])\.(?=[0-9])", text)) + len(re.findall(r"O\([^()\n]{1,20}\)", text))
    arabic = len(re.findall("[\u0620-\u064a]{7,}", re.sub("[\u064b-\u0652]", "", text)))
    vocabulary = len({word.lower() for word in words}) / len(words) if words else 0.0
    mean_length = sum(len(word) for word in words) / len(words) if words else 3.0
    density = (
        min(technical / (len(text) / 100), 1.0) * 0.4
        + vocabulary * 0.3
        + min(max((mean_length - 3) / 5, 0.0), 1.0) * 0.2
        + min(arabic / (len(text) / 200), 1.0) * 0.1
    )
    return min(max(density, 0.0), 1.0)


DENSITY_PIECES = [
    "def ",
    "SELECT ",
    "select ",
    "None ",
    "API ",
    "O(n log n) ",
    "3.14 ",
    "1.2.3 ",
    "{[(<=>)]} ",
    "x=1 ",
    "Word ",
    "word ",
    "WORD ",
    "extraordinarily ",
    "a ",
    "\n",
    "\t",
    "\u00a0",
    "\u3000",
    "\ud800",
    "😀",
    "المستشفيات ",
    "الْمُسْتَشْفَيَاتُ ",
    "كتب ",
    "ـ",
    "١٢٣ ",
    "é",
    "(",
    "O(",
    ")",
]


@given(st.one_of(st.lists(st.sampled_from(DENSITY_PIECES), max_size=80).map("".join), st.text(max_size=400)))
def test_density_follows_the_documented_formula(text: str) -> None:
    assert _estimate_density(text) == pytest.approx(reference_density(text), abs=1e-12)


LATIN_EDGES = ["a", "Z", "@", "[", "\u00bf", "\u00c0", "\u00d7", "\u00ff", "\u0100", "\u023f", "\u0240", "\u024f"]
LATIN_EDGES += ["\u0250", "\u0620", "\u064a", "\ud800", "\U0001d518", " "]


@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(LATIN_EDGES), max_size=60).map("".join)))
def test_latin_letters_counted_on_bytes_match_the_pattern(text: str) -> None:
    assert latin_letters(text) == sum(map(len, _LATIN_LETTERS.findall(text)))
