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


def test_bench_memory_reports_flink_beside_the_direct_runner() -> None:
    """--runner flink's report: each process's peak on both runners at both sizes, the ratios, and a Flink run
    that failed named with its error, its figures up to then kept (no cluster is started here)."""
    from benchmarks.bench_memory import ProcessPeak, RunFigures, SizeResult, flink_report

    def figures(wall: float, peaks: dict[str, list[int]], error: str = "") -> RunFigures:
        processes = [ProcessPeak(i, role, mib * 1024) for i, (role, p) in enumerate(peaks.items()) for mib in p]
        changes = {"documents_changed": 100, "files_unchanged": 9}
        return RunFigures(wall, 1.0, 1024, processes, {"changes": changes} if not error else {}, error)

    def size(docs: int, scale: int, error: str = "") -> SizeResult:
        direct = figures(10.0 * scale, {"launcher": [200 * scale], "worker": [300, 310 * scale]})
        flink = figures(
            30.0 * scale,
            {"launcher": [190], "job server": [400], "worker": [250, 240, 230], "TaskManager": [700, 710 * scale]},
            error,
        )
        return SizeResult(docs, 10, 1.0, 5.0, 1, 100, direct, [(1.0, 1024)], flink, 20.0)

    text = flink_report(["--runner", "flink"], [size(1000, 1), size(4000, 2, "exited 1: Boom")])
    assert "by `python benchmarks/bench_memory.py --runner flink`" in text
    assert "| process | DirectRunner 1,000 | DirectRunner 4,000 | ratio | Flink 1,000 | Flink 4,000 | ratio |" in text
    assert "| launcher | 200 | 400 | 2.00x | 190 | 190 | 1.00x |" in text
    assert "| job server | — | — | — | 400 | 400 | 1.00x |" in text
    assert "| worker #1 | 310 | 620 | 2.00x | 250 | 250 | 1.00x |" in text
    assert "worker #3" not in text, "the largest two of a role"
    assert "| worker processes started (count) | 2 | 2 | 1.00x | 3 | 3 | 1.00x |" in text
    assert "| TaskManager #1 | — | — | — | 710 | 1,420 | 2.00x |" in text
    assert "| 4,000 | 10 | 5 | 1 | 100 | 9 | 20.0 | 60.0 (failed) | 20.0 |" in text
    assert "On Flink at 4,000 documents the run failed: exited 1: Boom" in text


@pytest.mark.flink
def test_bench_memory_runs_the_job_on_flink(tmp_path: Path) -> None:
    """bench_memory.py --runner flink end to end at a small size: a cluster started and stopped for each size,
    the job's manifest checked on both runners, every Flink process measured."""
    results = tmp_path / "flink.md"
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_memory.py",
            *("--runner", "flink", "--docs", "600,2400", "--files", "3", "--launch-probes", "0"),
            *("--scratch", str(tmp_path), "--results", str(results)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = results.read_text(encoding="utf-8")
    for role in ("launcher", "job server", "worker #1", "worker pool", "JobManager", "TaskManager #2"):
        assert f"| {role} |" in text
    assert "failed" not in text
