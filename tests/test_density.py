"""_estimate_density: each term of the reference formula moves the score the right way, on real text too."""

from __future__ import annotations

import re
import statistics
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.common import DATA
from tests.debian_texts import LICENSES, PYTHON_LIB, handbook_pairs, mixed_corpus, require
from zerda_core.chunks import charclasses
from zerda_core.chunks.adaptive_chunker import _DECIMAL, TECHNICAL_WORDS, _estimate_density
from zerda_core.chunks.charclasses import CODE_PUNCTUATION, code_points
from zerda_core.chunks.language import _LATIN_LETTERS, detect_language


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
def test_long_arabic_words_count_their_letters_only(text: str) -> None:
    """An Arabic word's diacritics and the punctuation glued to it do not make it long (the reference counts)."""
    assert _estimate_density(text) == pytest.approx(reference_density(text), abs=1e-12)


def test_code_is_denser_than_narrative_on_shipped_texts() -> None:
    code = _estimate_density((DATA / "code_python.txt").read_text(encoding="utf-8"))
    sql = _estimate_density((DATA / "query.sql").read_text(encoding="utf-8"))
    prose = _estimate_density((DATA / "english_prose.txt").read_text(encoding="utf-8"))
    assert min(code, sql) > prose


def test_a_huge_document_is_scanned_one_window_at_a_time() -> None:
    """Four windows take one window's scan and the windows' text (1 byte a character): not four scans, nor two."""
    window = ("word " * 50_000 + "\n") * 4  # about 1 MB: one window
    peaks = []
    for text in (window, window * 4):
        tracemalloc.start()
        _estimate_density(text)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < peaks[0] + 1.25 * len(window * 4), peaks


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


@given(st.text(alphabet="ab ثعلب\n😀", max_size=300).flatmap(lambda t: st.sampled_from([t, t * 40])))
def test_language_from_the_classes_the_density_made_is_the_same(text: str) -> None:
    """The chunker passes the classes of the whole text; the samples' classes are taken from them, not made again."""
    assert detect_language(text, code_points(text)[1]) == detect_language(text)


def reference_density(text: str) -> float:
    """The formula exactly as _estimate_density's docstring states it, written plainly and slowly."""
    words = text.split()
    if not words:
        return 0.0
    chars = sum(len(word) for word in words)
    technical = sum(word in TECHNICAL_WORDS for word in words)
    technical += sum(text.count(mark) for mark in CODE_PUNCTUATION)
    technical += len(re.findall(r"(?<=[0-9])\.(?=[0-9])", text)) + len(re.findall(r"O\([^()\n]{1,20}\)", text))
    keys = [(word[0].lower() if "A" <= word[0] <= "Z" else word[0], word[-1], len(word)) for word in words]
    m = min(8, len(words) // 50)
    starts = [k * (len(words) - 50) // (m - 1) for k in range(m)] if m > 1 else [0]
    blocks = [keys[start : start + 50] for start in starts]
    vocabulary = sum(len(set(b)) for b in blocks) / sum(len(b) for b in blocks)
    arabic = [word for word in words if re.search("[\u0620-\u064a]", word)]
    baseline = (4.5 * (len(words) - len(arabic)) + 4.1 * len(arabic)) / len(words)
    long_words = sum(len(re.findall("[\u0620-\u064a]", word)) >= 7 for word in arabic)
    long_words += sum(len(word) >= 8 for word in words if word not in arabic)
    density = (
        min(technical / (chars / 100) / 4, 1.0) * 0.4
        + vocabulary * 0.3
        + min(max((chars / len(words) - baseline) / 3, 0.0), 1.0) * 0.2
        + min(long_words / len(words) / 0.5, 1.0) * 0.1
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
    "الاستراتيجيات-x ",
    "abcdefgh ",
    "abcdefg ",
]


@given(st.one_of(st.lists(st.sampled_from(DENSITY_PIECES), max_size=200).map("".join), st.text(max_size=400)))
def test_density_follows_the_documented_formula(text: str) -> None:
    assert _estimate_density(text) == pytest.approx(reference_density(text), abs=1e-12)


EVERY_CHARACTER = "".join(map(chr, range(sys.maxunicode + 1)))
CLASSES = {
    "SPACE": str.isspace,
    "CODE_MARK": CODE_PUNCTUATION.__contains__,
    "ARABIC_LETTER": re.compile("[\u0620-\u064a]").fullmatch,
    "ARABIC_SCRIPT": re.compile("[\u0620-\u064a\u0671-\u06d3\u06fa-\u06fc\u0750-\u077f]").fullmatch,
    "LATIN": _LATIN_LETTERS.fullmatch,
    "ASCII_UPPER": re.compile("[A-Z]").fullmatch,
}


@pytest.mark.parametrize("name", CLASSES)
def test_each_character_class_holds_exactly_its_characters(name: str) -> None:
    """Over every code point (lone surrogates too), and ASCII text (classified by bytes.translate) alike."""
    bit = getattr(charclasses, name)
    expected = [i for i, char in enumerate(EVERY_CHARACTER) if CLASSES[name](char)]
    assert np.flatnonzero(code_points(EVERY_CHARACTER)[1] & bit).tolist() == expected
    ascii_text = EVERY_CHARACTER[:128]
    assert np.flatnonzero(code_points(ascii_text)[1] & bit).tolist() == [i for i in expected if i < 128]


def _repeated_documents() -> list[tuple[str, str]]:
    english, arabic = handbook_pairs()[0]
    licence = (require(LICENSES, "base-files") / "Apache-2.0").read_text(encoding="utf-8")
    module = (require(PYTHON_LIB, "libpython3.11-stdlib") / "json" / "decoder.py").read_text(encoding="utf-8")
    return [("handbook en", english), ("handbook ar", arabic), ("Apache-2.0", licence), ("json/decoder.py", module)]


def test_a_document_and_the_same_repeated_score_alike() -> None:
    for name, text in _repeated_documents():
        assert len(text) >= 2000, name
        once = _estimate_density(text)
        for times in (2, 4):
            again = _estimate_density("\n\n".join([text] * times))
            assert abs(again - once) <= 0.02, f"{name}: {once:.4f} once, {again:.4f} repeated {times}x"


def test_a_page_and_its_arabic_translation_score_alike() -> None:
    pairs = handbook_pairs()
    assert len(pairs) >= 50, f"only {len(pairs)} translated handbook pages"
    differences = [abs(_estimate_density(en) - _estimate_density(ar)) for en, ar in pairs]
    assert statistics.median(differences) <= 0.08


def test_density_spreads_code_and_prose_apart_on_a_mixed_corpus() -> None:
    corpus = mixed_corpus()
    density = {kind: [_estimate_density(doc) for doc in docs] for kind, docs in corpus.items()}
    assert all(len(scores) >= 15 for scores in density.values()), {k: len(v) for k, v in density.items()}
    prose = statistics.median(density["licences"] + density["handbook"])
    code = statistics.median(density["source code"])
    assert code >= prose + 0.25, f"source code {code:.3f}, narrative prose {prose:.3f}"
    deciles = statistics.quantiles([d for scores in density.values() for d in scores], n=10)
    assert deciles[-1] - deciles[0] >= 0.4, f"10th-90th percentile {deciles[0]:.3f}-{deciles[-1]:.3f}"


@given(st.lists(st.sampled_from(["1", "23", ".", "..", "a", " ", "v", "\n", "٣"]), max_size=30).map("".join))
def test_decimals_are_the_dots_between_two_digits(text: str) -> None:
    """A decimal is a dot with an ASCII digit on each side (the pattern looks at the one after first)."""
    digit = "0123456789".__contains__
    expected = sum(text[i] == "." and digit(text[i - 1]) and digit(text[i + 1]) for i in range(1, len(text) - 1))
    assert len(_DECIMAL.findall(text)) == expected
