"""Sentence spans for English and Arabic text, as ``(start, end)`` offsets.

Spans never include the whitespace between sentences, so slicing the text with
them is exact and only whitespace lies outside them. A sentence ends at a run of
``. ! ? … ؟ ۔`` (``...``, ``?!``, ``؟!`` are one end) followed by whitespace, or at
``؟``/``۔`` even with no space after (scraped Arabic often has none), or at a
blank line. Closing quotes and brackets stay with their sentence. A dot does not
end a sentence inside decimals, versions, URLs or code (no space follows), after
a known abbreviation, an initial or a dotted acronym, or before a lowercase word.
``،`` and ``؛`` are clause marks, never ends.
"""

from __future__ import annotations

import re

_CLOSERS = "\"'”’»)\\]}"
_MARKS = ".!?…"
_LATIN_END = rf"[{_MARKS}]*[{_CLOSERS}]*(?=\s|\Z)(?!\s*[a-z])"  # not before "five" in "approx. five"
_ARABIC_END = rf"[.!?؟۔…]*[{_CLOSERS}]*"  # ends even when glued to the next word
# One pattern per leading mark, not one character set: the regex engine scans for a literal first
# character several times faster. A run such as "?!" is found from each of its marks, with one end.
_DOT_END = re.compile(r"\." + _LATIN_END)
_ASCII_ENDS = [re.compile(re.escape(mark) + _LATIN_END) for mark in "!?"]
_NON_ASCII_ENDS = [re.compile("…" + _LATIN_END), *(re.compile(mark + _ARABIC_END) for mark in "؟۔")]
_BLANK_LINE = re.compile(r"(?:\r\n|\r|\n)(?:[^\S\r\n]*(?:\r\n|\r|\n))+")
_BLANK_LF_LINE = re.compile(r"\n(?:[^\S\n]*\n)+")  # the same, faster, for text without carriage returns
_NON_SPACE = re.compile(r"\S")
_ACRONYM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_OPENERS = "\"'“‘«([{"

ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al approx fig figs eq eqs no nos vol vols pp ch sec
    dept est inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
    ph.d u.s u.k a.m p.m gen col lt sgt capt rev hon
    د أ م ص ج ق هـ ت س أ.د
    """.split()
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentence spans; every non-whitespace character lies in one span."""
    cuts = [
        m.end()
        for m in _DOT_END.finditer(text)
        # after a word of 7+ letters (most ends) no abbreviation is possible: skip the slower check
        if (m.start() >= 7 and text[m.start() - 7 : m.start()].isalpha()) or not _after_abbreviation(text, m.start())
    ]
    for pattern in _ASCII_ENDS if text.isascii() else _ASCII_ENDS + _NON_ASCII_ENDS:
        cuts.extend([m.end() for m in pattern.finditer(text)])
    blank_line = _BLANK_LINE if "\r" in text else _BLANK_LF_LINE
    cuts.extend([m.start() for m in blank_line.finditer(text)])
    cuts.sort()
    cuts.append(len(text))
    spans: list[tuple[int, int]] = []
    start = 0
    search_visible = _NON_SPACE.search
    for cut in cuts:
        if cut <= start:
            continue
        first = search_visible(text, start, cut)  # spans hold no leading or trailing whitespace
        if first is not None:
            end = cut
            while text[end - 1].isspace():
                end -= 1
            spans.append((first.start(), end))
        start = cut
    return spans


def _after_abbreviation(text: str, start: int) -> bool:
    """Whether the dot at ``start`` is the single dot of an abbreviation, an initial or an acronym."""
    if text[start + 1 : start + 2] in _MARKS or not text[start - 1 : start].isalpha():
        return False
    words = text[max(0, start - 12) : start].rsplit(None, 1)
    token = words[-1].lstrip(_OPENERS) if words else ""
    return token.lower() in ABBREVIATIONS or len(token) == 1 or _ACRONYM.fullmatch(token) is not None
