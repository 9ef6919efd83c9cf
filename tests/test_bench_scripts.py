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

from tests.common import REPO

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
