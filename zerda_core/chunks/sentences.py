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
_END = re.compile(
    rf"[.!?…]*[؟۔][.!?؟۔…]*[{_CLOSERS}]*"  # a run holding an Arabic mark ends even when glued to the next word
    rf"|[.!?…]+[{_CLOSERS}]*(?=\s|\Z)"
)
_BLANK_LINE = re.compile(r"(?:\r\n|\r|\n)(?:[^\S\r\n]*(?:\r\n|\r|\n))+")
_NEXT_VISIBLE = re.compile(r"\s*(\S)")
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
    cuts = [m.end() for m in _END.finditer(text) if _ends_sentence(text, m.start(), m.end())]
    cuts.extend(m.start() for m in _BLANK_LINE.finditer(text))
    cuts.sort()
    cuts.append(len(text))
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in cuts:
        if cut <= start:
            continue
        span = _trim(text, start, cut)
        if span is not None:
            spans.append(span)
        start = cut
    return spans


def _ends_sentence(text: str, start: int, end: int) -> bool:
    """Whether the mark run at ``text[start:end]`` really ends a sentence."""
    if text[start] != "." or "!" in text[start:end] or "?" in text[start:end]:
        return True
    visible = _NEXT_VISIBLE.match(text, end)
    if visible is not None and visible.group(1).islower():
        return False
    if text.startswith("..", start):
        return True
    word = text[max(0, start - 12) : start].rsplit(None, 1)[-1:]
    token = word[0].lstrip(_OPENERS) if word else ""
    if not token:
        return True
    return not (token.lower() in ABBREVIATIONS or (len(token) == 1 and token.isalpha()) or _ACRONYM.fullmatch(token))


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Shrink ``[start, end)`` to its first and last non-whitespace characters."""
    first = _NON_SPACE.search(text, start, end)
    if first is None:
        return None
    last = end
    while text[last - 1].isspace():
        last -= 1
    return first.start(), last
