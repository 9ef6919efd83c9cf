"""The elements that flow between the pipeline's transforms."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

REJECT_REASONS = (
    "empty",
    "below_min_chunk_size",
    "invalid_json",
    "invalid_utf8",
    "missing_text",
    "not_text",
    "too_large",
    "unreadable_file",
    "chunker_error",
)
EXCERPT_CHARS = 200
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class SourceRecord:
    """One input record whose text was read: a JSONL line, a Parquet row or a whole text file.

    ``record`` is the 1-based line or row number, or 0 for a whole-file document.
    """

    source: str
    record: int
    doc_id: str
    text: str


@dataclass(frozen=True)
class Reject:
    """An input record (or file) that yields no chunk, with the reason why."""

    source: str
    record: int
    doc_id: str
    reason: str
    message: str
    excerpt: str

    def __post_init__(self) -> None:
        if self.reason not in REJECT_REASONS:
            raise ValueError(f"unknown reject reason {self.reason!r}")


def excerpt(value: object) -> str:
    """A bounded, printable excerpt of bad input, safe to store in the rejects."""
    text = value if isinstance(value, str) else repr(value)
    return text[:EXCERPT_CHARS]


def nothing_visible(text: str) -> str | None:
    """Why ``text`` holds nothing to read or embed, as a reject message; None when it holds a visible character.

    Whitespace and format characters (Unicode ``Cf``: zero-width space and joiners, word joiner, U+FEFF,
    bidi marks, soft hyphen) only: such a text would be chunked into invisible chunks. Stops at the first
    visible character, so an ordinary text costs a character or two.
    """
    if not text.strip():
        return "document is empty or whitespace only"
    if not all(c.isspace() or unicodedata.category(c) == "Cf" for c in text):
        return None
    invisible = sorted({f"U+{ord(c):04X}" for c in text if not c.isspace()})
    shown = ", ".join(invisible[:3]) + (", ..." if len(invisible) > 3 else "")
    return f"document holds only whitespace and invisible characters ({shown})"


@dataclass(frozen=True)
class FileReport:
    """What reading one input file gave: for the manifest's ``inputs``; ``stamp`` is the listing's
    (``pipelines.io.expand.file_stamp``, empty when it gave none)."""

    source: str
    bytes_read: int
    records: int
    error: str = ""
    stamp: str = ""


# Python's str can hold lone surrogates (a JSON "\ud800" escape, a file name's undecodable bytes), which
# UTF-8, so Arrow and Beam's string coders, cannot encode: every string a record or reject carries passes here.


def lone_surrogate(text: str, what: str) -> str | None:
    """Where ``text`` (the ``what`` of a record) holds a lone surrogate, as a reject message; None if nowhere."""
    found = None if text.isascii() else _SURROGATE.search(text)
    if found is None:
        return None
    return (
        f"lone surrogate U+{ord(found.group()):04X} at character {found.start()} of the {what}: not encodable as UTF-8"
    )


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (``encoding_errors: replace``)."""
    return _SURROGATE.sub("\ufffd", text)


def encodable(text: str) -> str:
    """``text`` as UTF-8 can hold it, lone surrogates spelled as ``\\udXXX`` escapes: for sources, ids and
    messages, which must reach Arrow and Beam whatever they echo."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
