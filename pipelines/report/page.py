"""The HTML rendering of a report: one self-contained page, inline CSS and SVG, nothing fetched."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

from pipelines.output.layout import n_buckets
from pipelines.report.model import Report
from pipelines.report.rows import (
    BUCKET_HEADERS,
    LANGUAGE_HEADERS,
    REJECT_HEADERS,
    REJECTED_FILE_HEADERS,
    SOURCE_HEADERS,
    bucket_rows,
    headline,
    language_rows,
    provenance,
    reject_rows,
    rejected_file_rows,
    sample_heading,
    source_rows,
)
from pipelines.terminal_table import bucket_label, format_cell, is_numeric

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


GENERATOR = "zerda-report"  # in every page's head: what --html may overwrite without --force


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
<meta name="generator" content="{GENERATOR}">
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
