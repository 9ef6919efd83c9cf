"""The Iceberg commit's time against an S3 API, by number of data files (docs/iceberg.md).

    python benchmarks/bench_iceberg_commit.py --files 2000

Starts moto's S3 server on 127.0.0.1 (as the tests do) and runs the real job into an Iceberg table whose
warehouse is on ``s3://`` (its SQLite catalog in a temporary folder), with ``max_rows_per_file: 1`` over a
corpus of one-chunk documents, so the workers write about ``--files`` data files (and ``--files / 4`` in a
first, smaller run). It times the commit (``_CommitTable.process``: the counts checked, one listing of the
run's folders, each file's statistics taken from the footer its worker kept, the manifests and metadata
written, both catalog commits) by wrapping it in this process, and counts the S3 calls made meanwhile. No
data file is copied or read again. Compare with ``benchmarks/results/commit.md`` (the directory commit copies
every file and reads its footer back).
Writes ``benchmarks/results/iceberg_commit.md``.
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

RESULTS = REPO_ROOT / "benchmarks" / "results" / "iceberg_commit.md"
_TEXT = "Document {n} of the commit benchmark: one short paragraph that makes exactly one chunk of its own."


def _corpus(path: Path, documents: int) -> None:
    lines = (json.dumps({"id": f"d{n}", "text": _TEXT.format(n=n) * 2}) + "\n" for n in range(documents))
    path.write_text("".join(lines), encoding="utf-8")


def _time_commit(table: str, corpus: Path, config: Path) -> tuple[float, int, Counter]:
    """(seconds in the commit, chunk data files committed, S3 calls the commit made by API name) for one run."""
    import s3fs

    from pipelines.output import iceberg as iceberg_module
    from pipelines.rechunk import run

    spent: list[float] = []
    calls: Counter = Counter()
    committing = False
    original, original_call = iceberg_module._CommitTable.process, s3fs.S3FileSystem._call_s3

    def timed(self: Any, *args: Any) -> Any:
        nonlocal committing
        committing, started = True, time.perf_counter()
        yield from original(self, *args)
        spent.append(time.perf_counter() - started)
        committing = False

    async def counted(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if committing:
            calls[method] += 1
        return await original_call(self, method, *args, **kwargs)

    iceberg_module._CommitTable.process = timed  # type: ignore[method-assign]
    s3fs.S3FileSystem._call_s3 = counted  # type: ignore[method-assign]
    try:
        manifest = run(["--input", str(corpus), "--output", f"iceberg://{table}", "--config", str(config), "--quiet"])
    finally:
        iceberg_module._CommitTable.process = original  # type: ignore[method-assign]
        s3fs.S3FileSystem._call_s3 = original_call  # type: ignore[method-assign]
    return sum(spent), manifest["counts"]["chunks"], calls


def main(argv: list[str] | None = None) -> int:
    cli = parser(__doc__, RESULTS, "--files 200")
    cli.add_argument("--files", type=int, default=2000, help="about this many data files in the larger run")
    args = cli.parse_args(argv)
    if args.quick:
        args.files = 200
    import boto3
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
    bucket = f"zerda-iceberg-commit-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for files in sorted({max(10, args.files // 4), args.files}):
                config = Path(tmp) / f"table-{files}.yaml"
                config.write_text(
                    "output:\n  max_rows_per_file: 1\n  catalog:\n"
                    f"    uri: sqlite:///{tmp}/catalog.db\n    warehouse: s3://{bucket}/warehouse\n",
                    encoding="utf-8",
                )
                corpus = Path(tmp) / f"corpus-{files}.jsonl"
                _corpus(corpus, files)
                seconds, committed, calls = _time_commit(f"bench.files_{files}", corpus, config)
                rows.append((committed, seconds, calls))
                print(f"bench: {committed} data files committed in {seconds:.2f} s, calls {dict(calls)}", flush=True)
    finally:
        server.stop()
    lines = header("Iceberg commit time against S3 (moto)", "bench_iceberg_commit.py", argv or sys.argv[1:])
    lines += [
        "",
        "The real job into an Iceberg table, warehouse on `s3://` on moto's server (127.0.0.1, one process),"
        " SQLite catalog on local disk, `max_rows_per_file: 1`; the commit's own time, measured around"
        " `_CommitTable.process` in the launcher (DirectRunner, in memory). The data files are tiny: the commit"
        " lists the run's folders and writes metadata, never reads the data, so its time follows the number of"
        " files, not bytes.",
        "",
        "| data files committed | commit s | files/s | ms a file | S3 calls | calls a file | calls by API |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {n:,} | {s:.2f} | {n / s:,.0f} | {1000 * s / n:.2f} | {sum(c.values()):,} | {sum(c.values()) / n:.1f} | "
        + ", ".join(f"{api} {count:,}" for api, count in sorted(c.items()))
        + " |"
        for n, s, c in rows
    ]
    if len(rows) == 2:
        lines += ["", f"Commit time at {rows[1][0]:,} files / at {rows[0][0]:,}: {rows[1][1] / rows[0][1]:.2f}x."]
    save("\n".join(lines) + "\n", args.out or (None if args.quick else RESULTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
