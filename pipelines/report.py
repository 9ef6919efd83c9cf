"""``zerda-report OUTPUT [--html FILE]``: what a finished run wrote, read back from the output itself.

Prints chunks, characters and documents per density bucket, chunk-size percentiles, languages, rejects by
reason, a density histogram, counts per source file, the rejects by file with their reasons and a few
sample chunks of each bucket; ``--html`` also writes a self-contained page (inline CSS and SVG, nothing
fetched). OUTPUT is a local path or any fsspec URL (``s3://``, ``gs://``, ``memory://``).

Only finished outputs are reported: without ``_SUCCESS`` the numbers could describe half a run, so the
report refuses with exit code 2. Chunks are aggregated by Arrow while they stream from the Parquet files,
reading small columns and never ``text``, so a large output reports with little memory; the samples read
``text`` from the first rows of one file a bucket only.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import posixpath
import sys
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, NamedTuple

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from fsspec.core import url_to_fs
from pyarrow import acero

from pipelines.errors import OutputError
from pipelines.schema import (
    CHUNK_SUFFIX,
    MANIFEST_FILE,
    PARTITION_COLUMN,
    REJECT_SUFFIX,
    REJECTS_DIR,
    SUCCESS_FILE,
    n_buckets,
)
from pipelines.settings import OutputSettings
from pipelines.terminal_table import bucket_label, format_cell, is_numeric, render_histogram, render_table, write_stdout

EXIT_REFUSED = 2
HISTOGRAM_WIDTH = 40
SIZE_HEADERS = ("p5", "p50", "p95", "max")
PERCENTILES = (5, 50, 95, 100)
_GROUP_KEYS = [PARTITION_COLUMN, "char_count", "language"]
MAX_LISTED = 20  # sources and rejected files listed; the rest are summed up in one line
SAMPLES_PER_BUCKET = 2
SAMPLE_CHARS = 280
_SAMPLE_SCAN_ROWS = 256


class Group(NamedTuple):
    """Chunks of one bucket, size and language: the unit the scan aggregates to."""

    bucket: int
    char_count: int
    language: str
    chunks: int
    documents: int


class SourceCounts(NamedTuple):
    """What one input file gave: documents and chunks (from the data) and rejects."""

    source: str
    documents: int
    chunks: int
    characters: int
    rejects: int


class RejectedFile(NamedTuple):
    """One input file's rejects: how many, by reason, and the first message."""

    source: str
    rejects: int
    reasons: Mapping[str, int]
    message: str


class Sample(NamedTuple):
    """A chunk shown as an example of its bucket, its text cut to ``SAMPLE_CHARS``."""

    bucket: int
    source: str
    record: int
    chunk_index: int
    language: str
    char_count: int
    text: str


@dataclass(frozen=True)
class Stats:
    """Totals and chunk-size percentiles (``PERCENTILES``) over some groups."""

    documents: int
    chunks: int
    characters: int
    sizes: tuple[int | None, ...]


@dataclass(frozen=True)
class Report:
    """Everything the report shows, read from one output."""

    output: str
    manifest: Mapping[str, Any]
    groups: tuple[Group, ...]
    rejects: Mapping[str, int]
    sources: tuple[SourceCounts, ...] = ()
    rejected_files: tuple[RejectedFile, ...] = ()
    samples: tuple[Sample, ...] = ()

    @property
    def bucket_width(self) -> float:
        """The run's bucket width, from its settings (the default when the manifest predates the key)."""
        output_settings = self.manifest.get("settings", {}).get("output", {})
        return float(output_settings.get("bucket_width", OutputSettings().bucket_width))

    def buckets(self) -> list[int]:
        """The non-empty buckets, in order."""
        return sorted({group.bucket for group in self.groups})

    def stats(self, *, bucket: int | None = None, language: str | None = None) -> Stats:
        """Totals and size percentiles of one bucket's or one language's chunks; of all chunks by default."""
        sizes: Counter[int] = Counter()
        documents = 0
        for group in self.groups:
            if bucket not in (None, group.bucket) or language not in (None, group.language):
                continue
            sizes[group.char_count] += group.chunks
            documents += group.documents
        return Stats(
            documents=documents,
            chunks=sum(sizes.values()),
            characters=sum(size * n for size, n in sizes.items()),
            sizes=tuple(percentile(sizes, p) for p in PERCENTILES),
        )

    def chunks_by_bucket(self) -> dict[int, int]:
        counts: Counter[int] = Counter()
        for group in self.groups:
            counts[group.bucket] += group.chunks
        return dict(sorted(counts.items()))

    def languages(self) -> list[tuple[str, Stats]]:
        """Each language with its stats, most chunks first."""
        names = sorted({group.language for group in self.groups})
        by_language = [(name, self.stats(language=name)) for name in names]
        return sorted(by_language, key=lambda item: -item[1].chunks)


def percentile(sizes: Counter[int], p: float) -> int | None:
    """Nearest-rank percentile of a size → count histogram: always a chunk size that occurs."""
    ordered = sorted(sizes)
    cumulative = list(accumulate(sizes[size] for size in ordered))
    if not cumulative:
        return None
    rank = max(1, math.ceil(p / 100 * cumulative[-1]))
    return ordered[bisect_left(cumulative, rank)]


# Reading the output


def open_output(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and root of a finished output; ``OutputError`` when there is none to report."""
    fs, root = url_to_fs(url)
    root = root.rstrip("/") or root
    if not fs.isdir(root):
        raise OutputError(f"no output at {url}: the directory does not exist")
    if not fs.exists(posixpath.join(root, SUCCESS_FILE)):
        raise OutputError(
            f"{url} has no {SUCCESS_FILE}: the run failed or is still writing, so its numbers would be partial."
            " Rerun the pipeline into it, then report."
        )
    if not fs.exists(posixpath.join(root, MANIFEST_FILE)):
        raise OutputError(f"{url} has {SUCCESS_FILE} but no {MANIFEST_FILE}: not a zerda output")
    return fs, root


def read_manifest(fs: fsspec.AbstractFileSystem, root: str) -> dict[str, Any]:
    with fs.open(posixpath.join(root, MANIFEST_FILE), "rb") as f:
        manifest: dict[str, Any] = json.load(f)
    return manifest


def _parquet_files(fs: fsspec.AbstractFileSystem, pattern: str) -> list[str]:
    return sorted(fs.glob(pattern))


def scan_chunks(fs: fsspec.AbstractFileSystem, root: str) -> tuple[Group, ...]:
    """Chunks and first chunks (one per document) by bucket, size and language, aggregated while streaming.

    Only files under ``density_bucket=K/`` count, so a stray temp folder in OUTPUT never adds rows.
    """
    files = _parquet_files(fs, posixpath.join(root, f"{PARTITION_COLUMN}=*", f"*{CHUNK_SUFFIX}"))
    if not files:
        return ()
    partitioning = ds.partitioning(pa.schema([(PARTITION_COLUMN, pa.int32())]), flavor="hive")
    dataset = ds.dataset(files, filesystem=fs, format="parquet", partitioning=partitioning, partition_base_dir=root)
    is_first = pc.equal(pc.field("chunk_index"), 0).cast(pa.int64())
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("scan", acero.ScanNodeOptions(dataset, columns=[*_GROUP_KEYS, "chunk_index"])),
            acero.Declaration(
                "project",
                acero.ProjectNodeOptions([*map(pc.field, _GROUP_KEYS), is_first], [*_GROUP_KEYS, "first"]),
            ),
            acero.Declaration(
                "aggregate",
                acero.AggregateNodeOptions(
                    [([], "hash_count_all", None, "chunks"), ("first", "hash_sum", None, "documents")],
                    keys=_GROUP_KEYS,
                ),
            ),
        ]
    )
    rows = plan.to_table().to_pylist()
    return tuple(
        Group(row[PARTITION_COLUMN], row["char_count"], row["language"], row["chunks"], row["documents"])
        for row in sorted(rows, key=lambda row: (row[PARTITION_COLUMN], row["char_count"], row["language"]))
    )


def _chunk_dataset(fs: fsspec.AbstractFileSystem, root: str) -> ds.Dataset | None:
    files = _parquet_files(fs, posixpath.join(root, f"{PARTITION_COLUMN}=*", f"*{CHUNK_SUFFIX}"))
    return ds.dataset(files, filesystem=fs, format="parquet") if files else None


def scan_sources(fs: fsspec.AbstractFileSystem, root: str) -> dict[str, tuple[int, int, int]]:
    """Per source file: (documents, chunks, characters), aggregated while streaming three columns."""
    dataset = _chunk_dataset(fs, root)
    if dataset is None:
        return {}
    is_first = pc.equal(pc.field("chunk_index"), 0).cast(pa.int64())
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("scan", acero.ScanNodeOptions(dataset, columns=["source", "chunk_index", "char_count"])),
            acero.Declaration(
                "project",
                acero.ProjectNodeOptions(
                    [pc.field("source"), is_first, pc.field("char_count").cast(pa.int64())],
                    ["source", "first", "chars"],
                ),
            ),
            acero.Declaration(
                "aggregate",
                acero.AggregateNodeOptions(
                    [
                        ("first", "hash_sum", None, "documents"),
                        ([], "hash_count_all", None, "chunks"),
                        ("chars", "hash_sum", None, "characters"),
                    ],
                    keys=["source"],
                ),
            ),
        ]
    )
    return {row["source"]: (row["documents"], row["chunks"], row["characters"]) for row in plan.to_table().to_pylist()}


def read_rejects(fs: fsspec.AbstractFileSystem, root: str) -> tuple[dict[str, int], tuple[RejectedFile, ...]]:
    """Rejected records by reason, and by file (most rejects first), from ``_rejects/`` (absent when none)."""
    files = _parquet_files(fs, posixpath.join(root, REJECTS_DIR, f"*{REJECT_SUFFIX}"))
    if not files:
        return {}, ()
    table = ds.dataset(files, filesystem=fs, format="parquet").to_table(
        columns=["source", "record", "reason", "message"]
    )
    by_reason: Counter[str] = Counter()
    by_file: dict[str, tuple[Counter[str], tuple[int, str]]] = {}
    for row in table.to_pylist():
        by_reason[row["reason"]] += 1
        reasons, first = by_file.setdefault(row["source"], (Counter(), (row["record"], row["message"])))
        reasons[row["reason"]] += 1
        by_file[row["source"]] = (reasons, min(first, (row["record"], row["message"])))
    rejected = [
        RejectedFile(source, sum(reasons.values()), dict(_most_first(reasons)), first[1])
        for source, (reasons, first) in by_file.items()
    ]
    return dict(_most_first(by_reason)), tuple(sorted(rejected, key=lambda f: (-f.rejects, f.source)))


def _most_first(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def read_samples(fs: fsspec.AbstractFileSystem, root: str, per_bucket: int = SAMPLES_PER_BUCKET) -> tuple[Sample, ...]:
    """From the first rows of the first file of each bucket, the first chunk of ``per_bucket`` documents.

    Cheap (one batch of one file a bucket) and the same on every call.
    """
    columns = ["source", "record", "chunk_index", "language", "char_count", "text"]
    samples: list[Sample] = []
    for folder in sorted(fs.glob(posixpath.join(root, f"{PARTITION_COLUMN}=*")), key=_bucket_of):
        files = _parquet_files(fs, posixpath.join(folder, f"*{CHUNK_SUFFIX}"))
        if not files:
            continue
        with fs.open(files[0], "rb") as f:
            parquet = pq.ParquetFile(f)
            if "text" not in parquet.schema_arrow.names:
                continue
            batch = next(parquet.iter_batches(batch_size=_SAMPLE_SCAN_ROWS, columns=columns), None)
        documents: dict[tuple[str, int], dict[str, Any]] = {}
        for row in [] if batch is None else batch.to_pylist():
            documents.setdefault((row["source"], row["record"]), row)  # one chunk a document, for variety
        rows = list(documents.values())[:per_bucket]
        samples += [Sample(_bucket_of(folder), **{**row, "text": _cut(row["text"])}) for row in rows]
    return tuple(samples)


def _bucket_of(folder: str) -> int:
    return int(folder.rstrip("/").rsplit("=", 1)[-1])


def _cut(text: str) -> str:
    return text if len(text) <= SAMPLE_CHARS else text[:SAMPLE_CHARS].rstrip() + "…"


def load_report(url: str) -> Report:
    """Read a finished output; ``OutputError`` if it is missing or unfinished."""
    fs, root = open_output(url)
    rejects, rejected_files = read_rejects(fs, root)
    chunked = scan_sources(fs, root)
    rejected = {f.source: f.rejects for f in rejected_files}
    sources = [
        SourceCounts(source, *chunked.get(source, (0, 0, 0)), rejected.get(source, 0))
        for source in set(chunked) | set(rejected)
    ]
    return Report(
        output=url,
        manifest=read_manifest(fs, root),
        groups=scan_chunks(fs, root),
        rejects=rejects,
        sources=tuple(sorted(sources, key=lambda s: (-s.chunks, -s.rejects, s.source))),
        rejected_files=rejected_files,
        samples=read_samples(fs, root),
    )


# Rows shared by the text and HTML renderings

BUCKET_HEADERS = ("bucket", "density", "documents", "chunks", "characters", *SIZE_HEADERS)
LANGUAGE_HEADERS = ("language", "documents", "chunks", "% of chunks")
REJECT_HEADERS = ("reason", "records")


def bucket_rows(report: Report) -> list[list[object]]:
    """One row per non-empty bucket, then the ``all`` row with the overall percentiles."""
    rows: list[list[object]] = []
    for bucket in report.buckets():
        s = report.stats(bucket=bucket)
        rows.append([bucket, bucket_label(bucket, report.bucket_width), s.documents, s.chunks, s.characters, *s.sizes])
    total = report.stats()
    rows.append(["all", "", total.documents, total.chunks, total.characters, *total.sizes])
    return rows


def language_rows(report: Report) -> list[list[object]]:
    chunks = report.stats().chunks
    return [[name, s.documents, s.chunks, 100 * s.chunks / chunks] for name, s in report.languages()]


def reject_rows(report: Report) -> list[list[object]]:
    return [[reason, n] for reason, n in report.rejects.items()]


SOURCE_HEADERS = ("source", "documents", "chunks", "characters", "rejects")
REJECTED_FILE_HEADERS = ("source", "rejects", "reasons", "first message")


def source_rows(report: Report) -> list[list[object]]:
    """The ``MAX_LISTED`` sources with the most chunks, then one row summing the others."""
    rows: list[list[object]] = [list(s) for s in report.sources[:MAX_LISTED]]
    rest = report.sources[MAX_LISTED:]
    if rest:
        totals = [sum(getattr(s, name) for s in rest) for name in SOURCE_HEADERS[1:]]
        rows.append([f"… {len(rest):,} more sources", *totals])
    return rows


def rejected_file_rows(report: Report) -> list[list[object]]:
    """The ``MAX_LISTED`` files with the most rejects, then one row summing the others."""
    rows: list[list[object]] = [
        [f.source, f.rejects, ", ".join(f"{reason} {n:,}" for reason, n in f.reasons.items()), f.message]
        for f in report.rejected_files[:MAX_LISTED]
    ]
    rest = report.rejected_files[MAX_LISTED:]
    if rest:
        rows.append([f"… {len(rest):,} more files", sum(f.rejects for f in rest), "", ""])
    return rows


def sample_heading(sample: Sample, bucket_width: float) -> str:
    return (
        f"bucket {sample.bucket} ({bucket_label(sample.bucket, bucket_width)}) · {sample.source}"
        f"{f' · record {sample.record}' if sample.record else ''} · chunk {sample.chunk_index}"
        f" · {sample.language} · {sample.char_count:,} characters"
    )


def headline(report: Report) -> list[tuple[str, object]]:
    """The run at a glance: counts from the manifest where the data cannot tell (records read)."""
    counts = report.manifest.get("counts", {})
    total = report.stats()
    return [
        ("records read", counts.get("records_read")),
        ("documents chunked", total.documents),
        ("rejected", sum(report.rejects.values())),
        ("chunks", total.chunks),
        ("characters", total.characters),
    ]


def provenance(report: Report) -> str:
    """Fingerprint, finish time and version: which settings and code produced the output."""
    manifest = report.manifest
    timings, versions = manifest.get("timings", {}), manifest.get("versions", {})
    parts = [
        f"fingerprint {manifest['fingerprint']}" if manifest.get("fingerprint") else "",
        f"finished {timings['finished']}" if timings.get("finished") else "",
        f"took {timings['seconds']:,} s" if timings.get("seconds") is not None else "",
        f"zerda {versions['zerda']}" if versions.get("zerda") else "",
    ]
    return " · ".join(part for part in parts if part)


# Text


def _section(title: str, body: str) -> str:
    return f"{title}\n{body}"


def render_text(report: Report) -> str:
    """The terminal report."""
    glance = " · ".join(f"{name} {format_cell(value)}" for name, value in headline(report))
    title = [f"zerda report · {report.output}", provenance(report), glance]
    sections = [
        "\n".join(line for line in title if line),
        _section("Chunks by density bucket (sizes in characters)", render_table(BUCKET_HEADERS, bucket_rows(report))),
        _section(
            "Density histogram (chunks per bucket)",
            render_histogram(report.chunks_by_bucket(), HISTOGRAM_WIDTH, bucket_width=report.bucket_width),
        ),
        _section("Languages", render_table(LANGUAGE_HEADERS, language_rows(report)) if report.groups else "(none)"),
        _section(
            "Rejects by reason", render_table(REJECT_HEADERS, reject_rows(report)) if report.rejects else "(none)"
        ),
        _section("Sources", render_table(SOURCE_HEADERS, source_rows(report)) if report.sources else "(none)"),
        _section(
            "Rejects by file",
            render_table(REJECTED_FILE_HEADERS, rejected_file_rows(report)) if report.rejected_files else "(none)",
        ),
        _section("Sample chunks", _text_samples(report) or "(none)"),
    ]
    return "\n\n".join(sections) + "\n"


def _text_samples(report: Report) -> str:
    return "\n".join(
        f"{sample_heading(sample, report.bucket_width)}\n    {' ⏎ '.join(filter(str.strip, sample.text.splitlines()))}"
        for sample in report.samples
    )


# HTML

_CSS = """
:root { --ink: #1f2430; --muted: #6b7280; --line: #e5e7eb; --panel: #ffffff; --page: #f4f5f7; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--page); color: var(--ink);
       font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; }
main { max-width: 1080px; margin: 0 auto; padding: 28px 24px 40px; }
h1 { font-size: 24px; margin: 0 0 2px; }
h1 span { color: var(--muted); font-weight: 400; }
h2 { font-size: 16px; margin: 0 0 12px; }
.meta { color: var(--muted); font-size: 13px; margin: 0 0 18px; overflow-wrap: anywhere; }
.cards { display: grid; grid-template-columns: repeat(5, 1fr); gap: 12px; margin-bottom: 16px; }
.card, section { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; }
.card { padding: 12px 16px; }
.card b { display: block; font-size: 22px; font-variant-numeric: tabular-nums; }
.card small { color: var(--muted); text-transform: uppercase; letter-spacing: .04em; font-size: 11px; }
section { padding: 18px 20px; margin-bottom: 16px; }
.row { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.row { margin-bottom: 16px; }
.row section { margin-bottom: 0; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { text-align: left; color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; }
td.num, th.num { text-align: right; }
tr.total td { font-weight: 600; border-bottom: none; border-top: 2px solid var(--line); }
.empty { color: var(--muted); margin: 0; }
td { max-width: 420px; overflow: hidden; text-overflow: ellipsis; }
.sample { margin: 0 0 14px; }
.sample figcaption { margin: 0 0 4px; }
.sample blockquote { margin: 0; padding: 8px 12px; border-left: 3px solid var(--line); white-space: pre-wrap;
                     overflow-wrap: anywhere; font-size: 13px; }
svg text { font-family: inherit; }
"""

_SVG_WIDTH, _SVG_HEIGHT = 1000, 260
_PLOT_LEFT, _PLOT_RIGHT, _PLOT_TOP, _PLOT_BOTTOM = 64, 16, 24, 52
_MAX_LABELS = 12  # more labels than this would overlap: then density labels thin out, counts move to tooltips
# Narrative (low density) to dense (high density): the bars' colour follows the bucket's density, through
# stops picked so the blend between neighbours never turns grey.
_COLOUR_STOPS = ((232, 163, 61), (58, 157, 143), (59, 77, 156))


def _density_colour(fraction: float) -> str:
    """The colour at ``fraction`` (0..1) along the stops, as ``#rrggbb``."""
    position = fraction * (len(_COLOUR_STOPS) - 1)
    i = min(int(position), len(_COLOUR_STOPS) - 2)
    low, high, t = _COLOUR_STOPS[i], _COLOUR_STOPS[i + 1], position - i
    r, g, b = (round(lo + (hi - lo) * t) for lo, hi in zip(low, high, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def _axis_ticks(largest: int) -> list[int]:
    """Round tick values (1, 2 or 5 × 10^k apart) from 0 to at least ``largest``, about five of them."""
    raw = max(largest, 1) / 5
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return list(range(0, math.ceil(max(largest, 1) / step) * step + 1, step))


def render_svg_histogram(counts_by_bucket: Mapping[int, int], bucket_width: float) -> str:
    """Chunks per density bucket as inline SVG columns, from the lowest to the highest non-empty bucket."""
    if not counts_by_bucket:
        return '<p class="empty">No chunks.</p>'
    buckets = range(min(counts_by_bucket), max(counts_by_bucket) + 1)
    ticks = _axis_ticks(max(counts_by_bucket.values()))
    plot_w = _SVG_WIDTH - _PLOT_LEFT - _PLOT_RIGHT
    plot_h = _SVG_HEIGHT - _PLOT_TOP - _PLOT_BOTTOM
    base = _PLOT_TOP + plot_h
    slot = plot_w / len(buckets)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_SVG_WIDTH} {_SVG_HEIGHT}" width="100%" role="img"'
        ' aria-label="Chunks per density bucket">'
    ]
    for tick in ticks:
        y = base - plot_h * tick / ticks[-1]
        parts.append(
            f'<line x1="{_PLOT_LEFT}" x2="{_SVG_WIDTH - _PLOT_RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text x="{_PLOT_LEFT - 8}" y="{y + 4:.1f}" text-anchor="end" font-size="12" fill="#6b7280">'
            f"{tick:,}</text>"
        )
    last = max(n_buckets(bucket_width) - 1, 1)
    label_every = math.ceil(len(buckets) / _MAX_LABELS)
    for i, bucket in enumerate(buckets):
        count, label = counts_by_bucket.get(bucket, 0), bucket_label(bucket, bucket_width)
        height = plot_h * count / ticks[-1]
        x, bar_w, centre = _PLOT_LEFT + i * slot + slot * 0.12, slot * 0.76, _PLOT_LEFT + (i + 0.5) * slot
        parts.append(
            f'<rect x="{x:.1f}" y="{base - height:.1f}" width="{bar_w:.1f}" height="{height:.1f}" rx="3"'
            f' fill="{_density_colour(bucket / last)}"><title>{label}: {count:,} chunks</title></rect>'
        )
        if label_every == 1:
            parts.append(
                f'<text x="{centre:.1f}" y="{base - height - 6:.1f}" text-anchor="middle" font-size="12"'
                f' font-weight="600" fill="{"#1f2430" if count else "#9ca3af"}">{count:,}</text>'
            )
        if i % label_every == 0:
            parts.append(
                f'<text x="{centre:.1f}" y="{base + 18:.1f}" text-anchor="middle" font-size="12" fill="#1f2430">'
                f"{label}</text>"
            )
    parts.append(
        f'<line x1="{_PLOT_LEFT}" x2="{_SVG_WIDTH - _PLOT_RIGHT}" y1="{base}" y2="{base}" stroke="#9ca3af"/>'
        f'<text x="{_PLOT_LEFT + plot_w / 2:.1f}" y="{_SVG_HEIGHT - 8}" text-anchor="middle" font-size="12"'
        ' fill="#6b7280">density (0 = narrative, 1 = dense technical text)</text></svg>'
    )
    return "".join(parts)


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, total_row: bool = False) -> str:
    """An HTML table; numeric columns right-aligned, the last row styled as a total when ``total_row``."""
    if not rows:
        return '<p class="empty">None.</p>'
    numeric = [any(is_numeric(row[i]) for row in rows) for i in range(len(headers))]

    def cells(tag: str, values: Sequence[object]) -> str:
        return "".join(
            f"<{tag}{' class=num' if right else ''}>{html.escape(format_cell(value))}</{tag}>"
            for value, right in zip(values, numeric, strict=True)
        )

    body = [
        f"<tr{' class=total' if total_row and i == len(rows) - 1 else ''}>{cells('td', row)}</tr>"
        for i, row in enumerate(rows)
    ]
    return f"<table><thead><tr>{cells('th', headers)}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(report: Report) -> str:
    """A self-contained page: inline CSS and SVG, no scripts, nothing fetched."""
    cards = "".join(
        f"<div class=card><small>{html.escape(name)}</small><b>{html.escape(format_cell(value))}</b></div>"
        for name, value in headline(report)
    )
    histogram = render_svg_histogram(report.chunks_by_bucket(), report.bucket_width)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>zerda report · {html.escape(report.output)}</title>
<style>{_CSS}</style></head>
<body><main>
<h1>zerda report <span>· {html.escape(report.output)}</span></h1>
<p class=meta>{html.escape(provenance(report))}</p>
<div class=cards>{cards}</div>
<section><h2>Chunks per density bucket</h2>{histogram}</section>
<section><h2>Buckets <span class=meta>(sizes in characters)</span></h2>
{_html_table(BUCKET_HEADERS, bucket_rows(report), total_row=True)}</section>
<div class=row>
<section><h2>Languages</h2>{_html_table(LANGUAGE_HEADERS, language_rows(report))}</section>
<section><h2>Rejects by reason</h2>{_html_table(REJECT_HEADERS, reject_rows(report))}</section>
</div>
<section><h2>Sources</h2>{_html_table(SOURCE_HEADERS, source_rows(report))}</section>
<section><h2>Rejects by file</h2>{_html_table(REJECTED_FILE_HEADERS, rejected_file_rows(report))}</section>
<section><h2>Sample chunks</h2>{_html_samples(report)}</section>
</main></body></html>
"""


def _html_samples(report: Report) -> str:
    if not report.samples:
        return '<p class="empty">None.</p>'
    return "".join(
        f"<figure class=sample><figcaption class=meta>{html.escape(sample_heading(sample, report.bucket_width))}"
        f'</figcaption><blockquote dir="auto">{html.escape(sample.text)}</blockquote></figure>'
        for sample in report.samples
    )


# Command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="zerda-report", description="Summarise a finished zerda output: buckets, sizes, languages, rejects."
    )
    parser.add_argument("output", help="the pipeline's OUTPUT: a local path or fsspec URL (s3://, gs://, ...)")
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page (path or fsspec URL)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report (and write the page); exit code 2 when there is no finished output."""
    args = parse_args(argv)
    try:
        report = load_report(args.output)
    except OutputError as err:
        print(f"zerda-report: {err}", file=sys.stderr)
        return EXIT_REFUSED
    write_stdout(render_text(report))
    if args.html:
        with fsspec.open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html(report))
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
