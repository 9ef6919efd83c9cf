"""What ``zerda-eval`` hands back: a summary (the JSON file), a terminal table, and a self-contained HTML page.

Every mean over questions carries its 95% bootstrap interval (:func:`pipelines.evaluation.metrics.bootstrap`),
drawn with one seed for all settings, so settings are compared on the same resamples. The page draws recall
against the budget (characters or tokens) as inline SVG, one line per splitter, with its interval as a band: no script,
no external file.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.evaluation.evaluate import Result
from pipelines.evaluation.metrics import bootstrap
from pipelines.evaluation.questions import Unlocated
from pipelines.terminal_table import format_cell, render_table

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _interval(values: Sequence[float], seed: int, resamples: int) -> dict[str, float]:
    got = bootstrap(values, seed, resamples)
    return {"mean": round(got.mean, 6), "low": round(got.low, 6), "high": round(got.high, 6)}


def summarise(
    results: Sequence[Result],
    corpus: Mapping[str, Any],
    unlocated: Sequence[Unlocated],
    seed: int,
    resamples: int,
    retrievers: Mapping[str, str],
    budget: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The whole evaluation as plain data: the corpus, the settings, and per (splitter, retriever) every score.

    ``budget`` says what the budgets count: ``{"unit": "characters" or "tokens", "tokenizer": its spec}``.
    """
    ks = sorted({k for r in results for k in r.at_k})
    budgets = sorted({b for r in results for b in r.at_budget})
    splitters: dict[str, dict[str, Any]] = {}
    rows = []
    for r in results:
        splitters.setdefault(
            r.splitter.name,
            {
                "name": r.splitter.name,
                "family": r.splitter.family,
                "version": r.splitter.version,
                "chunks": r.chunks,
                "mean_chars": round(r.mean_chars, 1),
            },
        )
        at_k = {
            str(k): {
                metric: _interval([getattr(s, metric) for s in scores], seed, resamples)
                for metric in ("recall", "precision", "iou")
            }
            for k, scores in r.at_k.items()
        }
        at_budget = {str(b): _interval(values, seed, resamples) for b, values in r.at_budget.items()}
        rows.append(
            {"splitter": r.splitter.name, "retriever": r.retriever, "at_k": at_k, "recall_at_budget": at_budget}
        )
    return {
        "corpus": dict(corpus),
        "unlocated": [{"line": u.line, "question": u.query, "reason": u.reason} for u in unlocated],
        "k": ks,
        "budgets": budgets,
        "budget_unit": dict(budget or {"unit": "characters", "tokenizer": None}),
        "bootstrap": {"resamples": resamples, "seed": seed, "interval": 0.95},
        "retrievers": dict(retrievers),
        "splitters": list(splitters.values()),
        "results": rows,
    }


def _unit(summary: Mapping[str, Any], short: bool = False) -> str:
    """What the budgets count: ``chars`` (``short``) or ``character``, else ``tokens`` or ``token``."""
    tokens = summary["budget_unit"]["unit"] == "tokens"
    if short:
        return "tokens" if tokens else "chars"
    return "token" if tokens else "character"


def _cell(value: Mapping[str, float]) -> str:
    return f"{value['mean']:.3f} ({value['low']:.2f}–{value['high']:.2f})"


def _score_table(summary: Mapping[str, Any], retriever: str) -> tuple[list[str], list[list[object]]]:
    """One retriever's table, for the terminal and the page alike: a row per splitter, its chunks, the scores
    at each k and recall at each budget, each with its interval."""
    splitters = {s["name"]: s for s in summary["splitters"]}
    head = ["splitter", "chunks", "mean chars"]
    head += [f"{m}@{k}" for k in summary["k"] for m in ("R", "P", "IoU")]
    unit = _unit(summary, short=True)
    head += [f"R@{b:,} {unit}" for b in summary["budgets"]]
    rows = []
    for row in (r for r in summary["results"] if r["retriever"] == retriever):
        s = splitters[row["splitter"]]
        cells: list[object] = [s["name"], s["chunks"], round(s["mean_chars"])]
        for k in summary["k"]:
            cells += [_cell(row["at_k"][str(k)][m]) for m in ("recall", "precision", "iou")]
        cells += [_cell(row["recall_at_budget"][str(b)]) for b in summary["budgets"]]
        rows.append(cells)
    return head, rows


def render_text(summary: Mapping[str, Any]) -> str:
    """One table per retriever: a row per splitter, scores at k and recall at each budget, with intervals."""
    corpus = summary["corpus"]
    parts = [
        f"{corpus['documents']:,} documents, {corpus['characters']:,} characters;"
        f" {corpus['questions']:,} questions scored, {len(summary['unlocated']):,} not located."
        " Means with 95% bootstrap intervals over the questions.",
    ]
    for u in summary["unlocated"]:
        parts.append(f"  not located, line {u['line']}: {u['question'][:60]!r}: {u['reason']}")
    for retriever in summary["retrievers"]:
        head, rows = _score_table(summary, retriever)
        parts += ["", f"{retriever}:", render_table(head, rows)]
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- the HTML page

_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 560, 320, 48, 16, 16, 40


def _plot(summary: Mapping[str, Any], retriever: str) -> str:
    """Recall against budget for one retriever, one line (and interval band) per splitter, as inline SVG."""
    budgets: list[int] = summary["budgets"]
    rows = [r for r in summary["results"] if r["retriever"] == retriever]
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(index: int) -> float:
        return _LEFT + (width * index / (len(budgets) - 1) if len(budgets) > 1 else width / 2)

    def y(value: float) -> float:
        return _TOP + height * (1 - value)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img"'
        f' aria-label="recall against {_unit(summary)} budget, {html.escape(retriever)}">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{width}" height="{height}" fill="none" stroke="#999"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + width}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="11">{tick:.2f}</text>')
    for i, budget in enumerate(budgets):
        out.append(
            f'<text x="{x(i):.1f}" y="{_TOP + height + 16}" text-anchor="middle" font-size="11">{budget:,}</text>'
        )
    out.append(
        f'<text x="{_LEFT + width / 2}" y="{_H - 4}" text-anchor="middle" font-size="12">{_unit(summary)} budget</text>'
    )
    for n, row in enumerate(rows):
        colour = COLOURS[n % len(COLOURS)]
        points = [row["recall_at_budget"][str(b)] for b in budgets]
        upper = [f"{x(i):.1f},{y(p['high']):.1f}" for i, p in enumerate(points)]
        lower = [f"{x(i):.1f},{y(p['low']):.1f}" for i, p in reversed(list(enumerate(points)))]
        out.append(f'<polygon points="{" ".join(upper + lower)}" fill="{colour}" fill-opacity="0.12" stroke="none"/>')
        line = " ".join(f"{x(i):.1f},{y(p['mean']):.1f}" for i, p in enumerate(points))
        name = html.escape(row["splitter"])
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"><title>{name}</title>')
        out.append("</polyline>")
        for i, p in enumerate(points):
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(p["mean"]):.1f}" r="3" fill="{colour}"/>')
    out.append("</svg>")
    return "\n".join(out)


def _legend(summary: Mapping[str, Any], retriever: str) -> str:
    rows = [r for r in summary["results"] if r["retriever"] == retriever]
    items = [
        f'<li><span class="swatch" style="background:{COLOURS[n % len(COLOURS)]}"></span>'
        f"{html.escape(row['splitter'])}</li>"
        for n, row in enumerate(rows)
    ]
    return '<ul class="legend">' + "".join(items) + "</ul>"


def _table(summary: Mapping[str, Any], retriever: str) -> str:
    head, rows = _score_table(summary, retriever)
    lines = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    lines += ["<tr>" + "".join(f"<td>{html.escape(format_cell(c))}</td>" for c in cells) + "</tr>" for cells in rows]
    return "\n".join([*lines, "</table>"])


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;font-size:0.85em;margin:1em 0}td,th{border:1px solid #ccc;padding:0.2em 0.5em}
td:not(:first-child){text-align:right;font-variant-numeric:tabular-nums}
.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:0.3em 1.2em;font-size:0.85em}
.swatch{display:inline-block;width:1em;height:0.6em;margin-right:0.4em}"""


def _tokenizer_note(summary: Mapping[str, Any]) -> str:
    spec = summary["budget_unit"]["tokenizer"]
    return "" if spec is None else f" (tokens of {html.escape(spec)})"


def render_html(summary: Mapping[str, Any]) -> str:
    """The page: the corpus, the questions not located, and per retriever a recall-vs-budget plot and the table."""
    corpus = summary["corpus"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="zerda-eval">',
        f"<title>zerda-eval</title><style>{_STYLE}</style></head><body>",
        "<h1>Chunk quality: zerda-eval</h1>",
        f"<p>{corpus['documents']:,} documents, {corpus['characters']:,} characters; {corpus['questions']:,}"
        f" questions scored, {len(summary['unlocated']):,} not located. Means with 95% bootstrap intervals"
        f" ({summary['bootstrap']['resamples']:,} resamples of the questions,"
        f" seed {summary['bootstrap']['seed']}).</p>",
    ]
    if summary["unlocated"]:
        parts.append("<h2>Questions not located</h2><ul>")
        parts += [
            f"<li>line {u['line']}: {html.escape(u['question'])}: {html.escape(u['reason'])}</li>"
            for u in summary["unlocated"]
        ]
        parts.append("</ul>")
    for retriever, version in summary["retrievers"].items():
        parts += [
            f"<h2>{html.escape(retriever)}</h2>",
            f"<p>{html.escape(version)}. Recall when the ranked chunks are read up to each {_unit(summary)} budget"
            f"{_tokenizer_note(summary)}.</p>",
            _plot(summary, retriever),
            _legend(summary, retriever),
            _table(summary, retriever),
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
