"""Sentence spans on English, Arabic, code and scraped text."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerda_core.chunks.sentences import (
    _BLANK_LINE,
    _CLOSER_RUN,
    _DOT_END,
    _MARK_ENDS,
    _MARKS,
    _blank_lines,
    _visible_end,
    sentence_spans,
)


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Wait... Really?! Yes.", ["Wait...", "Really?!", "Yes."]),
        # a run of marks is one end, whichever mark it starts with
        ("Really?.. Yes!!! No?!? Fine", ["Really?..", "Yes!!!", "No?!?", "Fine"]),
        ("Wait… Then go. Or…! Hm.… Ok", ["Wait…", "Then go.", "Or…!", "Hm.…", "Ok"]),
        ("See etc.. Next one", ["See etc..", "Next one"]),
        ("A list (etc.) Then more", ["A list (etc.) Then more"]),
        ("We met Dr.\n\nNext part", ["We met Dr.", "Next part"]),  # a blank line ends even an abbreviation
        ("It ends with etc.  ", ["It ends with etc."]),
        ("Pi is 3.14 today. Beam v2.77.0 works.", ["Pi is 3.14 today.", "Beam v2.77.0 works."]),
        ("See https://example.com/a.html?x=1 now. Done.", ["See https://example.com/a.html?x=1 now.", "Done."]),
        ("Dr. Smith met Mr. Jones, e.g. at noon. Then left.", ["Dr. Smith met Mr. Jones, e.g. at noon.", "Then left."]),
        ("J. K. Rowling wrote it. The U.S. Army read it.", ["J. K. Rowling wrote it.", "The U.S. Army read it."]),
        ('He said "stop." Then (quietly.) She left.', ['He said "stop."', "Then (quietly.)", "She left."]),
        ("It costs approx. five dollars. Cheap.", ["It costs approx. five dollars.", "Cheap."]),
        ("Title\n\nBody line one\nline two.\r\n\r\nNext", ["Title", "Body line one\nline two.", "Next"]),
        ("Lone\r\rCR ends", ["Lone", "CR ends"]),
        ("x = obj.method(a.b)\ny = 1.5", ["x = obj.method(a.b)\ny = 1.5"]),
    ],
)
def test_english_and_code(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("كيف حالك؟ أنا بخير.", ["كيف حالك؟", "أنا بخير."]),
        ("كيف حالك؟أنا بخير", ["كيف حالك؟", "أنا بخير"]),
        ("حقاً؟! نعم.", ["حقاً؟!", "نعم."]),
        ("انتهى الدرس۔ بدأ غيره", ["انتهى الدرس۔", "بدأ غيره"]),
        ("قال د. أحمد إن الجو جميل، ثم ذهب؛ وعاد.", ["قال د. أحمد إن الجو جميل، ثم ذهب؛ وعاد."]),
        ("«هل جئت؟» قالت.", ["«هل جئت؟»", "قالت."]),
    ],
)
def test_arabic(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\n\n", "\u200f\u200e"])
def test_blank_text_has_no_visible_sentence(text: str) -> None:
    assert all(text[a:b].strip() for a, b in sentence_spans(text))
    if not text.strip():
        assert sentence_spans(text) == []


def test_spans_are_ordered_disjoint_and_cover_every_visible_character() -> None:
    text = "  A first one.  And a second!\n\nمرحبا؟نعم  "
    spans = sentence_spans(text)
    assert spans == sorted(spans)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start and not text[end:start].strip()
    visible = {i for i, ch in enumerate(text) if not ch.isspace()}
    assert visible <= {i for a, b in spans for i in range(a, b)}


BLANK_LINE_PIECES = ["word", "x.", "\n", "\n\n", " \n", "\t", " ", "\u00a0\n", "\u2028", "\u3000\n\n", "ب.", "؟"]


@given(st.lists(st.sampled_from(BLANK_LINE_PIECES), max_size=40).map("".join))
def test_blank_lines_by_the_simpler_patterns_are_the_general_patterns(text: str) -> None:
    """Text with no carriage return is searched for runs of line feeds (or, when a space precedes a line feed,
    for line feeds with spaces between): the blank lines are those the general pattern finds."""
    assert _blank_lines(text) == [_visible_end(text, m.start()) for m in _BLANK_LINE.finditer(text)]


# The Latin ends as plain backtracking runs with two lookaheads: what the possessive patterns must find
_PLAIN_END = rf"[{_MARKS}]*{_CLOSER_RUN}(?=\s|\Z)(?!\s*[a-z])"
END_PIECES = ["word", "Up", "a", "3", ".", "..", "!", "?", "…", '"', "'", "”", ")", "]", " ", "\n", "\t", "\u00a0"]


@given(st.lists(st.sampled_from(END_PIECES), max_size=30).map("".join))
def test_possessive_end_patterns_find_the_ends_backtracking_ones_do(text: str) -> None:
    """The dot and mark patterns never give back a mark, a closer or a space (possessive runs on Python 3.11+, one
    lookahead for two): they end where the plain patterns do, before a lowercase word after spaces or not."""
    for mark, pattern in [(".", _DOT_END), *((m, _MARK_ENDS[m]) for m in "!?…")]:
        plain = re.compile(re.escape(mark) + _PLAIN_END)
        assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in plain.finditer(text)], mark
