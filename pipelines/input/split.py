"""Splitting a large corpus file into parts that several workers read, so the work follows the bytes.

An uncompressed JSONL file over ``input.split_bytes`` is cut at line starts into byte ranges of about
that size; an uncompressed Parquet file into runs of row groups. Each part knows how many records come
before it (lines or rows), so its records keep the numbers, and so the ids, of a whole-file read. The
line counts come from one pass over the file that only counts newlines (``bytes.count``: about a second
per GB), done by the worker that plans the file. A compressed file cannot be entered midway: it stays
one part, marked ``spread`` so that its documents are redistributed before chunking.

A file that would give one part, or whose whole-file read gives one file-level reject (a binary head,
nothing but whitespace, no text column, a damaged footer), is not split: its read stays the usual one.
"""

from __future__ import annotations

from dataclasses import dataclass

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.input.context import BUFFER_BYTES, binary_head
from pipelines.input.expand import InputFile
from pipelines.input.formats import read_jsonl, read_parquet, reader_for, split_suffixes
from pipelines.settings import InputSettings

_SCAN_BYTES = 8 * BUFFER_BYTES


@dataclass(frozen=True)
class FilePart:
    """What one worker reads of a file: all of it, a byte range of whole JSONL lines, or Parquet row groups.

    ``start``/``stop`` are bytes for JSONL and row-group indexes for Parquet (``stop`` None: to the end);
    ``records_before`` is the number of lines or rows before the part.
    """

    file: InputFile
    index: int = 0
    parts: int = 1
    start: int = 0
    stop: int | None = None
    records_before: int = 0
    spread: bool = False


def plan_parts(file: InputFile, settings: InputSettings, spread: bool = True) -> list[FilePart]:
    """The parts of ``file``: one unless it is larger than ``split_bytes`` and splittable.

    A small file costs nothing here (its listed size decides); a large one is scanned (JSONL) or has its
    footer read (Parquet). Storage failures raise, so the runner retries. Without ``spread`` (the job has no
    branch that spreads records), a large compressed file's records stay where it is read.
    """
    kind = _kind(file, settings)
    if kind in ("whole", "spread"):
        return [FilePart(file, spread=kind == "spread" and spread)]
    ranges = _line_ranges(file.url, settings.split_bytes) if kind == "lines" else _row_group_ranges(file.url, settings)
    if len(ranges) < 2:
        return [FilePart(file)]
    return [FilePart(file, i, len(ranges), *limits) for i, limits in enumerate(ranges)]


def spread_whole(file: InputFile, settings: InputSettings) -> bool:
    """Whether ``file`` is read whole by one worker and its records spread: known from the listing alone."""
    return _kind(file, settings) == "spread"


def _kind(file: InputFile, settings: InputSettings) -> str:
    """How a file is read: ``whole``, ``spread`` (whole, records spread), in ``lines`` or in ``row_groups``."""
    if file.size is None or file.size <= settings.split_bytes:
        return "whole"
    fmt, compression = split_suffixes(file.url)
    reader = reader_for(fmt, settings)
    if reader not in (read_jsonl, read_parquet):  # a text file is one document: nothing to split or spread
        return "whole"
    if compression:
        return "spread"
    return "lines" if reader is read_jsonl else "row_groups"


def _line_ranges(url: str, part_bytes: int) -> list[tuple[int, int, int]]:
    """``(start, stop, lines before start)`` of byte ranges of whole lines, each about ``part_bytes`` long.

    A range ends at the first line start at or past ``part_bytes`` from its own start, so a line is
    never cut. Lines are what the reader's ``readline`` gives, so newlines counted before a range's start
    are its first line's number less one. [] when the whole-file read would be one reject: a binary head,
    or no line with anything but whitespace (``empty``).
    """
    cuts: list[tuple[int, int]] = [(0, 0)]
    offset, lines, target, text = 0, 0, part_bytes, False
    with fsspec.open(url, "rb") as f:
        while block := f.read(_SCAN_BYTES):
            if offset == 0 and binary_head(block):
                return []
            text = text or not block.isspace()
            seen = 0  # the newlines of block[:seen] are counted in ``lines``
            while (at := target - 1 - offset) < len(block):
                newline = block.find(b"\n", max(at, seen))
                if newline < 0:
                    break
                lines += block.count(b"\n", seen, newline + 1)
                seen = newline + 1
                cuts.append((offset + seen, lines))
                target = offset + seen + part_bytes
            lines += block.count(b"\n", seen)
            offset += len(block)
    if not text:
        return []
    cuts = [(start, before) for start, before in cuts if start < offset]  # a cut at the very end starts nothing
    stops = [start for start, _ in cuts[1:]] + [offset]
    return [(start, stop, before) for (start, before), stop in zip(cuts, stops, strict=True)]


def _row_group_ranges(url: str, settings: InputSettings) -> list[tuple[int, int, int]]:
    """``(first row group, stop, rows before)`` of runs of row groups of about ``split_bytes`` stored bytes.

    [] when the whole-file read would be one reject: no text column, no row, or a footer pyarrow refuses.
    """
    with fsspec.open(url, "rb") as f:
        try:
            parquet = pq.ParquetFile(f)
        except pa.ArrowException:  # damaged: the whole-file read says how
            return []
        meta = parquet.metadata
        if settings.text_field not in parquet.schema_arrow.names or meta.num_rows == 0:
            return []
        ranges: list[tuple[int, int, int]] = []
        start, rows, size = 0, 0, 0
        for group in range(meta.num_row_groups):
            info = meta.row_group(group)
            size += sum(info.column(i).total_compressed_size for i in range(info.num_columns))
            if size >= settings.split_bytes or group == meta.num_row_groups - 1:
                ranges.append((start, group + 1, rows))
                rows += sum(meta.row_group(g).num_rows for g in range(start, group + 1))
                start, size = group + 1, 0
        return ranges
