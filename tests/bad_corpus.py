"""One corpus with every kind of bad input of issue 4, mixed with good documents.

``build_bad_corpus(root)`` writes it and returns what the job must make of it: every good
document (file, record, id, text after decoding) and every planted reject (file, record,
id, reason), so a test can compare the output with it exactly. File names are relative to
``root``; the job is run on the glob ``root/*`` with :data:`CONFIG` (``max_document_chars``
small, so that ``too_large`` costs kilobytes, not megabytes).
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from pipelines.records import content_id

MAX_DOCUMENT_CHARS = 5000
MIN_CHUNK_SIZE = 100  # the default
CONFIG = f"input:\n  max_document_chars: {MAX_DOCUMENT_CHARS}\n"
BOM = b"\xef\xbb\xbf"
MEGABYTE_LINE_CHARS = 1_000_000
# Over the JSONL line limit for MAX_DOCUMENT_CHARS (12 bytes a character + 1 MiB): skipped unparsed.
OVERLONG_LINE_CHARS = 12 * MAX_DOCUMENT_CHARS + (1 << 20) + 100_000
PATH_TRICKS = ("../../evil", "/etc/zerda-evil", "density_bucket=99", "density_bucket=99/../../escape")
TRICKY_TEXT = "Stored as data, never as a path: density_bucket=99/ ../../escape %s %(name)s {0} $HOME. "

_WORDS = (
    "river stone desert fox lantern orchard copper meadow harbor quiet caravan dune oasis "
    "evening market linen spice letter bridge archive pattern signal measure window garden"
).split()


@dataclass(frozen=True)
class Planted:
    """A record that must come out as a reject: where it is, its id and the reason."""

    file: str
    record: int
    doc_id: str
    reason: str


@dataclass
class BadCorpus:
    """The corpus on disk and what the job must make of it."""

    root: Path
    good: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)  # (file, record) -> (id, text)
    rejects: list[Planted] = field(default_factory=list)
    replaced: dict[str, tuple[str, str]] = field(default_factory=dict)  # file -> (id, text) with encoding "replace"

    @property
    def glob(self) -> str:
        return f"{self.root}/*"

    def accept(self, file: str, record: int, doc_id: str, text: str) -> None:
        assert len(text.strip()) > MIN_CHUNK_SIZE + 20 and len(text) <= MAX_DOCUMENT_CHARS, "not a good document"
        self.good[(file, record)] = (doc_id, text)

    def reject(self, file: str, record: int, doc_id: str, reason: str) -> None:
        self.rejects.append(Planted(file, record, doc_id, reason))


def prose(rng: random.Random, sentences: int) -> str:
    """Deterministic sentences: long enough for a chunk, short enough for MAX_DOCUMENT_CHARS."""
    return " ".join(
        " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "." for _ in range(sentences)
    )


def _json_line(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"


class _Jsonl:
    """A JSONL file built line by line, each line planted as good or as a reject."""

    def __init__(self, corpus: BadCorpus, name: str, line_end: bytes = b"\n") -> None:
        self.corpus, self.name, self.line_end = corpus, name, line_end
        self.lines: list[bytes] = []

    @property
    def next_record(self) -> int:
        return len(self.lines) + 1

    def add(self, line: bytes) -> int:
        self.lines.append(line.rstrip(b"\n") + self.line_end)
        return len(self.lines)

    def good(self, doc_id: str | int | None, text: str) -> None:
        obj = {"text": text} if doc_id is None else {"id": doc_id, "text": text}
        record = self.add(_json_line(obj))
        self.corpus.accept(self.name, record, content_id(text) if doc_id is None else str(doc_id), text)

    def bad(self, line: bytes, reason: str, doc_id: str | None = None) -> None:
        """A rejected line; without ``doc_id`` the reject carries the default id ``file/line``."""
        record = self.next_record
        self.add(line)
        self.corpus.reject(self.name, record, doc_id or f"{self.name}/{record}", reason)

    def write(self, prefix: bytes = b"") -> None:
        (self.corpus.root / self.name).write_bytes(prefix + b"".join(self.lines))


def build_bad_corpus(root: Path) -> BadCorpus:
    """Write the corpus into ``root`` (created) and return the expectations."""
    root.mkdir(parents=True, exist_ok=True)
    corpus = BadCorpus(root)
    rng = random.Random(4)

    mixed = _Jsonl(corpus, "mixed.jsonl")
    mixed.good("good-1", prose(rng, 40))  # several chunks
    mixed.bad(b'{"id": "broken", "text": "an unterminated string', "invalid_json")
    mixed.add(b"")  # a blank line: not a record, but it keeps its number
    mixed.bad(b"[1, 2, 3]", "invalid_json")
    mixed.bad(b'"a JSON string, not an object"', "invalid_json")
    mixed.bad(b"null", "invalid_json")
    mixed.bad(_json_line({"id": "no-text", "title": "no text field"}), "missing_text", "no-text")
    mixed.bad(_json_line({"id": "null-text", "text": None}), "missing_text", "null-text")
    mixed.bad(_json_line({"id": "number-text", "text": 42}), "missing_text", "number-text")
    mixed.bad(_json_line({"id": "list-text", "text": ["a", "list"]}), "missing_text", "list-text")
    mixed.bad(_json_line({"id": "empty-text", "text": ""}), "empty", "empty-text")
    mixed.bad(_json_line({"id": "blank-text", "text": " \n\t\r\n  "}), "empty", "blank-text")
    mixed.bad(_json_line({"id": "short", "text": "Too short to chunk."}), "below_min_chunk_size", "short")
    nul_text = prose(rng, 3) + "\x00" + prose(rng, 3)
    mixed.bad(_json_line({"id": "nul-text", "text": nul_text}), "not_text", "nul-text")
    huge = prose(rng, 400)[: MAX_DOCUMENT_CHARS + 1]
    mixed.bad(_json_line({"id": "huge", "text": huge}), "too_large", "huge")
    mixed.good("dup", prose(rng, 8))
    for trick in PATH_TRICKS:
        mixed.good(trick, TRICKY_TEXT + prose(rng, 6))
    mixed.good(None, prose(rng, 7))  # no id: named by its text
    mixed.good(12345, prose(rng, 7))  # an integer id
    mixed.bad(b'{"id": "megabyte", "text": "' + b"m" * MEGABYTE_LINE_CHARS, "invalid_json")
    mixed.bad(b'{"id": "overlong", "text": "' + b"o" * OVERLONG_LINE_CHARS + b'"}', "too_large")
    mixed.good("after-the-long-lines", prose(rng, 9))
    mixed.write()

    crlf = _Jsonl(corpus, "crlf.jsonl", line_end=b"\r\n")
    crlf.good("crlf-1", prose(rng, 8))
    crlf.good("crlf-2", "\r\n".join(prose(rng, 8) for _ in range(4)))  # CRLF inside the text, too
    crlf.write()

    bom = _Jsonl(corpus, "bom.jsonl")
    bom.good("bom-jsonl", prose(rng, 8))
    bom.write(prefix=BOM)

    latin1 = _Jsonl(corpus, "latin1.jsonl")
    latin1.good("utf8-ok", prose(rng, 6))
    latin1_text = prose(rng, 6).encode() + b" caf\xe9 cr\xe8me " + prose(rng, 2).encode()
    latin1.bad(b'{"id": "latin1", "text": "' + latin1_text + b'"}', "invalid_utf8", "latin1")  # its id is valid
    latin1.write()
    corpus.replaced["latin1.jsonl"] = ("latin1", latin1_text.decode("utf-8", "replace"))

    def text_file(name: str, data: bytes, good_text: str | None = None, reason: str | None = None) -> None:
        (root / name).write_bytes(data)
        if good_text is not None:
            corpus.accept(name, 0, name, good_text)
        if reason is not None:
            corpus.reject(name, 0, name, reason)

    crlf_text = "\r\n".join(prose(rng, 2) for _ in range(25)) + "\r\n"
    text_file("crlf.txt", crlf_text.encode(), good_text=crlf_text)
    cr_text = "\r".join(prose(rng, 2) for _ in range(25))
    text_file("cr.md", cr_text.encode(), good_text=cr_text)
    bom_text = "# A heading\n\n" + prose(rng, 30)
    text_file("bom.txt", BOM + bom_text.encode(), good_text=bom_text)
    (root / "sub").mkdir()
    nested_text = prose(rng, 9)
    text_file("sub/nested.rst", nested_text.encode(), good_text=nested_text)  # a folder matched by the glob
    latin1_file = prose(rng, 6).encode() + b" na\xefve " + prose(rng, 3).encode()
    text_file("latin1.txt", latin1_file, reason="invalid_utf8")
    corpus.replaced["latin1.txt"] = ("latin1.txt", latin1_file.decode("utf-8", "replace"))
    text_file("nul.txt", prose(rng, 4).encode() + b"\x00\x00" + prose(rng, 4).encode(), reason="not_text")
    binary = b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(4096)) + b"\x00" * 64
    text_file("binary.jsonl", binary, reason="not_text")  # binary content under a corpus suffix
    text_file("logo.png", binary, reason="not_text")  # a binary file matched by the glob
    text_file("empty.jsonl", b"", reason="empty")
    text_file("big.txt", prose(rng, 400)[: MAX_DOCUMENT_CHARS + 10].encode(), reason="too_large")

    _truncated_gzip(corpus, rng)
    _corrupt_zstd(corpus, rng)
    _parquet_files(corpus, rng)
    return corpus


def _truncated_gzip(corpus: BadCorpus, rng: random.Random) -> None:
    """300 records, cut at half: every line whole in the bytes that still decompress is kept."""
    name = "truncated.jsonl.gz"
    texts = [prose(rng, 4) for _ in range(300)]
    data = b"".join(_json_line({"id": f"gz-{i}", "text": t}) for i, t in enumerate(texts))
    cut = gzip.compress(data, mtime=0)
    cut = cut[: len(cut) // 2]
    kept = zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")
    assert 0 < kept < len(texts)
    (corpus.root / name).write_bytes(cut)
    for i in range(kept):
        corpus.accept(name, i + 1, f"gz-{i}", texts[i])
    corpus.reject(name, kept + 1, name, "unreadable_file")


def _corrupt_zstd(corpus: BadCorpus, rng: random.Random) -> None:
    """Two zstd frames; the second's first block has the reserved block type: frame one is kept."""
    name = "corrupt.jsonl.zst"
    texts = [prose(rng, 4) for _ in range(40)]
    lines = [_json_line({"id": f"zst-{i}", "text": t}) for i, t in enumerate(texts)]
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    first = compressor.compress(b"".join(lines[:20]))
    second = bytearray(compressor.compress(b"".join(lines[20:])))
    second[zstandard.frame_header_size(bytes(second))] |= 0b110  # block type 3: reserved, i.e. corrupt
    (corpus.root / name).write_bytes(first + bytes(second))
    for i in range(20):
        corpus.accept(name, i + 1, f"zst-{i}", texts[i])
    corpus.reject(name, 21, name, "unreadable_file")


def _parquet_files(corpus: BadCorpus, rng: random.Random) -> None:
    """A Parquet file without the text column, and one with good rows, a duplicate id and a null text."""
    no_text = pa.table({"id": ["p1", "p2"], "body": [prose(rng, 6), prose(rng, 6)]})
    pq.write_table(no_text, corpus.root / "no_text_column.parquet")
    corpus.reject("no_text_column.parquet", 0, "no_text_column.parquet", "missing_text")

    rows = [("pq-1", prose(rng, 7)), ("dup", prose(rng, 7)), ("pq-null", None)]
    table = pa.table({"id": [r[0] for r in rows], "text": [r[1] for r in rows]})
    pq.write_table(table, corpus.root / "rows.parquet")
    corpus.accept("rows.parquet", 1, "pq-1", rows[0][1])  # type: ignore[arg-type]
    corpus.accept("rows.parquet", 2, "dup", rows[1][1])  # type: ignore[arg-type]
    corpus.reject("rows.parquet", 3, "pq-null", "missing_text")
