"""The elements that flow between the pipeline's transforms."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, replace

from pipelines.redact import bounded

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


def content_hash(text: str) -> str:
    """The hash of a text: equal hashes, equal text (``surrogatepass``: any str hashes)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def content_id(text: str) -> str:
    """The id of a document that has none: named by its text, so it keeps its id wherever its line or row
    moves and on every run (equal texts share it, as duplicate ids do)."""
    return "text-" + content_hash(text)


@dataclass(frozen=True)
class SourceRecord:
    """One input record whose text was read: a JSONL line, a Parquet row or a whole text file.

    ``record`` is the 1-based line or row number, or 0 for a whole-file document; ``title`` the record's
    title field (``input.title_field``), when it has one.
    """

    source: str
    record: int
    doc_id: str
    text: str
    title: str | None = None

    def digest(self) -> str:
        """What an incremental run compares: the text's hash, and with a title the title's too (a new title
        is a new ``embed_text``, so the document's chunks are made again)."""
        if self.title is None:
            return content_hash(self.text)
        return content_hash(f"{len(self.title)}:{self.title}{self.text}")


@dataclass(frozen=True)
class Reject:
    """An input record (or file) that yields no chunk, with the reason why.

    ``count`` is how many records the row stands for: 1, or for the summary row of a flood (see
    :class:`RejectLimit`) the rejects of its reason past the limit, so the manifest still counts each record.
    """

    source: str
    record: int
    doc_id: str
    reason: str
    message: str
    excerpt: str
    count: int = 1

    def __post_init__(self) -> None:
        if self.reason not in REJECT_REASONS:
            raise ValueError(f"unknown reject reason {self.reason!r}")


class RejectLimit:
    """Keeps the first ``limit`` rejects of each source and reason; the rest are only counted, and come out
    as one summary row per source and reason (:meth:`summaries`).

    A million bad lines in a small file would otherwise be a million rows held and written: memory here is
    one counter and one example per source and reason, whatever the flood. ``None``: no limit.
    """

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._kept: dict[tuple[str, str], int] = {}
        self._over: dict[tuple[str, str], tuple[Reject, int, int, int]] = {}  # first left out, records from, to, count

    def admit(self, reject: Reject) -> bool:
        """Whether ``reject`` is kept as its own row; if not, it is counted into its summary."""
        key = (reject.source, reject.reason)
        kept = self._kept.get(key, 0)
        if self._limit is None or kept < self._limit:
            self._kept[key] = kept + 1
            return True
        first, low, high, count = self._over.get(key, (reject, reject.record, reject.record, 0))
        self._over[key] = (first, min(low, reject.record), max(high, reject.record), count + reject.count)
        return False

    def summaries(self) -> list[Reject]:
        """One row per source and reason that went past the limit, carrying the count left out; then resets."""
        rows = [
            replace(
                first,
                message=bounded(
                    f"{count:,} more {reason} rejects, records {low} to {high}, past the first {self._limit}"
                    f" kept (input.max_reject_rows); the first of them: {first.message}"
                ),
                count=count,
            )
            for (_, reason), (first, low, high, count) in self._over.items()
        ]
        self._kept, self._over = {}, {}
        return rows


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
    (``pipelines.input.expand.file_stamp``, empty when it gave none)."""

    source: str
    bytes_read: int
    records: int
    error: str = ""
    stamp: str = ""


# Python's str can hold lone surrogates (a JSON "\ud800" escape, a file name's undecodable bytes), which
# UTF-8, so Arrow and Beam's string coders, cannot encode: every string a record or reject carries passes here.


def lone_surrogate(text: str, what: str, escaped: bool = False) -> str | None:
    """Where ``text`` (the ``what`` of a record) holds a lone surrogate, as a reject message; None if nowhere.

    ``escaped``: the text was decoded with ``surrogateescape``, so U+DC80..U+DCFF stand for invalid bytes."""
    at = surrogate_at(text)
    if at is None:
        return None
    code = ord(text[at])
    if escaped and 0xDC80 <= code <= 0xDCFF:
        return f"invalid UTF-8 (byte 0x{code - 0xDC00:02X}) at character {at} of the {what}"
    return f"lone surrogate U+{code:04X} at character {at} of the {what}: not encodable as UTF-8"


def surrogate_at(text: str) -> int | None:
    """The index of the first lone surrogate in ``text``, or None."""
    found = None if text.isascii() else _SURROGATE.search(text)
    return None if found is None else found.start()


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (``encoding_errors: replace``)."""
    return _SURROGATE.sub("\ufffd", text)


def encodable(text: str) -> str:
    """``text`` as UTF-8 can hold it, lone surrogates spelled as ``\\udXXX`` escapes: for sources, ids and
    messages, which must reach Arrow and Beam whatever they echo."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
