"""The pipeline's per-document work as a plain Python loop: the speed limit with zero framework cost.

bench_pipeline.py runs this in a subprocess beside the Beam pipeline so both pay the same
interpreter start, imports and page cache. It does exactly what one worker of the pipeline does
per record, with the pipeline's own code and no runner around it:

- files expanded by ``pipelines.input.expand.expand_inputs`` and read by ``read_file``;
- every ``SourceRecord`` through the two DoFns of ``pipelines.chunking.ChunkDocuments``
  (``ChunkText``'s, whose ``setup()`` builds the chunker as the pipeline does, then the one that
  builds the same row dicts); their Beam Metrics calls are no-ops outside a pipeline;
- with ``--parquet DIR`` also the rows written as zstd Parquet, one file per input file and
  density bucket (bounded memory), with the pipeline's Arrow schema; without it rows are kept
  per file and dropped.

Prints one JSON object: seconds (after imports), records, documents, chunks, rejects, bytes.
By hand: ``python benchmarks/plain_loop.py [--parquet DIR] FILE_OR_GLOB...``; ``pipelines`` is imported
from PYTHONPATH when set there (how bench_pipeline.py --code measures a patched copy), else from this repo.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: PYTHONPATH first (a patched copy under test), then this repo
    sys.path.append(str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.pvalue import TaggedOutput

from pipelines.chunk_text import _ChunkTextFn
from pipelines.chunking import _RowsFn
from pipelines.input.expand import InputFile, expand_inputs
from pipelines.input.source import read_file
from pipelines.names import REJECTS
from pipelines.output.layout import PARTITION_COLUMN
from pipelines.output.schema import CHUNK_SCHEMA
from pipelines.records import FileReport, Reject, SourceRecord
from pipelines.settings import Settings, load_settings


@dataclass
class Tally:
    """What the loop saw, to check against the pipeline's manifest."""

    seconds: float = 0.0
    records: int = 0
    documents: int = 0
    chunks: int = 0
    rejects: int = 0
    bytes: int = 0
    parquet_files: int = 0


def write_buckets(rows: list[Mapping[str, Any]], out: Path, stem: str, compression: str) -> int:
    """One Parquet file per density bucket, as the pipeline lays them out; returns the files written."""
    by_bucket: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_bucket[row[PARTITION_COLUMN]].append(row)
    for bucket, bucket_rows in by_bucket.items():
        folder = out / f"{PARTITION_COLUMN}={bucket}"
        folder.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist(bucket_rows, schema=CHUNK_SCHEMA)
        pq.write_table(table, folder / f"{stem}.parquet", compression=compression)
    return len(by_bucket)


def chunk_file(
    file: InputFile, settings: Settings, steps: tuple[_ChunkTextFn, _RowsFn], tally: Tally
) -> list[Mapping[str, Any]]:
    """Read one file and chunk its records; the rows of the file (only kept when they will be written)."""
    rows: list[Mapping[str, Any]] = []
    for item in read_file(file, settings.input):
        if isinstance(item, FileReport):
            tally.bytes += item.bytes_read
            continue
        tally.records += 1
        if isinstance(item, Reject):
            tally.rejects += 1
            continue
        assert isinstance(item, SourceRecord)
        produced = 0
        for out in _chained(steps, item):
            if isinstance(out, TaggedOutput):
                tally.rejects += out.tag == REJECTS
            else:  # one document's chunk rows
                produced += len(out)
                rows.extend(out)
        tally.documents += produced > 0
        tally.chunks += produced
    return rows


def _chained(steps: tuple[_ChunkTextFn, _RowsFn], record: SourceRecord) -> Iterator[Any]:
    """The two DoFns of ``ChunkDocuments`` one after the other, as the runner fuses them."""
    chunk_text, rows = steps
    for out in chunk_text.process(record):
        if isinstance(out, TaggedOutput):
            yield out
        else:
            yield from rows.process(out)


def run(patterns: Iterable[str], config: str | None, parquet: Path | None) -> Tally:
    """The whole loop over every file, timed from the first file to the last write."""
    settings = load_settings(config)
    files = expand_inputs(list(patterns))
    steps = (
        _ChunkTextFn(settings.chunking, per_document=True),
        _RowsFn(settings.enrich, settings.output.bucket_width, settings.config_fingerprint, progress_seconds=0),
    )
    for step in steps:
        step.setup()
    tally = Tally()
    start = time.perf_counter()
    for index, file in enumerate(files):
        rows = chunk_file(file, settings, steps, tally)
        if parquet is not None and rows:
            tally.parquet_files += write_buckets(rows, parquet, f"part-{index:05d}", settings.output.compression)
    tally.seconds = time.perf_counter() - start
    return tally


def main(argv: list[str] | None = None) -> int:
    """CLI: print the tally as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", help="corpus files, globs or directories, as --input takes them")
    parser.add_argument("--config", help="run settings YAML (default: built-in defaults)")
    parser.add_argument("--parquet", type=Path, help="also write the rows as Parquet under this folder")
    args = parser.parse_args(argv)
    print(json.dumps(asdict(run(args.inputs, args.config, args.parquet))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
