"""Markdown and reStructuredText structure the chunker cuts along: headings with their paths, fenced code.

- ATX headings (``# Title`` at the start of a line, levels 1-6 by the number of ``#``).
- Underlined titles (reStructuredText sections, Markdown setext): a line of text after a blank
  line (or the start), then a line of one punctuation mark repeated at least 3 times and at
  least as long as the title. Levels follow the order in which each mark first appears (the
  reStructuredText rule; Markdown's ``=`` then ``-`` give 1 then 2). An overline of the same
  mark belongs to the heading.
- Fenced code blocks: a line opening with 3+ backticks or tildes, closed by a line of the same
  mark at least as long. Indented headings and fences are not recognised (their scan would cost
  a regex step at every line). An unclosed fence is no block. Headings inside
  blocks are ignored.

A title in a heading path is cut to ``TITLE_CHARS`` characters (ending in "…"), so a chunk's path stays small.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from zerda_core.chunks.sentences import _visible_end

# Candidate lines, found by one regex with a literal first character, which the scan skips to quickly:
# a line opening with "#" and a space (ATX), or with three equal marks (a fence or an underline). The lookahead of
# either's first character turns most lines away in one test, before the alternatives are tried.
_CANDIDATE_AFTER_NEWLINE = re.compile(r"\n(?=[#=\-~^\"'`*+:.])(?:#{1,6}[ \t]|([=\-~^\"'`#*+:.])\1\1)")
# An ATX heading's marks; its title is the rest of the line less trailing spaces and marks (rstrip, where a lazy
# group before ``[ \t#]*$`` retried the tail at every character of the title)
_ATX_MARKS = re.compile(r"(#{1,6})[ \t]+")
_FENCE_LINE = re.compile(r"(`{3,}|~{3,})")
_FENCE_MARKS = ("```", "~~~")  # what a fence line starts with: a cheaper test than the regex
SEPARATOR = " > "
TITLE_CHARS = 200  # a title in a heading path: each chunk carries its path, so a huge heading is not copied whole


@dataclass
class Structure:
    """What one text's markup says: heading starts with their paths, fenced blocks, and good places to end."""

    heading_starts: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    fences: list[tuple[int, int]] = field(default_factory=list)  # (opening line start, closing line's visible end)
    breaks: list[int] = field(default_factory=list)  # visible ends before a heading or a fence, and fence ends

    def section_at(self, position: int) -> str:
        """The heading path in force at ``position`` (``""`` before the first heading)."""
        i = bisect_right(self.heading_starts, position) - 1
        return self.paths[i] if i >= 0 else ""

    def sections_at(self, positions: list[int]) -> list[str]:
        """``section_at`` of each of ``positions``."""
        heading_starts, paths = self.heading_starts, ["", *self.paths]
        return [paths[bisect_right(heading_starts, position)] for position in positions]


def find_structure(text: str) -> Structure:
    """Headings, heading paths and fenced blocks of ``text``; an empty ``Structure`` for plain text."""
    found = Structure()
    levels: dict[str, int] = {}  # underline mark -> level, in order of first appearance
    stack: list[tuple[int, str]] = []  # (level, title) of the open sections
    fence: tuple[int, str] | None = None  # the open fence's start and mark
    # ascending and distinct: a match holds no newline after its first character
    for line_start in [0, *(m.start() + 1 for m in _CANDIDATE_AFTER_NEWLINE.finditer(text))]:
        line_end = text.find("\n", line_start)
        if line_end == -1:
            line_end = len(text)
        raw = text[line_start:line_end]
        line = raw.strip()
        opening = _FENCE_LINE.match(raw) if raw.startswith(_FENCE_MARKS) else None  # most candidates are headings
        mark = opening.group() if opening else ""
        if fence is not None:
            if mark and line == mark[0] * len(line) and len(line) >= len(fence[1]) and line[0] == fence[1][0]:
                found.fences.append((fence[0], line_start + len(raw.rstrip())))
                found.breaks += [_visible_end(text, fence[0]), found.fences[-1][1]]
                fence = None
            continue
        if mark and not _underlines(text, line_start, line):
            if text.find("\n" + mark, line_end) != -1:  # a fence is a block only when it is closed
                fence = (line_start, mark)
            continue
        heading = _heading(text, line_start, line, levels)
        if heading is None:
            continue
        start, level, title = heading
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"))
        found.heading_starts.append(start)
        found.paths.append(SEPARATOR.join([t for _, t in stack]))
        if start > 0:
            found.breaks.append(_visible_end(text, start))
    found.breaks.sort()
    return found


def _heading(text: str, line_start: int, line: str, levels: dict[str, int]) -> tuple[int, int, str] | None:
    """(start, level, title) of the heading the line at ``line_start`` makes, or ``None``."""
    atx = _ATX_MARKS.match(line)
    if atx:
        title = line[atx.end() :].rstrip(" \t#")
        return (line_start, len(atx.group(1)), title) if title else None
    if not _underlines(text, line_start, line):
        return None
    title_start = text.rfind("\n", 0, line_start - 1) + 1
    title = text[title_start : line_start - 1].strip()
    start = title_start
    if title_start > 0:
        before = text.rfind("\n", 0, title_start - 1) + 1
        previous = text[before : title_start - 1].strip()
        if previous == line:  # an overline: the heading starts there
            start = before
        elif previous:
            return None  # a title follows a blank line
    level = levels.setdefault(line[0], len(levels) + 1)
    return start, level, title


def _underlines(text: str, line_start: int, line: str) -> bool:
    """Whether ``line`` (at ``line_start``) is one mark repeated, at least as long as a one-line title above it."""
    if len(line) < 3 or line != line[0] * len(line) or line[0].isalnum() or line_start == 0:
        return False
    title_start = text.rfind("\n", 0, line_start - 1) + 1
    title = text[title_start : line_start - 1].strip()
    return bool(title) and len(title) <= len(line) and title != title[0] * len(title)
