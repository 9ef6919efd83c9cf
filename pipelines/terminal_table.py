"""Plain-text tables and density histograms for the terminal, shared by the end-of-run summary and the report.

Kept free of Beam and Arrow so both the entry point and ``pipelines.report`` can render the same way::

    print(render_table(["reason", "records"], [["empty", 3], ["invalid_json", 1]]))
    print(render_histogram(manifest["counts"]["chunks_by_bucket"], width=40, bucket_width=0.1))
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence

from pipelines.errors import explains

# A bar is drawn in eighths of a cell so small differences stay visible in a narrow terminal.
_FULL = "█"
_PARTIAL = " ▏▎▍▌▋▊▉"
_EIGHTHS = 8
MISSING = "–"


# What a terminal acts on instead of showing: C0 controls (ESC starts the sequences that retitle, clear or recolour
# it; BEL, backspace and carriage return hide text), DEL, C1 controls (U+009B is a one-character CSI) and the
# bidi overrides and isolates, which make a file name read backwards. Newline stays: lines are the layout.
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_AND_NEWLINE = re.compile(f"{_CONTROLS.pattern}|\n")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    r"""``text`` for a terminal: each control character written as its escape (``\x1b``, ``\u202e``), so that
    what a corpus, a file name or an error message holds is shown and never acted on; newlines kept."""
    return _CONTROLS.sub(_escaped, text)


def visible_line(text: str) -> str:
    """``text`` as one terminal line: :func:`visible`, and newlines escaped too (a table cell, a name)."""
    return _CONTROLS_AND_NEWLINE.sub(_escaped, text)


class VisibleFormatter(logging.Formatter):
    """Log lines for a terminal: messages quote file names, ids and errors, which may hold escape sequences.
    An :class:`~pipelines.errors.Explained` failure is logged without its traceback: its message says it all."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and explains(record.exc_info[1]):
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        return visible(super().format(record))


def write_stdout(text: str) -> bool:
    """Write ``text`` to standard output, its control characters :func:`visible`, best effort; False when it
    could not all be written.

    Characters the stream's encoding lacks (``PYTHONIOENCODING=ascii``) are written as escapes. When the
    reader has gone (``| head``) or the stream fails (``> /dev/full``), the rest is dropped and the
    descriptor is pointed at /dev/null: Python would fail again flushing stdout at exit, with a traceback.
    A broken pipe is the reader's choice and counts as written; a closed stdout (``>&-``) does not.
    """
    stream = sys.stdout
    if stream is None:  # started with descriptor 1 closed
        return False
    if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
        stream.reconfigure(errors="backslashreplace")
    try:
        stream.write(visible(text))
        stream.flush()
    except (OSError, ValueError) as err:  # ValueError: a stream closed in this process
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        return isinstance(err, BrokenPipeError)
    return True


def format_cell(value: object) -> str:
    """Numbers with thousands separators, ``None`` as a dash, anything else as ``str`` on one visible line
    (escaped before the columns are measured, so they stay aligned)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return visible_line(str(value))


def is_numeric(value: object) -> bool:
    """Numbers (not booleans): their columns are right-aligned."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """An aligned table: numbers right-aligned (they compare by magnitude), text left-aligned."""
    cells = [[format_cell(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    numeric = [any(is_numeric(row[i]) for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ).rstrip()

    rule = "  ".join("─" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in cells)])


def _decimals(step: float) -> int:
    """Fewest decimals (at least one) that write multiples of ``step`` exactly: 0.1 → 1, 0.05 → 2."""
    return next((d for d in range(1, 7) if round(step, d) == step), 6)


def bucket_label(bucket: int, bucket_width: float) -> str:
    """The density range a bucket holds, e.g. ``0.3–0.4``; the last bucket stops at 1."""
    decimals = _decimals(bucket_width)
    low, high = bucket * bucket_width, min((bucket + 1) * bucket_width, 1.0)
    return f"{low:.{decimals}f}–{high:.{decimals}f}"


def _bar(count: int, largest: int, width: int) -> str:
    eighths = round(count * width * _EIGHTHS / largest) if largest else 0
    if count and not eighths:
        eighths = 1  # a non-empty bucket never looks empty
    full, rest = divmod(eighths, _EIGHTHS)
    return _FULL * full + (_PARTIAL[rest] if rest else "")


def render_histogram(
    counts_by_bucket: Mapping[int, int] | Mapping[str, int], width: int, *, bucket_width: float = 0.1
) -> str:
    """One bar per bucket, from the lowest to the highest non-empty one, labelled with its density range.

    Keys may be ints or the strings a JSON manifest stores (``"3"``); bars are proportional to the
    largest count, which fills ``width`` cells.
    """
    counts = {int(bucket): count for bucket, count in counts_by_bucket.items()}
    filled = [bucket for bucket, count in counts.items() if count]
    if not filled:
        return "(no chunks)"
    buckets = range(min(filled), max(filled) + 1)
    largest = max(counts.values())
    labels = [bucket_label(bucket, bucket_width) for bucket in buckets]
    label_width = max(len(label) for label in labels)
    rows = []
    for bucket, label in zip(buckets, labels, strict=True):
        count = counts.get(bucket, 0)
        rows.append(f"{label.rjust(label_width)} │{_bar(count, largest, width).ljust(width)} {format_cell(count)}")
    return "\n".join(rows)
