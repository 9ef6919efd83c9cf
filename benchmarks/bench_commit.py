"""The commit's time against an S3 API, by number of files: a Parquet directory's commit and an Iceberg
table's, side by side in one run.

    python benchmarks/bench_commit.py --files 2000

Starts moto's S3 server on 127.0.0.1 (as the tests do) and runs the real job with ``max_rows_per_file: 1``
over a corpus of one-chunk documents, so that it writes about ``--files`` chunk files, twice at each size
in each of ``--reps`` rounds (medians; a new bucket each run, as moto scans a bucket's every key to list it):
into ``s3://`` (the directory commit, ``pipelines.output.commit``: lease check, listing, server-side
copies in tasks of 256 files, one listing to check sizes, deletes, manifest) and into an Iceberg table
whose warehouse is on the same S3, SQLite catalog on local disk (``_CommitTable.process``: one listing of
the run's folders, metadata, one snapshot). Each commit is timed by wrapping its steps in this process and
its S3 calls are counted. moto is one Python process on a shared machine, so a real object store moves
files faster: read the figures as an upper bound of the commit's own cost, and the ratio between the two
as what they say. Writes ``benchmarks/results/commit.md``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `pipelines` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scaffold import REPO_ROOT, header, parser, save

RESULTS = REPO_ROOT / "benchmarks" / "results" / "commit.md"
_TEXT = "Document {n} of the commit benchmark: one short paragraph that makes exactly one chunk of its own."


def _corpus(path: Path, documents: int) -> None:
    lines = (json.dumps({"id": f"d{n}", "text": _TEXT.format(n=n) * 2}) + "\n" for n in range(documents))
    path.write_text("".join(lines), encoding="utf-8")


def _commit_steps(kind: str) -> tuple[Any, Any]:
    """The DoFns whose ``process`` begins and ends the commit of an output of ``kind`` (one for a table)."""
    if kind == "directory":
        from pipelines.output import commit as commit_module

        return commit_module._BeginCommit, commit_module._FinishCommit
    from pipelines.output import iceberg as iceberg_module

    return iceberg_module._CommitTable, iceberg_module._CommitTable


def _time_commit(kind: str, output: str, corpus: Path, config: Path) -> tuple[float, float, int, Counter]:
    """(seconds in the commit, from its first step's start to its last step's end, CPU seconds this process
    spent meanwhile, chunk files committed, S3 calls the commit made by API name) for one run. The DirectRunner
    in memory runs every step in this process, the moves between the two included; moto's server runs here too,
    so the CPU seconds count its work for the commit's calls (and less of the other programs on the machine)."""
    import s3fs

    from pipelines.cli.rechunk import run

    first, last = _commit_steps(kind)
    began: list[tuple[float, float]] = []
    spent: list[tuple[float, float]] = []
    calls: Counter = Counter()
    committing = False
    originals, original_call = (first.process, last.process), s3fs.S3FileSystem._call_s3

    def begin(self: Any, *args: Any) -> Any:
        nonlocal committing
        committing = True
        began.append((time.perf_counter(), time.process_time()))
        yield from originals[0](self, *args)

    def finish(self: Any, *args: Any) -> Any:
        nonlocal committing
        yield from (begin(self, *args) if first is last else originals[1](self, *args))
        spent.append((time.perf_counter() - began[-1][0], time.process_time() - began[-1][1]))
        committing = False

    async def counted(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if committing:
            calls[method] += 1
        return await original_call(self, method, *args, **kwargs)

    first.process, last.process = begin, finish
    s3fs.S3FileSystem._call_s3 = counted  # type: ignore[method-assign]
    try:
        manifest = run(["--input", str(corpus), "--output", output, "--config", str(config), "--quiet"])
    finally:
        first.process, last.process = originals
        s3fs.S3FileSystem._call_s3 = original_call  # type: ignore[method-assign]
    return sum(w for w, _ in spent), sum(c for _, c in spent), manifest["counts"]["chunks"], calls


def _new_bucket() -> str:
    """A new, empty bucket on the moto server: each run lists only its own keys. moto answers a listing by
    scanning every key of the bucket, which S3 does not (it lists a prefix from an index): in a shared bucket
    the later runs' listings would pay for the earlier runs' files."""
    import boto3

    bucket = f"zerda-commit-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return bucket


def _run(kind: str, files: int, round_: int, tmp: Path) -> tuple[float, float, int, Counter]:
    """One run of ``kind`` over the corpus of ``files`` documents, into a new bucket (a new table each round)."""
    bucket = _new_bucket()
    config = tmp / f"{kind}-{files}.yaml"
    settings = "output:\n  max_rows_per_file: 1\n"
    output = f"s3://{bucket}/out-{files}"
    if kind == "iceberg":
        settings += f"  catalog:\n    uri: sqlite:///{tmp}/catalog.db\n    warehouse: s3://{bucket}/warehouse\n"
        output = f"iceberg://bench.files_{files}_{round_}"
    config.write_text(settings, encoding="utf-8")
    return _time_commit(kind, output, tmp / f"corpus-{files}.jsonl", config)


def _median(seen: list[tuple[float, float, Counter]]) -> tuple[float, float, Counter, list[float]]:
    """The run of median commit time among ``seen`` (seconds, CPU seconds, calls), and every run's seconds."""
    ordered = sorted(seen, key=lambda run: run[0])
    seconds, cpu, calls = ordered[(len(ordered) - 1) // 2]
    return seconds, cpu, calls, [run[0] for run in seen]


def main(argv: list[str] | None = None) -> int:
    cli = parser(__doc__, RESULTS, "--files 200")
    cli.add_argument("--files", type=int, default=2000, help="about this many chunk files in the larger run")
    cli.add_argument("--reps", type=int, default=3, help="rounds, each one run of each kind and size (default 3)")
    args = cli.parse_args(argv)
    if args.quick:
        args.files, args.reps = 200, 1
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    runs: dict[tuple[str, int], list[tuple[float, float, Counter]]] = {}
    loads = [os.getloadavg()[0]]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sizes = sorted({max(10, args.files // 4), args.files})
            for files in sizes:
                _corpus(Path(tmp) / f"corpus-{files}.jsonl", files)
            for round_ in range(args.reps):
                for files in sizes:
                    for kind in ("directory", "iceberg"):
                        seen = _run(kind, files, round_, Path(tmp))
                        runs.setdefault((kind, seen[2]), []).append((seen[0], seen[1], seen[3]))
                        print(
                            f"bench: round {round_ + 1} {kind}: {seen[2]} chunk files committed in {seen[0]:.2f} s"
                            f" (load {os.getloadavg()[0]:.1f})",
                            flush=True,
                        )
    finally:
        server.stop()
    loads.append(os.getloadavg()[0])
    rows = [(kind, n, *_median(seen)) for (kind, n), seen in sorted(runs.items(), key=lambda item: item[0][::-1])]
    lines = header(
        "Commit time against S3 (moto): a Parquet directory and an Iceberg table",
        "bench_commit.py",
        argv or sys.argv[1:],
    )
    lines += [
        "",
        "The real job on moto's S3 server (127.0.0.1, one process), `max_rows_per_file: 1`, each size run into"
        " `s3://` (a Parquet directory) and into an Iceberg table (warehouse on the same S3, SQLite catalog on"
        " local disk); the commit's own time, from its first step's start to its last step's end in the launcher"
        " (DirectRunner, in memory: the moves between them run in the same process, in tasks of 256 files, 16"
        " at a time). S3 calls are counted in the launcher's s3fs while the commit runs. The directory commit"
        " copies each file server-side and checks every size with one listing, reading no file again (the"
        " staged originals go in batched deletes, with the run's `_index` and `_changes` files; each file's"
        " footer digest comes from its writer); the table's commit lists the run's"
        " folders once and writes metadata, never copying or reading a data file nor computing a statistic (each"
        " worker describes the files it wrote, statistics included, from the footer it wrote; the commit moves the"
        " run's index files, one per index partition, into its side folder: one copy here).",
        "",
        f"{args.reps} round(s), each one run of each output at each size, a new bucket (and table) each run: moto"
        " answers a listing by scanning every key of the bucket, so in a shared bucket a later run's listings"
        " would pay for the earlier runs' files (S3 lists a prefix from an index). Medians; the commit CPU and"
        f" calls are the median run's. Load average (1 min) {loads[0]:.1f} at the start, {loads[1]:.1f} at the end"
        " (2 cores).",
        "",
        "| output | chunk files | commit s | runs (s) | commit CPU s | ms a file | S3 calls | calls by API |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {kind} | {n:,} | {s:.2f} | {', '.join(f'{r:.2f}' for r in each)} | {cpu:.2f} | {1000 * s / n:.2f} | "
        f"{sum(c.values()):,} | " + ", ".join(f"{api} {count:,}" for api, count in sorted(c.items())) + " |"
        for kind, n, s, cpu, c, each in rows
    ]
    lines += [""]
    for n in sorted({row[1] for row in rows}):
        seconds = {kind: s for kind, files, s, *_ in rows if files == n}
        if len(seconds) == 2:
            lines += [
                f"- {n:,} chunk files: the table's commit took {seconds['iceberg'] / seconds['directory']:.3f}x"
                " the directory's."
            ]
    table = sorted((n, s, cpu) for kind, n, s, cpu, *_ in rows if kind == "iceberg")
    if len(table) == 2:
        (small, s_small, c_small), (large, s_large, c_large) = table
        lines += [
            f"- the table's commit at {large:,} chunk files took {s_large / s_small:.2f}x its time at {small:,}"
            f" ({c_large / c_small:.2f}x its CPU time)."
        ]
    save("\n".join(lines) + "\n", args.out or (None if args.quick else RESULTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
