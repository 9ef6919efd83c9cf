"""Every benchmark script `make bench` runs starts: its imports resolve and its options parse.

`make bench` is not in CI (it takes an hour and needs the bench extra), so a module moved or renamed
elsewhere would otherwise break it unseen.
"""

from __future__ import annotations

import re
import subprocess
import sys

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
