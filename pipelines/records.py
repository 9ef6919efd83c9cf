"""The elements that flow between the pipeline's transforms."""

from __future__ import annotations

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


@dataclass(frozen=True)
class FileReport:
    """What reading one input file gave: for the manifest's ``inputs``."""

    source: str
    bytes_read: int
    records: int
    error: str = ""
