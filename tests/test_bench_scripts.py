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


def test_bench_memory_reports_flink_beside_the_direct_runner() -> None:
    """--runner flink's report: each process's peak on both runners at both sizes, the ratios, and a Flink run
    that failed named with its error, its figures up to then kept (no cluster is started here)."""
    from benchmarks.bench_memory import ProcessPeak, RunFigures, SizeResult, flink_report

    def figures(wall: float, peaks: dict[str, list[int]], error: str = "") -> RunFigures:
        processes = [ProcessPeak(i, role, mib * 1024) for i, (role, p) in enumerate(peaks.items()) for mib in p]
        changes = {"documents_changed": 100, "files_unchanged": 9}
        return RunFigures(wall, 1.0, 1024, 0.5, processes, {"changes": changes} if not error else {}, error)

    def size(docs: int, scale: int, error: str = "") -> SizeResult:
        direct = figures(10.0 * scale, {"launcher": [200 * scale], "worker": [300, 310 * scale]})
        flink = figures(
            30.0 * scale,
            {"launcher": [190], "job server": [400], "worker": [250, 240, 230], "TaskManager": [700, 710 * scale]},
            error,
        )
        return SizeResult(docs, 10, 1.0, 5.0, 1, 100, direct, [(1.0, 1024, 0.5)], flink, 20.0)

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


def test_retrieval_targets_pair_zerda_with_the_best_peer_per_cell() -> None:
    """The target table: zerda's best setting per corpus family beside each cell's best peer, with a paired
    bootstrap interval of the difference; met at or above the peer, within when the interval holds 0."""
    from benchmarks import bench_retrieval as bench
    from pipelines.evaluation.evaluate import Result
    from pipelines.evaluation.splitters import Splitter

    def row(corpus: str, name: str, family: str, recalls: list[float]) -> Result:
        splitter = Splitter(name, family, "-", lambda number, text: ([], None))
        return Result(corpus, "BM25", splitter, 1, 1.0, {}, {b: recalls for b in bench.BUDGETS})

    rows = [
        row("handbook-en", "zerda a", "zerda", [1.0, 1.0, 1.0, 1.0]),
        row("handbook-en", "zerda b", "zerda", [0.5, 0.5, 0.5, 0.4]),
        row("handbook-en", "fixed 512", "fixed", [1.0, 0.0, 1.0, 0.0]),
        row("handbook-en", "langchain 512", "langchain", [0.0, 0.0, 0.0, 0.0]),
        row("handbook-ar", "zerda a", "zerda", [0.0, 0.0, 0.0, 0.0]),
        row("handbook-ar", "zerda b", "zerda", [0.3, 0.3, 0.3, 0.2]),
        row("handbook-ar", "fixed 512", "fixed", [0.3, 0.3, 0.3, 0.3]),
        row("handbook-ar", "langchain 512", "langchain", [0.0, 0.0, 0.0, 0.0]),
    ]
    assert bench.family("handbook-ar") == bench.family("handbook-en") != bench.family("python-docs")
    a = bench.setting_cells(rows, seed=0)[("handbook", "zerda a")]
    assert a[0].peer.splitter.name == "fixed 512" and a[0].delta == 0.5 and a[0].verdict == "met"
    ar = a[len(bench.BUDGETS)]
    assert ar.delta == pytest.approx(-0.3) and ar.low == ar.high == pytest.approx(-0.3) and ar.verdict == "missed"
    assert "1 missed (handbook-ar BM25 1k)" in bench.target_summary(a[: len(bench.BUDGETS) + 1])
    # zerda a has the higher mean recall (0.5 against 0.375) but misses handbook-ar; b is within everywhere.
    # A setting ranked by a heading path is never the best: the question is its own heading.
    context = next(name for name, settings in bench.ZERDA_CONFIGS.items() if "embed_text" in settings)
    ranked_with_headings = [row(corpus, context, "zerda", [1.0] * 4) for corpus in ("handbook-en", "handbook-ar")]
    best, cells = bench.target_cells(rows + ranked_with_headings, seed=0)
    assert best == {"handbook": "zerda b"} and len(cells) == 2 * len(bench.BUDGETS)
    assert all(c.zerda.splitter.name == "zerda b" and c.low <= c.delta < 0 <= c.high for c in cells)
    assert {c.verdict for c in cells} == {"within"}


def test_the_retrieval_preset_is_the_setting_the_benchmark_measures() -> None:
    """configs/retrieval.yaml cites the benchmark's figures for one of its settings: that setting, key for key."""
    from benchmarks import bench_retrieval as bench
    from pipelines.settings import ChunkingSettings, load_settings

    preset = load_settings(REPO / "configs" / "retrieval.yaml")
    measured = bench.ZERDA_CONFIGS["zerda (document density, sizes 600-1600, heading path in the ranked text)"]
    chunking = {key: value for key, value in measured.items() if key != "embed_text"}
    assert preset.chunking == ChunkingSettings(**chunking)
    assert preset.output.embed_text == measured["embed_text"]


def test_retrieval_sizing_lines_set_each_setting_beside_the_fixed_target() -> None:
    from benchmarks import bench_retrieval as bench
    from pipelines.evaluation.evaluate import Result
    from pipelines.evaluation.splitters import Splitter

    def row(name: str, recalls: list[float]) -> Result:
        splitter = Splitter(name, "zerda", "-", lambda number, text: ([], None))
        return Result("python-docs", "BM25", splitter, 1, 1.0, {}, {b: recalls for b in bench.BUDGETS})

    rows = [row(bench.FIXED_TARGET, [0.5] * 4), row("zerda low", [0.2] * 4), row("zerda same", [0.6, 0.4, 0.5, 0.5])]
    assert bench.sizing_lines(rows, seed=0) == [
        "- python-docs, zerda low: mean Δ -0.300 over 3 cells; interval without 0: BM25 1k -0.300, BM25 2k -0.300,"
        " BM25 4k -0.300",
        "- python-docs, zerda same: mean Δ +0.000 over 3 cells; interval without 0: none",
    ]
