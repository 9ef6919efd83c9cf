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
import sys
from bisect import bisect_left, bisect_right

_CLOSERS = "\"'”’»)]}"
_CLOSER_RUN = f"[{re.escape(_CLOSERS)}]*"
_MARKS = ".!?…"
_DOT_OR_CLOSER = "." + _CLOSERS
# Then whitespace or the end, and not "five" as in "approx. five". Giving back a mark, a closer or a space could never
# match, so the runs are possessive (Python 3.11+; on 3.10 plain runs find the same ends): no backtracking, the dot ends
# a fifth faster on the handbook's pages.
_POSSESSIVE = "+" if sys.version_info >= (3, 11) else ""
_LATIN_END = rf"[{_MARKS}]*{_POSSESSIVE}{_CLOSER_RUN}{_POSSESSIVE}(?!\S|\s*{_POSSESSIVE}[a-z])"
_ARABIC_END = rf"[.!?؟۔…]*{_CLOSER_RUN}"  # ends even when glued to the next word
# One pattern per leading mark, not one character set: the regex engine scans for a literal first
# character several times faster. A run such as "?!" is found from each of its marks, with one end.
# A mark missing from a text costs one `find`, not a scan (most documents lack most marks).
_DOT_END = re.compile(r"\." + _LATIN_END)
_MARK_ENDS = {mark: re.compile(re.escape(mark) + _LATIN_END) for mark in "!?…"}
_MARK_ENDS.update({mark: re.compile(mark + _ARABIC_END) for mark in "؟۔"})
_BLANK_LINE = re.compile(r"(?:\r\n|\r|\n)(?:[^\S\r\n]*(?:\r\n|\r|\n))+")
_BLANK_LF_LINE = re.compile(r"\n(?:[^\S\n]*\n)+")  # the same, faster, for text without carriage returns
_SPACE_BEFORE_LF = re.compile(r"\n(?<=[^\S\n]\n)")
_LF_RUN = re.compile(r"\n\n+")  # the same again, twice as fast, for text with no whitespace before a line feed
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
    ends = SentenceEnds(text)
    spans: list[tuple[int, int]] = []
    start, end = ends.next_sentence(0)
    while start < len(text):
        spans.append((start, end))
        start, end = ends.next_sentence(end)
    return spans


class SentenceEnds:
    """The sentence ends of one text, as offsets just past each sentence's last visible character.

    The regex scan finds every possible end up front; whether a lone dot after a
    word closes an abbreviation is checked only for the ends a caller asks about.
    A chunker asks about the few ends near its chunk borders, so most dots never
    pay for that check.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        ends = [m.end() for m in _DOT_END.finditer(text)]
        for mark, pattern in _MARK_ENDS.items():
            first = text.find(mark)
            if first != -1:  # the scan starts at the mark's first place (no pattern looks behind its mark)
                ends.extend([m.end() for m in pattern.finditer(text, first)])
        blank_lines = _blank_lines(text)
        ends.extend(blank_lines)
        self.paragraph_ends = blank_lines  # the ends before a blank line, in order
        self.last = _visible_end(text, len(text))
        ends.append(self.last)
        ends.sort()
        self.ends = ends
        # is_end's answers for the ends after a dot or a closer; an end before a blank line is one whatever
        # precedes it, known from the start (the commonest end a chunker asks about: a paragraph's last)
        self._known = dict.fromkeys(blank_lines, True)

    def restructure(self, extra: list[int], keep_whole: list[tuple[int, int]]) -> None:
        """Add the ends in ``extra``; drop every end strictly inside one of the ``keep_whole`` spans.

        A chunker makes a heading start a sentence and a fenced code block one sentence this way.
        """
        self.ends = drop_inside(merge_sorted(self.ends, extra), keep_whole)

    def next_sentence(self, end: int) -> tuple[int, int]:
        """The start and end of the sentence after ``end``: its first visible character at or after ``end``, and the
        first end after that; the text's length twice when only whitespace follows.

        One call where a chunker asks for both at every chunk.
        """
        text = self.text
        found = _NON_SPACE.search(text, end)
        if found is None:
            return len(text), len(text)
        start = found.start()
        ends, known = self.ends, self._known
        i = bisect_right(ends, start)
        while not (known.get(ends[i]) or self.is_end(ends[i])):  # a remembered answer without a call
            i += 1
        return start, ends[i]

    def last_within(self, limit: int) -> int:
        """The last end at or before ``limit``; there must be one after the text's first visible character."""
        ends, known = self.ends, self._known
        i = bisect_right(ends, limit) - 1
        while not (known.get(ends[i]) or self.is_end(ends[i])):
            i -= 1
        return ends[i]

    def first_start_within(self, low: int, high: int) -> int | None:
        """The first sentence start in ``[low, high)`` that is also a word start (whitespace before it), else None.

        Asked at every chunk: conditionals rather than max(), and each start searched for within ``high`` only.
        """
        ends, text, known = self.ends, self.text, self._known
        i = bisect_right(ends, low) - 1  # the end before ``low`` may start a sentence at or after it
        if i < 0:
            i = 0
        count = len(ends)
        while i < count and ends[i] < high:
            if known.get(ends[i]) or self.is_end(ends[i]):
                found = _NON_SPACE.search(text, ends[i], high)
                if found is not None:
                    start = found.start()
                    if start >= low and text[start - 1].isspace():
                        return start
            i += 1
        return None

    def is_end(self, end: int) -> bool:
        """Whether a possible end is one: not the dot of an abbreviation, unless a blank line follows."""
        known = self._known.get(end)  # a chunker asks again about the ends it stepped over
        if known is not None:
            return known
        text = self.text
        mark = end - 1
        if text[mark] not in _DOT_OR_CLOSER:  # most ends: no dot to doubt
            return True
        while mark > 0 and text[mark] in _CLOSERS:
            mark -= 1
        known = text[mark] != "." or not _after_abbreviation(text, mark) or end == self.last
        self._known[end] = known
        return known


def _blank_lines(text: str) -> list[int]:
    """The visible ends before each blank line (a run of whitespace holding two or more line breaks), in order.

    By regex, one match per blank line, the simplest pattern the text allows. Worked out in numpy from the
    density's scan instead, they cost more within a chunk() call (a pass over the code points, 4 bytes a character
    of Arabic text, and a dozen numpy calls) on the Arabic handbook, and the same on the Python manual.
    """
    if "\r" in text:
        return [_visible_end(text, m.start()) for m in _BLANK_LINE.finditer(text)]
    if _SPACE_BEFORE_LF.search(text):
        return [_visible_end(text, m.start()) for m in _BLANK_LF_LINE.finditer(text)]
    return [m.start() for m in _LF_RUN.finditer(text)]


def merge_sorted(first: list[int], second: list[int]) -> list[int]:
    """Two sorted lists as one: sorting two sorted runs is a linear merge (a set would shuffle them).

    A position in both lists is kept twice: every lookup (``bisect``, ``drop_inside``) answers the same
    with a duplicate, and dropping them would cost a hash per position.
    """
    return sorted(first + second)


def drop_inside(positions: list[int], spans: list[tuple[int, int]]) -> list[int]:
    """``positions`` (sorted) without those strictly inside any of ``spans``."""
    for start, end in spans:
        positions[bisect_right(positions, start) : bisect_left(positions, end)] = []
    return positions


def _visible_end(text: str, end: int) -> int:
    """``end`` moved back over whitespace."""
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _after_abbreviation(text: str, start: int) -> bool:
    """Whether the dot at ``start`` is the single dot of an abbreviation, an initial or an acronym."""
    if not text[start - 1 : start].isalpha() or text[start + 1 : start + 2] in _MARKS:
        return False
    if start >= 7 and text[start - 7 : start].isalpha():  # no abbreviation is 7 letters long: skip the rest
        return False
    # a letter precedes the dot, so the last word before it is never empty
    token = text[start - 12 if start > 12 else 0 : start].rsplit(None, 1)[-1].lstrip(_OPENERS)
    return len(token) == 1 or token.lower() in ABBREVIATIONS or ("." in token and _ACRONYM.fullmatch(token) is not None)
