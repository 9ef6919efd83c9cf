"""One file being read: how its values become SourceRecords or Rejects, and where a record is.

Record numbers: the 1-based line of a JSONL file (blank lines are not records but keep their
number, so a reject points at the real line), the 1-based row of a Parquet file, 0 for a
whole-file document or for the file itself.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from pipelines.input.expand import InputFile
from pipelines.records import (
    Reject,
    SourceRecord,
    content_id,
    encodable,
    excerpt,
    lone_surrogate,
    nothing_visible,
    surrogate_at,
    without_surrogates,
)
from pipelines.redact import bounded, redact_url, remember_credentials
from pipelines.settings import InputSettings
from zerda_core.chunks.structure import TITLE_CHARS

BUFFER_BYTES = 1 << 20
MISSING = object()  # a field the record does not have (unlike one set to null)
_SNIFF_BYTES = 8192
# UTF-32 first: its little-endian mark begins with UTF-16's
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def binary_head(head: bytes) -> bool:
    """A NUL byte in a file's first bytes means a binary file matched by the glob, not text."""
    return b"\x00" in head[:_SNIFF_BYTES]


class BigInt(str):
    """A JSON integer too long for Python's ``int``, as its digits: an id like any integer, never a text."""


def source_name(url: str) -> str:
    """What chunks, rejects, the index and the manifest say a file is: its URL without credentials."""
    return encodable(redact_url(url))


@dataclass(frozen=True)
class Unopened:
    """A Parquet value of a type that is no text (a list, a struct, a timestamp; an integer too, as the
    text), never opened: opening it could fail (invalid UTF-8 in a leaf, a time zone Python does not
    know) or copy megabytes for a reject. ``kind`` is its Arrow type, as Arrow writes it."""

    kind: str

    def __repr__(self) -> str:
        return f"<{self.kind} value>"


@dataclass
class FileContext:
    """One file being read: turns values into SourceRecords or Rejects, and knows where it is."""

    file: InputFile
    settings: InputSettings
    compression: str
    record: int = 0  # the record being read now: where an unreadable file broke
    head: bool = True  # the stream starts at the file's head (a later part's does not, and is not sniffed)
    row_groups: range | None = None  # the Parquet row groups to read: None for all

    def __post_init__(self) -> None:
        remember_credentials(self.file.url)  # this process scrubs them from its logs too
        self.source = source_name(self.file.url)
        self.name = encodable(self.file.relative_path)  # the id of the file's whole-file document or reject

    def reject(self, record: int, doc_id: str, reason: str, message: str, bad_input: object = "") -> Reject:
        """A Reject whose every field Arrow can store; the message redacted and bounded (it may echo input)."""
        text = bounded(encodable(redact_url(message)))
        return Reject(self.source, record, encodable(doc_id), reason, text, encodable(excerpt(bad_input)))

    def default_id(self, record: int) -> str:
        """The name of a rejected record without an id: ``relative/path.jsonl/17``, where to find it (a
        document without an id is named by its text instead, :func:`~pipelines.records.content_id`)."""
        return f"{self.name}/{record}"

    def surrogate_free(self, text: str, record: int, doc_id: str, what: str, escaped: bool = False) -> str | Reject:
        """Text from a JSON escape may hold lone surrogates, which UTF-8 (so Arrow) cannot encode:
        ``strict`` rejects the record as ``invalid_utf8``, ``replace`` turns them into U+FFFD. ``escaped``:
        the line held invalid UTF-8, kept as ``surrogateescape`` surrogates, which are named as bytes."""
        where = lone_surrogate(text, what, escaped)
        if where is None:
            return text
        if self.settings.encoding_errors == "replace":
            return without_surrogates(text)
        if escaped:  # the bytes around the first bad one, as Python writes bytes: ``caf\xe9``
            at = surrogate_at(text) or 0
            text = text[max(0, at - 60) : at + 60]
            with contextlib.suppress(UnicodeEncodeError):  # a surrogate escape in it too: shown as ``\ud800``
                text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return self.reject(record, doc_id, "invalid_utf8", where, text)

    def decode(self, data: bytes, record: int, doc_id: str, encoding: str = "utf-8-sig") -> str | Reject:
        """UTF-8, a file's or line's leading BOM dropped (``utf-8``: a stored value, kept whole so that
        offsets slice it); invalid bytes rejected or replaced, as configured."""
        try:
            return data.decode(encoding, self.settings.encoding_errors)
        except UnicodeDecodeError as err:
            around = data[max(0, err.start - 60) : err.end + 60].decode("utf-8", "backslashreplace")
            return self.reject(
                record, doc_id, "invalid_utf8", f"invalid UTF-8 at byte {err.start}: {err.reason}", around
            )

    def document(
        self, record: int, doc_id: str, text: str, named: bool = True, title: str | None = None
    ) -> SourceRecord | Reject:
        """The text as it is (line ends untouched: chunks are exact slices), or why it is refused. A record
        that has no id (``named`` False) is a document named by its text, so its identity does not change
        when a line above it is added or removed; refused, it keeps ``doc_id``, its position."""
        blank = nothing_visible(text)
        if blank is not None:
            return self.reject(record, doc_id, "empty", blank, text)
        if len(text) > self.settings.max_document_chars:
            limit = self.settings.max_document_chars
            return self.reject(record, doc_id, "too_large", f"{len(text)} characters, over {limit}", text)
        if "\x00" in text:
            return self.reject(record, doc_id, "not_text", f"NUL character at {text.index(chr(0))}", text)
        return SourceRecord(self.source, record, doc_id if named else content_id(text), text, title)

    def from_fields(
        self,
        record: int,
        raw_id: object,
        text: object,
        bad_input: object,
        escaped: bool = False,
        raw_title: object = None,
    ) -> SourceRecord | Reject:
        """A JSONL object's or Parquet row's id, text and title; ids may be strings or integers. ``escaped``: see
        :meth:`surrogate_free`."""
        if isinstance(raw_id, bytes):  # a Parquet string column, read as bytes: decoded value by value
            raw_id = self.decode(raw_id, record, self.default_id(record), "utf-8")
            if isinstance(raw_id, Reject):
                return raw_id
        has_id = (isinstance(raw_id, str) and raw_id != "") or (
            isinstance(raw_id, int) and not isinstance(raw_id, bool)
        )
        doc_id = str(raw_id) if has_id else self.default_id(record)
        if isinstance(raw_id, str):
            checked = self.surrogate_free(doc_id, record, self.default_id(record), "id", escaped)
            if isinstance(checked, Reject):
                return checked
            doc_id = checked
        if isinstance(text, bytes):  # decoded from UTF-8: no surrogate can be in it
            text = self.decode(text, record, doc_id, "utf-8")
        elif isinstance(text, str) and not isinstance(text, BigInt):
            text = self.surrogate_free(text, record, doc_id, "text", escaped)
        else:
            field = bounded(self.settings.text_field)
            what = f"has no field {field!r}" if text is MISSING else f"has {field!r} = {_kind(text)}, not a string"
            return self.reject(record, doc_id, "missing_text", f"record {what}", bad_input)
        if isinstance(text, Reject):
            return text
        return self.document(record, doc_id, text, named=has_id, title=title_of(raw_title))

    def binary_sniffed(self, stream: io.BufferedReader) -> Reject | None:
        """A binary head (see ``binary_head``) is one ``not_text`` reject for the file."""
        head = stream.peek(_SNIFF_BYTES) if self.head else b""
        if binary_head(head):
            encoding = next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), None)
            message = (
                f"{encoding} text (its byte order mark): zerda reads UTF-8; convert it (iconv -f {encoding} -t UTF-8)"
                if encoding
                else "binary content (NUL bytes) in a text file"
            )
            return self.reject(0, self.name, "not_text", message)
        return None


def title_of(raw: object) -> str | None:
    """A record's title: a string value (a Parquet value's bytes decoded), invalid UTF-8 and lone surrogates
    as U+FFFD, cut to ``TITLE_CHARS`` as a heading's title is; anything else, or white space only, is none.
    A title is context for the embedder, never a reason to refuse the document."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str) or isinstance(raw, BigInt) or not raw.strip():
        return None
    title = without_surrogates(raw)
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


def json_kind(value: object) -> str:
    """A parsed JSON value's type, in JSON's words (``null``, not Python's ``NoneType``)."""
    if value is None:
        return "JSON null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float, BigInt)):
        return "a JSON number"
    if isinstance(value, str):
        return "a JSON string"
    return "a JSON object" if isinstance(value, dict) else "a JSON array"


def _kind(value: object) -> str:
    """A value that is no text, in its format's words: Arrow's for Parquet ("an int64 value"), JSON's."""
    if isinstance(value, Unopened):
        article = "an" if value.kind[:1] in ("a", "e", "i", "o") else "a"  # "a uint8": a "you"
        return f"{article} {value.kind} value"
    return "null" if value is None else json_kind(value)
