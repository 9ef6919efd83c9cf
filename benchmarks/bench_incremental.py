"""Incremental re-chunking: a full run, then a share of the documents changed and ``--incremental``.

    python benchmarks/bench_incremental.py --mb 200 --files 32

Builds a seeded synthetic JSONL corpus (``bench_pipeline.synthetic_documents``), runs the job in full
(DirectRunner, 2 worker processes; ``--workers 1``: in memory), then for each share (0%, 1%, 10%, 50% by
default) changes the corpus in two ways: in as few files as can hold the change (the first files edited
and cut short, the additions one new file; the other files keep their bytes and times, so the run need
not read them), then in every file (a third of the share edited in place, a third deleted from the ends
of the files, a third added there: deleting from the middle of a JSONL file moves the lines below, which
changes their keys). It runs ``--incremental`` over a copy of the full run's output and a full run of the
changed corpus into a fresh folder, and checks that both give the same rows. Where the time of an
incremental run goes is measured in-process beside it: reading and hashing the corpus, and carrying the
rows over (reading the previous Parquet files, filtering, writing them again). Writes
``benchmarks/results/incremental.md`` (``--results``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `pipelines` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from benchmarks.bench_pipeline import child_env, synthetic_documents
from benchmarks.scaffold import machine_line
from pipelines.input.expand import expand_inputs
from pipelines.input.source import read_file
from pipelines.records import SourceRecord, content_hash
from pipelines.settings import InputSettings

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "benchmarks" / "results" / "incremental.md"
MODES = {  # --workers: how the DirectRunner runs both the incremental and the full runs
    1: ("--direct_running_mode=in_memory", "--direct_num_workers=1"),
    2: ("--direct_running_mode=multi_processing", "--direct_num_workers=2"),
}


def build_corpus(directory: Path, mb: float, n_files: int, seed: int) -> list[list[dict[str, str]]]:
    """``n_files`` lists of ``{"id", "text"}`` records, about ``mb`` MB of JSONL in all, written to ``directory``."""
    files: list[list[dict[str, str]]] = [[] for _ in range(n_files)]
    total = 0
    for n, (doc_id, text) in enumerate(synthetic_documents(seed)):
        if total >= mb * 1e6:
            break
        files[n % n_files].append({"id": doc_id, "text": text})
        total += len(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False).encode()) + 1
    write_corpus(directory, files)
    return files


def write_corpus(directory: Path, files: list[list[dict[str, str]]], only: set[int] | None = None) -> None:
    """Write the files (``only`` those indexes, the others left as they are, times included), last
    modified a minute ago: settled files that an incremental run can skip if they do not change."""
    if only is None:
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    for stale in directory.glob("part-*.jsonl"):
        if int(stale.stem.split("-")[1]) >= len(files):
            stale.unlink()
    settled = time.time() - 60
    for index, records in enumerate(files):
        if only is None or index in only:
            lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            path = directory / f"part-{index:03d}.jsonl"
            path.write_text(lines, encoding="utf-8")
            os.utime(path, (settled, settled))


def changed(files: list[list[dict[str, str]]], share: float) -> tuple[list[list[dict[str, str]]], int]:
    """A copy with ``share`` of the documents changed: edited, deleted (file ends) and added, a third each."""
    out, touched = [], 0
    each = [0] * len(files)  # how many to edit, delete and add in each file: round(share x documents / 3) in all
    for n in range(round(sum(len(records) for records in files) * share / 3)):
        each[n % len(files)] += 1
    for index, records in enumerate(files):
        k = each[index]
        kept = records[: len(records) - k] if k else list(records)
        step = max(1, len(kept) // max(1, k))
        edited = [
            {**r, "text": r["text"] + " An edited closing sentence."} if i % step == 0 and i // step < k else r
            for i, r in enumerate(kept)
        ]
        added = [{"id": f"added/{index}/{j}", "text": records[j]["text"][::-1]} for j in range(k)]
        out.append(edited + added)
        touched += 3 * k
    return out, touched


def changed_in_few_files(files: list[list[dict[str, str]]], share: float) -> tuple[list[list[dict[str, str]]], int]:
    """A copy with ``share`` of the documents changed in as few files as can hold them: a third edited and a
    third deleted from the first files, a third added as one new file (a nightly drop)."""
    k = round(sum(len(records) for records in files) * share / 3)
    out, left = [list(records) for records in files], k
    for records in out:
        if left == 0:
            break
        n = min(left, len(records) // 2)
        records[:n] = [{**r, "text": r["text"] + " An edited closing sentence."} for r in records[:n]]
        del records[len(records) - n :]
        left -= n
    out.append([{"id": f"added/{j}", "text": files[0][j % len(files[0])]["text"][::-1]} for j in range(k)])
    return out, 3 * k


def zerda(corpus: Path, output: Path, workers: int, *extra: str) -> float:
    """Wall seconds of one ``zerda-rechunk`` run in a child process (what a scheduler waits for)."""
    cmd = [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(corpus), "--output", str(output), "--quiet"]
    started = time.perf_counter()
    subprocess.run([*cmd, "--progress-seconds", "0", *MODES[workers], *extra], check=True, env=child_env(REPO_ROOT))
    return time.perf_counter() - started


def sorted_rows(output: Path) -> pa.Table:
    table = ds.dataset(str(output), format="parquet", partitioning="hive").to_table()
    table = table.select(sorted(table.column_names))
    return table.sort_by([("source", "ascending"), ("record", "ascending"), ("chunk_index", "ascending")])


def hashing_seconds(corpus: Path) -> tuple[float, float]:
    """(read only, read + hash) seconds over the corpus, with zerda's reader, in this process."""
    files = expand_inputs([str(corpus)])
    started = time.perf_counter()
    texts = [item.text for f in files for item in read_file(f, InputSettings()) if isinstance(item, SourceRecord)]
    read = time.perf_counter() - started
    started = time.perf_counter()
    for text in texts:
        content_hash(text)
    return read, read + time.perf_counter() - started


def carry_seconds(output: Path, scratch: Path) -> float:
    """Seconds to read every previous chunk file, filter it by document key and write it again."""
    started = time.perf_counter()
    for n, path in enumerate(sorted(output.glob("density_bucket=*/*.parquet"))):
        table = pq.read_table(path)
        keys = pc.binary_join_element_wise(
            table["source"], pc.cast(table["record"], pa.string()), table["doc_id"], "\0"
        )
        table = table.filter(pc.is_in(keys, value_set=keys.unique()))
        pq.write_table(table, scratch / f"carry-{n}.parquet", compression="zstd")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="corpus size in MB of JSONL (default 200)")
    parser.add_argument("--files", type=int, default=32, help="number of corpus files (default 32)")
    parser.add_argument("--shares", default="0,0.01,0.1,0.5", help="shares of documents changed (default 0,1,10,50%%)")
    parser.add_argument("--workers", type=int, choices=sorted(MODES), default=2, help="1: in memory; 2: 2 processes")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="zerda-bench-incremental-") as tmp:
        scratch = Path(tmp)
        base_files = build_corpus(scratch / "corpus", args.mb, args.files, args.seed)
        documents = sum(len(f) for f in base_files)
        full_s = zerda(scratch / "corpus", scratch / "base", args.workers)
        read_s, hash_s = hashing_seconds(scratch / "corpus")
        (scratch / "carry").mkdir()
        carry_s = carry_seconds(scratch / "base", scratch / "carry")
        rows: list[dict[str, Any]] = []
        shares = [float(s) for s in args.shares.split(",")]
        # the few-files cases first: they leave the other files as the full run listed them (stamps and all)
        for where, share in [("few files", s) for s in shares] + [("every file", s) for s in shares]:
            files, touched = (changed_in_few_files if where == "few files" else changed)(base_files, share)
            differ = {i for i, records in enumerate(files) if i >= len(base_files) or records != base_files[i]}
            write_corpus(scratch / "corpus", files, differ if where == "few files" else None)
            shutil.rmtree(scratch / "inc", ignore_errors=True)
            shutil.copytree(scratch / "base", scratch / "inc")
            inc_s = zerda(scratch / "corpus", scratch / "inc", args.workers, "--incremental")
            shutil.rmtree(scratch / "fresh", ignore_errors=True)
            fresh_s = zerda(scratch / "corpus", scratch / "fresh", args.workers)
            equal = sorted_rows(scratch / "inc").equals(sorted_rows(scratch / "fresh"))
            manifest = json.loads((scratch / "inc" / "_manifest.json").read_text())
            row = {"where": where, "share": share, "touched": touched, "files": len(differ)}
            rows.append({**row, "inc": inc_s, "full": fresh_s, "equal": equal, **manifest})
            print(f"bench: {share:.0%} in {where}: incremental {inc_s:.1f} s, full {fresh_s:.1f} s, equal {equal}")
            if where == "few files":
                write_corpus(scratch / "corpus", base_files, differ)  # back as it was (the stamps are new)
        text = report(args, documents, full_s, read_s, hash_s, carry_s, rows)
    args.results.write_text(text, encoding="utf-8")
    print(text)
    return 0 if all(r["equal"] for r in rows) else 1


def report(
    args: argparse.Namespace,
    documents: int,
    full_s: float,
    read_s: float,
    hash_s: float,
    carry_s: float,
    rows: list[dict[str, Any]],
) -> str:
    mode = "in memory, 1 worker" if args.workers == 1 else f"{args.workers} worker processes"
    lines = [
        "# Incremental re-chunking",
        "",
        f"`python benchmarks/bench_incremental.py --mb {args.mb:g} --files {args.files} --shares {args.shares} "
        f"--workers {args.workers}`; {machine_line()}. Synthetic JSONL, {args.mb:g} MB, {documents:,} documents in "
        f"{args.files} files; DirectRunner, {mode}; wall time of the CLI, one run each.",
        "",
        f"First full run: {full_s:.1f} s. Each share: `--incremental` over a copy of that output, then a full run "
        "of the same changed corpus into a fresh folder; rows compared sorted (every column). *few files*: the "
        "change in as few files as hold it, the other files untouched since the first run; *every file*: every "
        "file rewritten with its share of the change.",
        "",
        "| changed in | files written | changed | documents touched | incremental s | full s | ratio | target |"
        " equal rows | files not read | docs unchanged | chunks added | chunks removed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ch = r["changes"]
        target = "≤ 0.25x: " + ("met" if r["inc"] <= 0.25 * r["full"] else "missed") if r["share"] == 0.01 else ""
        lines.append(
            f"| {r['where']} | {r['files']} | {r['share']:.0%} | {r['touched']:,} | {r['inc']:.1f} | {r['full']:.1f} |"
            f" {r['inc'] / r['full']:.2f}x | {target} | {r['equal']} | {ch['files_unchanged']} |"
            f" {ch['documents_unchanged']:,} | {ch['chunks_added']:,} | {ch['chunks_removed']:,} |"
        )
    lines += [
        "",
        "Where an incremental run's time goes (measured in this process, one core, on the unchanged corpus):",
        "",
        f"- reading the corpus with zerda's reader: {read_s:.1f} s; hashing every text (blake2b) adds "
        f"{hash_s - read_s:.1f} s;",
        f"- carrying the rows over (read every previous chunk file, filter by document key, write it again): "
        f"{carry_s:.1f} s;",
        "- the rest of an incremental run is Beam's start-up with worker processes, the index join and the commit "
        "(moving the files, writing the manifest).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
