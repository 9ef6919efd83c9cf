"""The commit's time against an S3 API, by number of files: for the 10 TB estimate in the README.

    python benchmarks/bench_commit.py --files 10000

Starts moto's S3 server on 127.0.0.1 (as the tests do), runs the real job into ``s3://`` with
``max_rows_per_file: 1`` over a corpus of one-chunk documents, so the job stages about ``--files`` Parquet
files (chunks, index and changes, a third each), and times the commit (``_Commit.process``: lease check,
listing, server-side copies, footer checks, deletes, manifest) by wrapping it in this process. Reports
seconds and files a second for each size, which the README extrapolates. moto is one Python process on a
shared machine, so a real object store (many servers, per-prefix rates in the thousands) moves files faster:
read the figures as an upper bound of the commit's own cost. Writes ``benchmarks/results/commit.md``.
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


def _time_commit(output: str, corpus: Path, config: Path) -> tuple[float, int, Counter]:
    """(seconds in the commit, files committed, S3 calls the commit made by API name) for one run."""
    import s3fs

    from pipelines.io import write as write_module
    from pipelines.rechunk import run

    spent: list[float] = []
    calls: Counter = Counter()
    committing = False
    original, original_call = write_module._Commit.process, s3fs.S3FileSystem._call_s3

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

    write_module._Commit.process = timed  # type: ignore[method-assign]
    s3fs.S3FileSystem._call_s3 = counted  # type: ignore[method-assign]
    try:
        manifest = run(["--input", str(corpus), "--output", output, "--config", str(config), "--quiet"])
    finally:
        write_module._Commit.process = original  # type: ignore[method-assign]
        s3fs.S3FileSystem._call_s3 = original_call  # type: ignore[method-assign]
    return sum(spent), len(manifest["output"]["files"]), calls


def main(argv: list[str] | None = None) -> int:
    cli = parser(__doc__, RESULTS, "--files 600")
    cli.add_argument("--files", type=int, default=10_000, help="about this many files in the largest run")
    args = cli.parse_args(argv)
    if args.quick:
        args.files = 600
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
    bucket = f"zerda-commit-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "one_row_files.yaml"
            config.write_text("output:\n  max_rows_per_file: 1\n", encoding="utf-8")
            for files in sorted({max(30, args.files // 10), args.files}):
                corpus = Path(tmp) / f"corpus-{files}.jsonl"
                _corpus(corpus, files // 3)
                seconds, committed, calls = _time_commit(f"s3://{bucket}/out-{files}", corpus, config)
                rows.append((committed, seconds, calls))
                print(f"bench: {committed} files committed in {seconds:.1f} s, calls {dict(calls)}", flush=True)
    finally:
        server.stop()
    lines = header("Commit time against S3 (moto)", "bench_commit.py", argv or sys.argv[1:])
    lines += [
        "",
        "The real job into `s3://` on moto's server (127.0.0.1, one process), `max_rows_per_file: 1`;"
        " the commit's own time, measured around `_Commit.process` in the launcher (DirectRunner, in memory).",
        "",
        "S3 calls are counted in the launcher's s3fs while the commit runs: a file is a server-side copy, then"
        " a HEAD and a ranged GET of its footer (the check); the staged originals go in batched deletes.",
        "",
        "| files committed | commit s | files/s | ms a file | S3 calls | calls a file | calls by API |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {n:,} | {s:.1f} | {n / s:,.0f} | {1000 * s / n:.1f} | {sum(c.values()):,} | {sum(c.values()) / n:.1f} | "
        + ", ".join(f"{api} {count:,}" for api, count in sorted(c.items()))
        + " |"
        for n, s, c in rows
    ]
    save("\n".join(lines) + "\n", args.out or (None if args.quick else RESULTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
