"""The corpus formats: each reads a decompressed stream into SourceRecords and Rejects.

JSONL is streamed a line at a time, a text file is one document, Parquet is read by record
batch with pyarrow (only the text and id columns). A suffix names the format (``a.JSONL.gz``:
JSONL, gzip); ``input.formats`` in the settings maps other suffixes to one of them, and
``input.default_format`` names the format of any other file (no suffix: ``README``, ``NEWS.gz``).
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.input.context import BUFFER_BYTES, MISSING, BigInt, FileContext, Unopened, json_kind
from pipelines.records import EXCERPT_CHARS, Reject, SourceRecord
from pipelines.redact import bounded
from pipelines.settings import COMPRESSION_SUFFIXES, InputSettings

JSONL_SUFFIXES = (".jsonl", ".ndjson")
TEXT_SUFFIXES = (".txt", ".md", ".rst")
PARQUET_SUFFIXES = (".parquet",)

_SPOOL_BYTES = 64 << 20
_PARQUET_BATCH_ROWS = 256
_PARQUET_BATCH_BYTES = 32 << 20
_UTF8_BOM = b"\xef\xbb\xbf"
_CR_HINT = " (the line holds carriage returns: JSONL records end at \\n, so CR line ends read as one line)"

Reader = Callable[[io.BufferedReader, FileContext], Iterator[SourceRecord | Reject]]


def split_suffixes(url: str) -> tuple[str, str]:
    """(format suffix, compression suffix or ""), lower-cased: ``a.JSONL.gz`` -> (".jsonl", ".gz"). An HTTP
    URL's query is no part of its name (a signed URL: ``a.jsonl?X-Amz-Signature=…``); elsewhere ``?`` is a
    character of a file's name."""
    if url.startswith(("http://", "https://")):
        url = url.split("#", 1)[0].split("?", 1)[0]
    name = url.rsplit("/", 1)[-1].lower()
    compression = next((s for s in COMPRESSION_SUFFIXES if name.endswith(s)), "")
    stem = name[: len(name) - len(compression)]
    dot = stem.rfind(".")
    return (stem[dot:] if dot > 0 else ""), compression


def reader_for(suffix: str, settings: InputSettings) -> Reader | None:
    """The reader of a format suffix: a mapping in ``input.formats`` first, then the known suffixes, then
    ``input.default_format`` (for any other suffix, or none)."""
    named = {s.lower(): name for s, name in settings.formats.items()}.get(suffix)
    if named:
        return FORMATS[named]
    known = _READERS.get(suffix)
    if known is None and settings.default_format is not None:
        return FORMATS[settings.default_format]
    return known


def read_jsonl(stream: io.BufferedReader, ctx: FileContext) -> Iterator[SourceRecord | Reject]:
    """One JSON object a line, streamed; a line that is valid JSON but not an object is ``invalid_json``."""
    binary = ctx.binary_sniffed(stream)
    if binary:
        yield binary
        return
    limit = line_limit(ctx.settings.max_document_chars)
    for number, line in _lines(stream, ctx, limit):
        if line.isspace():
            continue
        default_id = ctx.default_id(number)
        if len(line) > limit:
            shown = line[:1000].decode("utf-8", "replace")  # text, not the repr of bytes
            yield ctx.reject(number, default_id, "too_large", f"line longer than {limit} bytes", shown)
            continue
        yield _json_record(ctx, number, line)


def line_limit(max_chars: int) -> int:
    """Bytes a JSONL line may have: a JSON string spends at most 12 bytes on a character
    (an escaped surrogate pair), plus room for the other fields."""
    return 12 * max_chars + BUFFER_BYTES


def _lines(stream: io.BufferedReader, ctx: FileContext, limit: int) -> Iterator[tuple[int, bytes]]:
    """Numbered lines; a line over ``limit`` bytes comes cut to ``limit + 1`` and the rest is skipped.

    A long run of empty lines is skipped a buffer at a time (counted, not yielded): millions of them cost
    what reading their bytes costs, not a Python loop turn each. Only a run is looked ahead into: ``peek``
    copies the whole buffer (a megabyte), which once a line would cost more than reading the line."""
    empty = 0  # empty lines read one by one since the last line with content
    while True:
        ctx.record += 1  # the line being read: where the file broke, if it breaks now
        line = stream.readline(limit + 1)
        if not line:
            return
        if line == b"\n":
            empty += 1
            if empty >= _EMPTY_RUN:
                ctx.record += _skip_newlines(stream)
            continue
        empty = 0
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := stream.readline(BUFFER_BYTES)) and not rest.endswith(b"\n"):
                pass
        yield ctx.record, line


_EMPTY_RUN = 16  # empty lines in a row after which the rest of the run is skipped a buffer at a time


def _skip_newlines(stream: io.BufferedReader) -> int:
    """Consume the newlines that come next, a buffer at a time; how many."""
    skipped = 0
    while ahead := stream.peek():
        run = len(ahead) - len(ahead.lstrip(b"\n"))
        skipped += len(stream.read(run))
        if run < len(ahead):  # the run ends in this buffer
            break
    return skipped


def _decoded_line(line: bytes, ctx: FileContext) -> tuple[str, bool]:
    """The line as text, and whether it held invalid UTF-8. Only the fields zerda reads must be valid:
    with ``strict``, invalid bytes are kept as lone surrogates (``surrogateescape``) for the text and id
    checks to reject, so a bad byte in another field, like a lone surrogate escape there, costs nothing."""
    if ctx.settings.encoding_errors == "replace":
        return line.decode("utf-8-sig", "replace"), False
    try:
        return line.decode("utf-8-sig"), False
    except UnicodeDecodeError:
        return line.decode("utf-8-sig", "surrogateescape"), True


def _json_record(ctx: FileContext, number: int, raw: bytes) -> SourceRecord | Reject:
    line, escaped = _decoded_line(raw, ctx)
    shown = line[: EXCERPT_CHARS + 2].rstrip("\r\n")  # what a reject shows, without copying a long line
    try:
        obj = json.loads(line, parse_int=_int_or_digits, object_pairs_hook=_object)
    except (ValueError, RecursionError) as err:
        undecodable = ctx.decode(raw, number, ctx.default_id(number)) if escaped else None
        if isinstance(undecodable, Reject):  # bad bytes and no JSON: the bytes are the likelier cause (Latin-1)
            return undecodable
        hint = _CR_HINT if "\r" in line.rstrip("\r\n") else ""
        return ctx.reject(number, ctx.default_id(number), "invalid_json", f"invalid JSON: {err}{hint}", shown)
    if not isinstance(obj, dict):
        message = f"{json_kind(obj)} where an object was expected"
        return ctx.reject(number, ctx.default_id(number), "invalid_json", message, shown)
    settings = ctx.settings
    repeated = obj.twice if isinstance(obj, _Repeated) else {}
    read_twice = [key for key in (settings.text_field, settings.id_field, settings.title_field) if key in repeated]
    if read_twice:  # a field zerda does not read may repeat, as it may hold anything
        key = read_twice[0]
        message = f"key {bounded(key)!r} appears {repeated[key]} times: which value to read?"
        return ctx.reject(number, ctx.default_id(number), "invalid_json", message, shown)
    text = obj.get(settings.text_field, MISSING)
    title = None if settings.title_field is None else obj.get(settings.title_field)
    return ctx.from_fields(number, obj.get(settings.id_field), text, shown, escaped=escaped, raw_title=title)


class _Repeated(dict[str, object]):
    """A JSON object that names a key more than once: ``twice`` counts each such key's occurrences."""

    twice: dict[str, int]


def _object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object as a dict; one with a repeated key remembers it (``json`` keeps the last value silently,
    other parsers the first: a record whose text or id is named twice has no one meaning)."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    repeated = _Repeated(obj)
    counts: dict[str, int] = {}
    for key, _ in pairs:
        counts[key] = counts.get(key, 0) + 1
    repeated.twice = {key: n for key, n in counts.items() if n > 1}
    return repeated


def _int_or_digits(digits: str) -> int | BigInt:
    """A JSON integer; one too long for Python's ``int`` (``sys.get_int_max_str_digits``) stays its digits,
    so a huge number in a field zerda does not read never rejects the record."""
    limit = sys.get_int_max_str_digits()
    return int(digits) if not limit or len(digits.lstrip("-")) <= limit else BigInt(digits)


def read_text(stream: io.BufferedReader, ctx: FileContext) -> Iterator[SourceRecord | Reject]:
    """A whole file is one document, read up to what ``max_document_chars`` allows and no further."""
    binary = ctx.binary_sniffed(stream)
    if binary:
        yield binary
        return
    doc_id = ctx.name
    limit = 4 * ctx.settings.max_document_chars + len(_UTF8_BOM)  # UTF-8 spends at most 4 bytes a character
    data = stream.read(limit + 1)
    if not data:
        return
    if len(data) > limit:
        message = f"over {limit} bytes, so over {ctx.settings.max_document_chars} characters"
        yield ctx.reject(0, doc_id, "too_large", message, data[:1000].decode("utf-8", "replace"))
        return
    text = ctx.decode(data, 0, doc_id)
    del data  # else the raw bytes stay alive, in this suspended generator, while the document is chunked
    yield text if isinstance(text, Reject) else ctx.document(0, doc_id, text)


def read_parquet(stream: io.BufferedReader, ctx: FileContext) -> Iterator[SourceRecord | Reject]:
    """Rows by record batch; only the text, id and title columns are read, each row on its own.

    String columns are read as bytes and decoded value by value, so invalid UTF-8 rejects its row
    only. Memory is bounded before values are made: batches are sized from each row group's
    uncompressed column sizes (a batch is a row when rows are huge), dictionary-encoded columns stay
    encoded (one 60 MB value repeated costs 60 MB, not 60 MB a row), and a value longer than
    ``max_document_chars`` could be is rejected as ``too_large`` from its length, never copied.
    """
    settings = ctx.settings
    with _seekable(stream, ctx) as source:
        schema = pq.ParquetFile(source).schema_arrow
        names = schema.names
        if settings.text_field not in names:
            shown = bounded(", ".join(bounded(name, 80) for name in names))
            yield ctx.reject(
                0, ctx.name, "missing_text", f"no column {bounded(settings.text_field)!r} (columns: {shown})"
            )
            return
        optional = (settings.id_field, settings.title_field)
        columns = [settings.text_field] + [name for name in optional if name is not None and name in names]
        twice = [name for name in columns if names.count(name) > 1]
        if twice:
            message = f"column {bounded(twice[0])!r} appears {names.count(twice[0])} times: which one to read?"
            yield ctx.reject(0, ctx.name, "unreadable_file", message)
            return
        flat = [name for name in columns if _is_flat_bytes(schema.field(name).type)]  # nested: one value a row
        parquet = pq.ParquetFile(source, read_dictionary=flat)
        max_bytes = 4 * settings.max_document_chars  # UTF-8 spends at most 4 bytes a character
        row = ctx.record  # rows before the part read
        ctx.record = row + 1
        groups = range(parquet.num_row_groups) if ctx.row_groups is None else ctx.row_groups
        for group in groups:
            rows = _batch_rows(parquet.metadata.row_group(group), columns)
            for batch in parquet.iter_batches(batch_size=rows, row_groups=[group], columns=columns):
                texts = _values(batch.column(settings.text_field), max_bytes, integers=False)
                ids, titles = (
                    _values(batch.column(name), max_bytes, integers=name == settings.id_field)
                    if name in columns
                    else [None] * len(texts)
                    for name in (settings.id_field, settings.title_field)
                )
                for text, raw_id, title in zip(texts, ids, titles, strict=True):
                    row += 1
                    oversize = next((v for v in (text, raw_id) if isinstance(v, _Oversize)), None)
                    if oversize is not None:
                        what = "text" if oversize is text else "id"
                        message = f"{what} of {oversize.size} bytes, over {settings.max_document_chars} characters"
                        yield ctx.reject(row, ctx.default_id(row), "too_large", message)
                    else:
                        yield ctx.from_fields(row, raw_id, text, text, raw_title=title)
                ctx.record = row + 1
                del texts, ids, titles, batch  # a huge batch is not kept alive while the next is read


@dataclass(frozen=True)
class _Oversize:
    """A value too long to be a document, known from its length: it is never copied out of Arrow."""

    size: int


def _batch_rows(group: pq.RowGroupMetaData, columns: list[str]) -> int:
    """Rows a batch may hold so that it spends about ``_PARQUET_BATCH_BYTES`` (at least one row)."""
    chunks = [group.column(i) for i in range(group.num_columns)]
    size = sum(
        c.total_uncompressed_size
        for c in chunks
        if any(c.path_in_schema == name or c.path_in_schema.startswith(f"{name}.") for name in columns)
    )  # a nested column is stored as its leaves: ``id.list.element``
    per_row = size // max(1, group.num_rows) + 1
    return max(1, min(_PARQUET_BATCH_ROWS, _PARQUET_BATCH_BYTES // per_row))


def _is_text_kind(kind: pa.DataType) -> bool:
    """A type whose values can be a text: strings and binaries of every layout."""
    if _is_flat_bytes(kind) or pa.types.is_fixed_size_binary(kind):
        return True
    views = (getattr(pa.types, "is_string_view", None), getattr(pa.types, "is_binary_view", None))
    return any(is_view is not None and is_view(kind) for is_view in views)


def _is_flat_bytes(kind: pa.DataType) -> bool:
    """A string or binary column: the kinds pyarrow can keep dictionary-encoded (it refuses nested ones)."""
    kinds = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    return any(is_kind(kind) for is_kind in kinds)


def _values(array: pa.Array, max_bytes: int, integers: bool) -> list[object]:
    """A column's Python values; strings as bytes (decoded per value), those over ``max_bytes`` as _Oversize,
    integers as ints when ``integers`` (an id may be one), values of any other type as Unopened."""
    if pa.types.is_dictionary(array.type):
        distinct = _values(array.dictionary, max_bytes, integers)
        return [None if i is None else distinct[i] for i in array.indices.to_pylist()]
    if not (_is_text_kind(array.type) or (integers and pa.types.is_integer(array.type))):  # see Unopened
        unopened = Unopened(bounded(str(array.type), 80))
        return [unopened if valid else None for valid in array.is_valid().to_pylist()]
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.large_binary())  # the same buffers, no UTF-8 check: decoded value by value
    if not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        return array.to_pylist()
    sizes = pc.binary_length(array).to_pylist()
    if all(size is None or size <= max_bytes for size in sizes):
        return array.to_pylist()
    return [
        None if size is None else _Oversize(size) if size > max_bytes else array[i].as_py()
        for i, size in enumerate(sizes)
    ]


@contextmanager
def _seekable(stream: io.BufferedReader, ctx: FileContext) -> Iterator[IO[bytes]]:
    """Parquet seeks to its footer: a decompressed stream is spooled first (to disk past 64 MiB);
    the stream itself stops at ``input.max_file_bytes`` (:mod:`pipelines.input.source`), so the spool does."""
    if not ctx.compression:
        yield stream
        return
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
        shutil.copyfileobj(stream, spool, BUFFER_BYTES)
        spool.seek(0)
        yield spool


FORMATS: Mapping[str, Reader] = {"jsonl": read_jsonl, "text": read_text, "parquet": read_parquet}
_READERS: Mapping[str, Reader] = {
    **dict.fromkeys(JSONL_SUFFIXES, read_jsonl),
    **dict.fromkeys(TEXT_SUFFIXES, read_text),
    **dict.fromkeys(PARQUET_SUFFIXES, read_parquet),
}
