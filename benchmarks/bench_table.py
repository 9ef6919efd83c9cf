"""A full run into an Iceberg table beside the same run into a Parquet directory, on bench_pipeline's corpus.

    python benchmarks/bench_table.py --mb 400 --files 64 --reps 3

A table's data files are written by the workers where they stay, and its commit writes metadata; a
directory's commit moves every file and checks it. The target: a run into a table costs at most 1.05x the
same run into a directory, with the same rows. Each run is a fresh subprocess of the job (DirectRunner in
memory, one worker) into a fresh output (the table in a new SQLite catalog and warehouse on local disk),
the two kinds alternating with the first rotated each round; medians of wall time. Writes
``benchmarks/results/table.md``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `pipelines` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_pipeline import child_env, corpus_line, load_corpus, measure, warm_page_cache
from benchmarks.scaffold import REPO_ROOT, RESULTS_DIR, header, parser, save

RESULTS = RESULTS_DIR / "table.md"
TARGET = 1.05
_JOB = ("--quiet", "--progress-seconds", "0", "--direct_running_mode=in_memory", "--direct_num_workers=1")


def _run(kind: str, files: list[Path], scratch: Path) -> tuple[float, int]:
    """(wall seconds, chunks written) of one run into a fresh output of ``kind``."""
    out = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=scratch))
    inputs = [arg for f in files for arg in ("--input", str(f))]
    command = [sys.executable, "-m", "pipelines.cli.rechunk", *inputs, *_JOB]
    if kind == "directory":
        seen = measure([*command, "--output", str(out / "chunks")], child_env(REPO_ROOT), REPO_ROOT)
        return seen.wall_s, json.loads((out / "chunks" / "_manifest.json").read_text())["counts"]["chunks"]
    config = out / "table.yaml"
    config.write_text(f"output:\n  catalog:\n    warehouse: {out / 'warehouse'}\n", encoding="utf-8")
    seen = measure(
        [*command, "--output", "iceberg://bench.chunks", "--config", str(config)], child_env(REPO_ROOT), REPO_ROOT
    )
    return seen.wall_s, _table_chunks(out / "warehouse")


def _table_chunks(warehouse: Path) -> int:
    """The chunks the table's current snapshot holds, as its summary records them."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog(
        "zerda", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    snapshot = catalog.load_table("bench.chunks").current_snapshot()
    assert snapshot is not None, "the table run committed no snapshot"
    return int(snapshot.summary["total-records"])


def main(argv: list[str] | None = None) -> int:
    cli = parser(__doc__, RESULTS, "--mb 20 --files 8 --reps 1")
    cli.add_argument("--mb", type=float, default=400.0, help="corpus size in MB of JSONL (default 400)")
    cli.add_argument("--files", type=int, default=64, help="number of corpus files (default 64)")
    cli.add_argument("--reps", type=int, default=3, help="rounds, each one run of each kind (default 3)")
    args = cli.parse_args(argv)
    if args.quick:
        args.mb, args.files, args.reps = 20.0, 8, 1
    data = load_corpus(args.mb, args.files, args.seed, False, not args.no_setup)
    print(f"bench: {corpus_line(data)}", flush=True)
    warm_page_cache(data.files)
    walls: dict[str, list[float]] = {"directory": [], "table": []}
    chunks: dict[str, set[int]] = {"directory": set(), "table": set()}
    with tempfile.TemporaryDirectory(prefix="zerda-bench-table-") as scratch:
        for round_ in range(args.reps):
            kinds = ["directory", "table"][round_ % 2 :] + ["directory", "table"][: round_ % 2]
            for kind in kinds:
                wall, written = _run(kind, data.files, Path(scratch))
                walls[kind].append(wall)
                chunks[kind].add(written)
                print(f"bench: round {round_ + 1} {kind}: {wall:.1f} s, {written:,} chunks", flush=True)
    if chunks["directory"] != chunks["table"] or len(chunks["table"]) != 1:
        raise SystemExit(f"bench: the runs wrote different numbers of chunks: {chunks}")
    median = {kind: statistics.median(values) for kind, values in walls.items()}
    ratio = median["table"] / median["directory"]
    lines = header(
        "A full run into an Iceberg table beside one into a Parquet directory", "bench_table.py", argv or sys.argv[1:]
    )
    lines += [
        "",
        f"Corpus: {corpus_line(data)}. DirectRunner in memory, one worker; {args.reps} round(s), the kinds"
        " alternating; medians of wall time (fresh process and output each run).",
        "",
        "| output | median wall s | runs (s) | chunks |",
        "| --- | ---: | --- | ---: |",
        *(
            f"| {kind} | {median[kind]:.1f} | {', '.join(f'{w:.1f}' for w in walls[kind])} | {min(chunks[kind]):,} |"
            for kind in ("directory", "table")
        ),
        "",
        f"- A run into a table took {ratio:.3f}x the run into a directory (target <= {TARGET}x: "
        f"{'met' if ratio <= TARGET else 'missed'}).",
    ]
    save("\n".join(lines) + "\n", args.out or (None if args.quick else RESULTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
