"""Known-item questions for the retrieval benchmark, derived mechanically from the structure of real documents.

The documents are Debian's, written by no one here: the Python manual's reStructuredText sources
(python3-doc) and the chapters of the Debian Administrator's Handbook in English and Arabic
(debian-handbook). A *section* is a heading and the text under it up to the next heading of any level.

A question is a section's heading (numbering and rST markup removed) and its gold answer is the
character span of the section's own body in the document text: from after the heading (and its rST
underline) to the next heading, trimmed of blank space. The heading itself stays in the document, as
in any real corpus, but is never part of the gold span. A section becomes a question only when:

- its body is 300 to 3,000 characters (shorter is a stub, longer no chunk size could cover at 1,000)
  and is not a table of contents (most of its lines a section number, as on a handbook chapter's page);
- the heading has at least two words and is unique among the headings of its corpus (a known item);
- the heading, as a phrase (case and spacing ignored), does not occur in its own body, so the gold
  text cannot be found by the query's words alone.

Documents and questions are sampled with a seed, so a run is repeatable.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.corpus import _python_doc_sources, _TextExtractor

HANDBOOK = Path("/usr/share/doc/debian-handbook/html")
MIN_GOLD, MAX_GOLD = 300, 3000
_RST_UNDERLINE = re.compile(r"""^([=\-~^"'`#*+<>:._])\1{2,}\s*$""")
_RST_ROLE = re.compile(r":[\w:+-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
_NUMBERING = re.compile(r"^(?:chapter\s+)?[\d.]+\s+|^(?:الفصل|فصل)\s+[\d.]+\s+", re.IGNORECASE)
_SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.?\s")
_WORD = re.compile(r"\w\w+")


@dataclass(frozen=True)
class Section:
    """A heading, where it stands, and the character span of the body under it."""

    title: str
    heading_start: int
    body_start: int
    body_end: int


@dataclass(frozen=True)
class Doc:
    """One document of a retrieval corpus: its name, its text and its sections."""

    name: str
    text: str
    sections: tuple[Section, ...]


@dataclass(frozen=True)
class Question:
    """A query and its gold answer: characters ``[start, end)`` of document ``doc`` of its corpus."""

    query: str
    doc: int
    start: int
    end: int


@dataclass(frozen=True)
class RetrievalCorpus:
    """The documents retrieval searches (gold documents and distractors) and the questions asked of them."""

    name: str
    origin: str
    docs: list[Doc]
    questions: list[Question]
    candidates: int  # questions that passed the rules, before sampling


# ---------------------------------------------------------------- sections of a document


def _closed(text: str, starts: list[tuple[str, int, int]]) -> tuple[Section, ...]:
    """Sections from (title, heading start, body start): each body runs to the next heading, trimmed."""
    sections = []
    for index, (title, heading, body) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else len(text)
        chunk = text[body:end]
        start = body + len(chunk) - len(chunk.lstrip())
        sections.append(Section(title, heading, start, max(start, body + len(chunk.rstrip()))))
    return tuple(sections)


def rst_sections(text: str) -> tuple[Section, ...]:
    """The sections of a reStructuredText document: a title line underlined (and maybe overlined) by
    a run of one punctuation character at least as long as the title."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    starts: list[tuple[str, int, int]] = []
    for i in range(len(lines) - 1):
        title, under = lines[i].rstrip(), lines[i + 1].rstrip()
        if not title or title[0].isspace() or _RST_UNDERLINE.match(title) or not _RST_UNDERLINE.match(under):
            continue
        if len(under) < len(title):
            continue
        overlined = i > 0 and lines[i - 1].rstrip() == under
        heading = offsets[i - 1] if overlined else offsets[i]
        starts.append((clean_title(_RST_ROLE.sub(r"\1", title)), heading, offsets[i + 2]))
    return _closed(text, starts)


class _HeadingMarker(_TextExtractor):
    """The corpus's HTML-to-text extractor, with each <h1>-<h6> wrapped in marker characters."""

    OPEN, CLOSE = "\x02", "\x03"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        super().handle_starttag(tag, attrs)
        if re.fullmatch(r"h[1-6]", tag):
            self._parts.append(self.OPEN)

    def handle_endtag(self, tag: str) -> None:
        if re.fullmatch(r"h[1-6]", tag):
            self._parts.append(self.CLOSE)
        super().handle_endtag(tag)


def html_document(html: str) -> tuple[str, tuple[Section, ...]]:
    """Plain text of an HTML page (as corpus.html_to_text makes it) and its sections, from its <hN> headings."""
    parser = _HeadingMarker()
    parser.feed(html)
    parser.close()
    marked = parser.text()
    out: list[str] = []
    starts: list[tuple[str, int, int]] = []
    length = cursor = 0
    for found in re.finditer(f"{parser.OPEN}([^{parser.CLOSE}]*){parser.CLOSE}", marked):
        out.append(marked[cursor : found.start()])
        length += found.start() - cursor
        heading = found.group(1)
        out.append(heading)
        starts.append((clean_title(heading), length, length + len(heading)))
        length += len(heading)
        cursor = found.end()
    out.append(marked[cursor:])
    text = "".join(out)
    return text, _closed(text, starts)


def clean_title(title: str) -> str:
    """A heading as a query: its numbering, emphasis marks and stray spaces removed."""
    title = re.sub(r"\s+", " ", title.replace("``", "").replace("*", "")).strip()
    return _NUMBERING.sub("", title.strip("\u200e\u200f ")).strip(" .:\u200e\u200f")


# ---------------------------------------------------------------- questions


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def _is_contents(body: str) -> bool:
    """Whether most non-blank lines of a body start with a section number: a table of contents."""
    lines = [line for line in body.splitlines() if line.strip()]
    return sum(bool(_SECTION_NUMBER.match(line.lstrip("\u200e\u200f"))) for line in lines) * 2 > len(lines)


def candidate_questions(docs: list[Doc]) -> list[Question]:
    """Every section that passes the rules of the module docstring, in document order."""
    counts = Counter(_squeezed(s.title) for d in docs for s in d.sections)
    found = []
    for index, doc in enumerate(docs):
        for s in doc.sections:
            query = _squeezed(s.title)
            if not MIN_GOLD <= s.body_end - s.body_start <= MAX_GOLD or counts[query] > 1:
                continue
            body = doc.text[s.body_start : s.body_end]
            if len(_WORD.findall(query)) < 2 or query in _squeezed(body) or _is_contents(body):
                continue
            found.append(Question(s.title, index, s.body_start, s.body_end))
    return found


def sample_docs(docs: list[Doc], max_chars: int, seed: int) -> list[Doc]:
    """Whole documents in a seeded random order up to ``max_chars``, kept in their original order."""
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    picked, total = [], 0
    for i in order:
        if total >= max_chars:
            break
        picked.append(i)
        total += len(docs[i].text)
    return [docs[i] for i in sorted(picked)]


def build(name: str, origin: str, docs: list[Doc], max_chars: int, questions: int, seed: int) -> RetrievalCorpus:
    """A retrieval corpus: seeded documents up to ``max_chars`` and up to ``questions`` seeded questions on them."""
    kept = sample_docs(docs, max_chars, seed)
    candidates = candidate_questions(kept)
    picked = random.Random(seed).sample(candidates, min(questions, len(candidates)))
    return RetrievalCorpus(name, origin, kept, sorted(picked, key=lambda q: (q.doc, q.start)), len(candidates))


def python_manual() -> list[Doc]:
    """The newest installed Python manual's rST sources (python3-doc)."""
    docs = []
    for path in _python_doc_sources():
        text = path.read_text(encoding="utf-8")
        docs.append(Doc(path.name, text, rst_sections(text)))
    return docs


def handbook(language: str) -> list[Doc]:
    """The pages of the Debian Administrator's Handbook in one language (``en-US``, ``ar-MA``): a chapter's
    page holds its table of contents and first section, a ``sect.*`` page each further section."""
    docs = []
    for path in sorted((HANDBOOK / language).glob("*.html")):
        if path.name == "index.html":  # the book's table of contents
            continue
        text, sections = html_document(path.read_text(encoding="utf-8"))
        docs.append(Doc(path.name, text, sections))
    return docs


SOURCES = {
    "python-docs": ("the Python manual's rST sources, Debian package python3-doc", python_manual),
    "handbook-en": ("Debian Administrator's Handbook en-US pages, package debian-handbook", lambda: handbook("en-US")),
    "handbook-ar": ("Debian Administrator's Handbook ar-MA pages, package debian-handbook", lambda: handbook("ar-MA")),
}


def load_all(max_chars: int, questions: int, seed: int) -> Iterator[RetrievalCorpus]:
    """Every source whose package is installed, as a retrieval corpus; a missing one is skipped."""
    for name, (origin, read) in SOURCES.items():
        docs = [d for d in read() if d.text.strip()]
        if docs:
            yield build(name, origin, docs, max_chars, questions, seed)
