"""Progress lines: at the interval, not more often, with counts and throughput."""

from __future__ import annotations

import logging
import os

import pytest

from pipelines.progress import Progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_logs_once_per_interval_with_counts(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    progress = Progress(interval=10, clock=clock)
    with caplog.at_level(logging.INFO, logger="zerda.progress"):
        progress.add("a.jsonl", 1_000_000, 3)
        clock.now += 5
        progress.add("a.jsonl", 1_000_000, 2)
        assert caplog.records == []
        clock.now += 5
        progress.add("b.jsonl", 2_000_000, 5)
    assert [r.getMessage() for r in caplog.records] == [
        f"progress (pid {os.getpid()}): 2 files, 3 documents, 4.0 M characters (0.40 M/s), 10 chunks"
    ]


def test_zero_interval_turns_progress_off(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    progress = Progress(interval=0, clock=clock)
    with caplog.at_level(logging.INFO, logger="zerda.progress"):
        for _ in range(3):
            clock.now += 100
            progress.add("a", 10, 1)
    assert caplog.records == []
    assert (progress.files, progress.documents, progress.chunks) == (1, 3, 3)
