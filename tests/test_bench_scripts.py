"""Every benchmark script `make bench` runs starts: its imports resolve and its options parse.

`make bench` is not in CI (it takes an hour and needs the bench extra), so a module moved or renamed
elsewhere would otherwise break it unseen.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.common import DATA, REPO

SCRIPTS = sorted(set(re.findall(r"benchmarks/(bench_\w+)\.py", (REPO / "Makefile").read_text(encoding="utf-8"))))


def test_make_bench_runs_every_benchmark_script() -> None:
    assert sorted(SCRIPTS) == sorted(p.stem for p in (REPO / "benchmarks").glob("bench_*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_script_starts(script: str) -> None:
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}.py", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_bench_memory_builds_an_output_zerda_carries(tmp_path: Path) -> None:
    """bench_memory.py writes its previous output directly, not by zerda: zerda must take it as its own
    (``read_previous`` says carry) and carry every document and file of it when nothing changed."""
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_memory.py",
            *("--docs", "300", "--files", "3", "--check", "--scratch"),
            tmp_path,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'documents_unchanged': 300" in done.stdout and "'files_unchanged': 3" in done.stdout


def test_the_cost_per_chunk_times_zerda_at_fixed_and_at_its_own_sizes() -> None:
    """bench_chunker's cost per chunk: a row per chunker and pair of settings, the second about twice the chunks."""
    from benchmarks.bench_chunker import Corpus, bench_chunk_cost, cost_runs
    from benchmarks.tools import Sizes, zerda_tool

    text = (DATA / "english_prose.txt").read_text(encoding="utf-8")
    data = Corpus("prose", ["\n\n".join([text] * 8)] * 2, "tests/data", real=True, budgets=[(0, 0)] * 2)
    rows = bench_chunk_cost(data, cost_runs([zerda_tool(Sizes())]), reps=2, max_bytes=10**6, seed=1)
    assert [row.tool for row in rows] == ["zerda AdaptiveChunker", "zerda AdaptiveChunker, own sizing"]
    for row in rows:
        assert 1.5 <= row.chunks[1] / row.chunks[0] <= 3, row
        assert all(len(times) == 2 and min(times) > 0 for times in row.seconds), row
