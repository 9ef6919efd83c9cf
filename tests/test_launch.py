"""What the launcher hands the runner: a job graph whose size does not grow with the corpus."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import apache_beam as beam

from pipelines.cli.rechunk import build_pipeline
from pipelines.incremental.previous import Previous
from pipelines.input.context import source_name
from pipelines.input.expand import InputFile
from pipelines.records import FileReport
from pipelines.settings import load_settings


def _graph_bytes(files: int, output: Path) -> int:
    """The serialized job graph of an incremental run over ``files`` input files, every other one unchanged,
    into an output whose previous run wrote one chunk file per input file (and a million documents)."""
    inputs = [InputFile(f"file:///corpus/f{n:06d}.jsonl", f"f{n:06d}.jsonl", 5_000, f"s{n}") for n in range(files)]
    unchanged = {source_name(f.url): FileReport(source_name(f.url), 5_000, 7, "", f.stamp or "") for f in inputs[::2]}
    chunk_files = tuple((f"density_bucket=3/part-{n:032x}.parquet", 70, f"{n:032x}") for n in range(files))
    previous = Previous(True, "incremental", output.as_uri(), 1, frozenset({0}), 10**6, chunk_files, (), unchanged)
    pipeline = beam.Pipeline()
    started = datetime.now(timezone.utc)
    build_pipeline(pipeline, inputs, load_settings(None), str(output), started, run_id="run-1", previous=previous)
    return len(pipeline.to_runner_api().SerializeToString())


def test_the_job_graph_for_100000_files_is_no_larger_than_for_10(tmp_path: Path) -> None:
    """The lists of files (to read, unchanged, previous chunk files) reach the workers as files in the run's
    staging: a graph holding them (hundreds of bytes a file) would pass Dataflow's 20 MiB limit."""
    small, large = _graph_bytes(10, tmp_path / "small"), _graph_bytes(100_000, tmp_path / "large")
    assert large <= 1.1 * small, (small, large)
    listed = sorted(p.relative_to(tmp_path / "large") for p in (tmp_path / "large").rglob("*.jsonl"))
    assert {str(p.parent) for p in listed} == {
        "_staging/run-1/listing/inputs",
        "_staging/run-1/listing/unchanged",
        "_staging/run-1/listing/unread",
        "_staging/run-1/listing/previous",
    }
