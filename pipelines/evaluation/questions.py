"""The user's questions (JSON Lines) and their gold answers as character spans of the corpus's documents.

A line is an object with ``question`` and its gold answer, given one of three ways:

- ``doc_id`` with ``start`` and ``end``: one span, characters ``[start, end)`` of that document's text;
- ``spans``: a list of ``{"doc_id", "start", "end"}`` objects, several spans (their union is the answer);
- ``answer``: a text zerda finds in the document ``doc_id`` names (or, without ``doc_id``, in the one
  document of the corpus that holds it): as written first, then with every run of white space read as
  one space. Its first occurrence is the gold span.

A line whose answer cannot be located (no such document, text not found, found in several documents,
a span outside its document) is kept out of the scores and reported with the reason; nothing is guessed.
A line that is not a question at all (bad JSON, a missing ``question``) is an error for the whole file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.evaluation.metrics import Span

_SPACE = re.compile(r"\s+")


class QuestionsError(ValueError):
    """A questions file that cannot be read as questions: a usage error (exit code 2)."""


@dataclass(frozen=True)
class Question:
    """A query and its gold answer: spans of the documents of the pool (documents by index)."""

    query: str
    gold: tuple[Span, ...]


@dataclass(frozen=True)
class Unlocated:
    """A question whose gold answer could not be placed in the corpus, and why."""

    line: int
    query: str
    reason: str


def _normalised(text: str) -> tuple[str, list[int]]:
    """``text`` with each run of white space as one space, and for every character of it its offset in ``text``."""
    out: list[str] = []
    where: list[int] = []
    for match in re.finditer(r"\s+|\S+", text):
        if match.group()[0].isspace():
            out.append(" ")
            where.append(match.start())
        else:
            out.append(match.group())
            where.extend(range(match.start(), match.end()))
    return "".join(out), where


def locate(text: str, answer: str) -> tuple[int, int] | None:
    """Where ``answer`` stands in ``text``: as written, else white space normalised; None when it is not there."""
    at = text.find(answer)
    if at >= 0 and answer:
        return at, at + len(answer)
    wanted = _SPACE.sub(" ", answer).strip()
    if not wanted:
        return None
    flat, where = _normalised(text)
    at = flat.find(wanted)
    if at < 0:
        return None
    last = at + len(wanted) - 1  # the answer ends on a non-space, which stands for one character of text
    return where[at], where[last] + 1


def _span(item: Mapping[str, Any], index: Mapping[str, int], texts: Sequence[str]) -> Span | str:
    """One ``{doc_id, start, end}`` as a span, or why it cannot be one."""
    doc_id, start, end = item.get("doc_id"), item.get("start"), item.get("end")
    if not isinstance(doc_id, str) or doc_id not in index:
        return f"no document with doc_id {doc_id!r} in the corpus"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        return "start and end must be integers"
    assert isinstance(start, int) and isinstance(end, int)
    doc = index[doc_id]
    if not 0 <= start < end <= len(texts[doc]):
        return f"span [{start}, {end}) is not inside document {doc_id!r} ({len(texts[doc])} characters)"
    return Span(doc, start, end)


def _gold(entry: Mapping[str, Any], ids: Sequence[str], texts: Sequence[str]) -> tuple[Span, ...] | str:
    """The gold spans of one question, or why they cannot be placed."""
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    if "spans" in entry:
        if not isinstance(entry["spans"], list) or not entry["spans"]:
            return "spans must be a non-empty list of {doc_id, start, end}"
        spans = []
        for item in entry["spans"]:
            got = _span(item, index, texts) if isinstance(item, Mapping) else "each span must be an object"
            if isinstance(got, str):
                return got
            spans.append(got)
        return tuple(spans)
    if "answer" in entry:
        answer = entry["answer"]
        if not isinstance(answer, str) or not answer.strip():
            return "answer must be a non-empty string"
        doc_id = entry.get("doc_id")
        if doc_id is not None and doc_id not in index:
            return f"no document with doc_id {doc_id!r} in the corpus"
        candidates = [index[doc_id]] if doc_id is not None else range(len(texts))
        found = [(doc, at) for doc in candidates if (at := locate(texts[doc], answer)) is not None]
        if not found:
            return "answer text not found" + (f" in document {doc_id!r}" if doc_id is not None else " in the corpus")
        if len(found) > 1:
            return f"answer text found in {len(found)} documents: name one with doc_id"
        doc, (start, end) = found[0]
        return (Span(doc, start, end),)
    if "start" in entry or "end" in entry:
        got = _span(entry, index, texts)
        return got if isinstance(got, str) else (got,)
    return "no gold answer: give doc_id with start and end, spans, or answer"


@dataclass(frozen=True)
class Entry:
    """One question line as read, before its answer is placed in the corpus."""

    line: int
    query: str
    fields: dict[str, Any]


def parse_questions(lines: Sequence[str]) -> list[Entry]:
    """Every question line; raises QuestionsError for a line that is not a question (checked before the corpus
    is read, so a broken file fails at once)."""
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except ValueError as err:
            raise QuestionsError(f"line {number}: not JSON: {err}") from None
        if not isinstance(fields, dict):
            raise QuestionsError(f"line {number}: a question must be a JSON object")
        query = fields.get("question")
        if not isinstance(query, str) or not query.strip():
            raise QuestionsError(f'line {number}: no question (a non-empty string under "question")')
        entries.append(Entry(number, query, fields))
    if not entries:
        raise QuestionsError("the file holds no question")
    return entries


def place(entries: Sequence[Entry], ids: Sequence[str], texts: Sequence[str]) -> tuple[list[Question], list[Unlocated]]:
    """Questions whose gold answers are placed in the documents (``ids[i]`` names ``texts[i]``), and those
    that could not be."""
    questions: list[Question] = []
    unlocated: list[Unlocated] = []
    for entry in entries:
        gold = _gold(entry.fields, ids, texts)
        if isinstance(gold, str):
            unlocated.append(Unlocated(entry.line, entry.query, gold))
        else:
            questions.append(Question(entry.query, gold))
    return questions, unlocated


def load_questions(
    lines: Sequence[str], ids: Sequence[str], texts: Sequence[str]
) -> tuple[list[Question], list[Unlocated]]:
    """:func:`parse_questions`, then :func:`place`."""
    return place(parse_questions(lines), ids, texts)
