"""Memory and launch cost of an incremental run at two corpus sizes, the previous output built, not chunked.

    python benchmarks/bench_memory.py --docs 250000,1000000 --files 200

For each size, a previous output of N documents in F JSONL files is written directly, as zerda writes it
(:func:`build_previous`): a template of N/F seeded documents (300-800 characters of prose) is chunked once
by zerda in this process, and its index rows, chunk rows and manifest are replicated F times with the
source, the document ids and the chunk ids rewritten (chunk files of at most 100,000 rows holding whole
documents, grouped by source, each with zerda's footer and page checksums; the index partitioned by source
as ``pipelines.incremental`` plans it, the id counts by id; the manifest with every input's stamp and every
file). Then 10% of
the files are rewritten with 10% of their documents edited (1% of the corpus), and
``zerda-rechunk --incremental`` runs over it with 2 worker processes (DirectRunner, multi_processing) while
every process of its tree is sampled (RSS every 0.1 s and the kernel's peak mark, VmHWM). The run's manifest
must say what the change was (documents changed, unchanged, files not read), so a broken carry cannot pass
as a fast run. With ``--docs-per-file`` the number of files grows with the corpus instead, their size fixed:
the shape of a corpus that grows by files, where the largest file stays the same. Figures per size and the
ratios between the two sizes go to ``benchmarks/results/incremental_memory.md`` (``--results``).

With ``--runner flink`` the same incremental job also runs on a Flink cluster (tests/flink_cluster.py: a
JobManager, two TaskManagers, Beam's worker pool with each SDK harness a process of its own, Beam's Flink job
server started by the launcher), a fresh cluster per size so that each JVM's peak is that size's, from a copy
of the same previous output; the DirectRunner's run and the Flink run are reported side by side, in
``benchmarks/results/incremental_memory_flink.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `pipelines` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from benchmarks import synthetic
from benchmarks.bench_pipeline import child_env
from benchmarks.scaffold import git, header, peak_rss_kib, save
from pipelines.incremental.index import index_partitions, index_path, partition_of
from pipelines.incremental.previous import read_previous
from pipelines.input.expand import expand_inputs, source_name
from pipelines.output.layout import (
    CHANGES_DIR,
    IDS_DIR,
    INPUTS_DIR,
    MANIFEST_FILE,
    PARTITION_COLUMN,
    REJECTS_DIR,
    SUCCESS_FILE,
)
from pipelines.output.manifest import Manifest, write_files_table
from pipelines.output.ownership import STAGED_KEY
from pipelines.output.schema import (
    CHANGES_SCHEMA,
    IDS_SCHEMA,
    INDEX_SCHEMA,
    INPUTS_SCHEMA,
    REJECT_SCHEMA,
    REPEATED_COLUMNS,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "benchmarks" / "results" / "incremental_memory.md"
RESULTS_FLINK = REPO_ROOT / "benchmarks" / "results" / "incremental_memory_flink.md"
MAX_ROWS_PER_FILE = 100_000  # zerda's default output.max_rows_per_file
INDEX_ROW_GROUP = 2048  # rows per row group of an index file, as zerda writes it
POLL_SECONDS = 0.1
EDIT = " An edited closing sentence."
FILE_SHARE = 10  # one file in FILE_SHARE is rewritten ...
DOC_SHARE = 10  # ... with one document in DOC_SHARE edited: 1% of the corpus
TARGET_RSS_MIB = 1024
TARGET_RATIO = 1.2
LAUNCH_PROBES = 2  # runs stopped at launch, per size, besides the measured run
WORKER_ARGS = ("--direct_num_workers=2", "--direct_running_mode=multi_processing")


# ---------------------------------------------------------------- the previous output


def template_documents(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` documents (id, text) of seeded prose, 300-800 characters each."""
    rng = random.Random(seed)
    return [(f"d{i}", synthetic.english_prose(rng, rng.randint(300, 800))) for i in range(n)]


def input_name(k: int) -> str:
    return f"part-{k:05d}.jsonl"


def write_input(path: Path, prefix: str, docs: Sequence[tuple[str, str]], edited: bool = False) -> None:
    """The template documents, ids prefixed (``f{k}-`` in input file k); ``edited``: one in DOC_SHARE edited."""
    with path.open("w", encoding="utf-8") as f:
        for i, (doc_id, text) in enumerate(docs):
            text = text + EDIT if edited and i % DOC_SHARE == 0 else text
            f.write(json.dumps({"id": f"{prefix}{doc_id}", "text": text}, ensure_ascii=False) + "\n")


def settle(paths: Sequence[Path]) -> None:
    """Modified a minute ago: a file modified in the last seconds gets no stamp, so it would always be read."""
    settled = time.time() - 60
    for path in paths:
        os.utime(path, (settled, settled))


@dataclasses.dataclass
class Template:
    """zerda's own output of the template file: its manifest, index rows and chunk rows (bucket column added)."""

    manifest: dict[str, Any]
    index: pa.Table
    chunks: pa.Table
    chunk_schema: pa.Schema


def chunk_template(docs: Sequence[tuple[str, str]], scratch: Path) -> Template:
    """Run zerda (in this process, DirectRunner) on the template documents once."""
    from pipelines.cli.rechunk import run

    folder, out = scratch / "template-in", scratch / "template-out"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    folder.mkdir(parents=True)
    write_input(folder / "template.jsonl", "", docs)
    run(["--input", str(folder), "--output", str(out), "--quiet"])
    manifest = Manifest.load_url(str(out)).with_lists()
    index = pa.concat_tables([pq.read_table(p) for p in sorted((out / "_index").glob("*.pq"))])
    parts, schema = [], None
    for path in sorted(out.glob(f"{PARTITION_COLUMN}=*/*.parquet")):
        table = pq.read_table(path)
        schema = schema or table.schema.remove_metadata()
        bucket = int(path.parent.name.split("=")[1])
        parts.append(table.append_column(PARTITION_COLUMN, pa.array([bucket] * table.num_rows, pa.int32())))
    assert schema is not None, "the template gave no chunks"
    chunks = pa.concat_tables(parts).sort_by([("record", "ascending"), ("chunk_index", "ascending")])
    return Template(manifest, index.sort_by("record"), chunks, schema)


def _prefixed(column: pa.ChunkedArray, prefix: str) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(prefix, column, "")


def _new_chunk_ids(k: int, ids: Sequence[str]) -> list[str]:
    return [hashlib.blake2b(f"{k}:{old}".encode(), digest_size=16).hexdigest() for old in ids]


def replicate(template: Template, k: int, source: str) -> tuple[pa.Table, pa.Table]:
    """(index rows without their chunk file, chunk rows with their bucket) of input file ``k`` named ``source``."""
    chunks, index = template.chunks, template.index
    old = chunks.column("chunk_id").to_pylist()
    mapping = dict(zip(old, _new_chunk_ids(k, old), strict=True))
    sources = pa.array([source] * chunks.num_rows, pa.string())
    chunks = chunks.set_column(chunks.schema.get_field_index("chunk_id"), "chunk_id", pa.array(list(mapping.values())))
    chunks = chunks.set_column(chunks.schema.get_field_index("source"), "source", sources)
    chunks = chunks.set_column(
        chunks.schema.get_field_index("doc_id"), "doc_id", _prefixed(chunks.column("doc_id"), f"f{k}-")
    )
    lists = index.column("chunk_ids").combine_chunks()
    flat = pa.array([mapping[c] for c in lists.flatten().to_pylist()], pa.string())
    index = index.set_column(
        index.schema.get_field_index("chunk_ids"),
        INDEX_SCHEMA.field("chunk_ids"),
        pa.ListArray.from_arrays(lists.offsets, flat),
    )
    index = index.set_column(index.schema.get_field_index("source"), "source", pa.array([source] * index.num_rows))
    index = index.set_column(
        index.schema.get_field_index("doc_id"), "doc_id", _prefixed(index.column("doc_id"), f"f{k}-")
    )
    return index, chunks


def _write(path: Path, table: pa.Table, staged: str, row_group_size: int | None = None) -> None:
    """A Parquet file as zerda writes one: zstd, dictionaries on repeated columns, page checksums, its footer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    marked = table.replace_schema_metadata({STAGED_KEY: staged.encode()})
    pq.write_table(
        marked,
        path,
        row_group_size=row_group_size,
        compression="zstd",
        use_dictionary=[n for n in table.schema.names if n in REPEATED_COLUMNS],
        write_page_checksum=True,
    )


class _ChunkFile:
    """One chunk file being written: rows of whole documents, grouped by source, up to MAX_ROWS_PER_FILE."""

    def __init__(self, out: Path, run_id: str, bucket: int, schema: pa.Schema) -> None:
        name = f"part-{uuid.uuid4().hex}.parquet"
        self.relative = f"{PARTITION_COLUMN}={bucket}/{name}"
        staged = f"_staging/{run_id}/{self.relative}"
        (out / self.relative).parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(
            out / self.relative,
            schema.with_metadata({STAGED_KEY: staged.encode()}),
            compression="zstd",
            use_dictionary=[n for n in schema.names if n in REPEATED_COLUMNS],
            write_page_checksum=True,
        )
        self.rows = 0


def build_previous(corpus: Path, out: Path, files: int, docs_per_file: int, seed: int, scratch: Path) -> dict[str, Any]:
    """Write ``files`` input files of ``docs_per_file`` documents to ``corpus`` and, in ``out``, the output
    zerda would have committed for them (its manifest's stamps included). Returns that manifest."""
    docs = template_documents(docs_per_file, seed)
    template = chunk_template(docs, scratch)
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    corpus.mkdir(parents=True)
    out.mkdir(parents=True)
    paths = [corpus / input_name(k) for k in range(files)]
    for k, path in enumerate(paths):
        write_input(path, f"f{k}-", docs)
    settle(paths)
    listed = {Path(f.url).name: f for f in expand_inputs([str(corpus)])}
    run_id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"
    total_docs = files * template.index.num_rows
    partitions = index_partitions(total_docs)
    spill = scratch / "index-spill"
    shutil.rmtree(spill, ignore_errors=True)
    spill.mkdir()
    open_files: dict[int, _ChunkFile] = {}
    closed: list[_ChunkFile] = []
    by_partition: dict[int, list[tuple[str, Path]]] = defaultdict(list)
    ids: list[pa.Table] = []  # (doc_id, its id partition) of every document: every id is held once
    for k in range(files):
        source = source_name(listed[input_name(k)].url)
        index, chunks = replicate(template, k, source)
        buckets = chunks.column(PARTITION_COLUMN)
        chunk_file: dict[int, str] = {}
        for bucket in sorted(set(buckets.to_pylist())):
            rows = chunks.filter(pc.equal(buckets, bucket)).drop_columns([PARTITION_COLUMN])
            current = open_files.get(bucket)
            if current is not None and current.rows + rows.num_rows > MAX_ROWS_PER_FILE:
                current.writer.close()
                closed.append(current)
                current = None
            if current is None:
                current = open_files[bucket] = _ChunkFile(out, run_id, bucket, template.chunk_schema)
            current.writer.write_table(rows.cast(template.chunk_schema))
            current.rows += rows.num_rows
            chunk_file[bucket] = current.relative
        files_col = pa.array([chunk_file[b] for b in index.column(PARTITION_COLUMN).to_pylist()], pa.string())
        index = index.set_column(index.schema.get_field_index("chunk_file"), "chunk_file", files_col)
        pq.write_table(index.cast(INDEX_SCHEMA), spill / f"{k}.parquet")
        doc_ids = index.column("doc_id")
        id_parts = pa.array([partition_of(doc_id, partitions) for doc_id in doc_ids.to_pylist()], pa.int32())
        ids.append(pa.table({"doc_id": doc_ids, "part": id_parts}))
        by_partition[partition_of(source, partitions)].append((source, spill / f"{k}.parquet"))
    for current in open_files.values():
        current.writer.close()
        closed.append(current)
    entries: list[dict[str, Any]] = [{"path": f.relative, "rows": f.rows} for f in closed]
    for partition, parts in sorted(by_partition.items()):
        table = pa.concat_tables([pq.read_table(p) for _, p in sorted(parts)])
        relative = index_path(partition, partitions)
        _write(out / relative, table, f"_staging/{run_id}/_index/part-{uuid.uuid4().hex}.pq", INDEX_ROW_GROUP)
        entries.append({"path": relative, "rows": table.num_rows})
    shutil.rmtree(spill)
    every_id = pa.concat_tables(ids)
    for partition in range(partitions):
        in_part = every_id.filter(pc.equal(every_id.column("part"), partition)).sort_by("doc_id")
        if in_part.num_rows:
            table = pa.table([in_part.column("doc_id"), pa.array([1] * in_part.num_rows, pa.int64())], IDS_SCHEMA)
            relative = index_path(partition, partitions, IDS_DIR)
            _write(out / relative, table, f"_staging/{run_id}/{IDS_DIR}/part-{uuid.uuid4().hex}.pq")
            entries.append({"path": relative, "rows": table.num_rows})
    for directory, schema in ((REJECTS_DIR, REJECT_SCHEMA), (CHANGES_DIR, CHANGES_SCHEMA)):
        relative = f"{directory}/part-{uuid.uuid4().hex}.pq"
        _write(out / relative, schema.empty_table(), f"_staging/{run_id}/{relative}")
        entries.append({"path": relative, "rows": 0})
    manifest = scaled_manifest(template.manifest, files, [listed[input_name(k)] for k in range(files)])
    relative = f"{INPUTS_DIR}/part-{uuid.uuid4().hex}.pq"
    inputs = pa.Table.from_pylist(manifest.pop("inputs"), schema=INPUTS_SCHEMA)
    _write(out / relative, inputs, f"_staging/{run_id}/{relative}")
    entries.append({"path": relative, "rows": inputs.num_rows})
    for entry in entries:
        entry["bytes"] = (out / entry["path"]).stat().st_size
    manifest["output"] = {"root": str(out), "files_table": write_files_table(LocalFileSystem(), str(out), entries)}
    (out / MANIFEST_FILE).write_text(Manifest(manifest).dumps(), encoding="utf-8")
    (out / SUCCESS_FILE).write_bytes(b"")
    return manifest


def scaled_manifest(template: dict[str, Any], files: int, inputs: Sequence[Any]) -> dict[str, Any]:
    """The template's manifest for ``files`` copies of its input: counts scaled, one input entry per file."""
    manifest = json.loads(json.dumps(template))
    counts = manifest["counts"]
    for key in ("files_read", "records_read", "documents_chunked", "chunks", "text_chars", "overlap_chars"):
        counts[key] *= files
    for key in ("chunks_by_bucket", "chars_by_bucket"):
        counts[key] = {bucket: n * files for bucket, n in counts[key].items()}
    (entry,) = template["inputs"]
    manifest["inputs"] = [{**entry, "source": source_name(f.url), "stamp": f.stamp or ""} for f in inputs]
    changes = manifest["changes"]
    changes.update(documents_added=counts["documents_chunked"], chunks_added=counts["chunks"])
    return manifest


def change_corpus(corpus: Path, files: int, docs_per_file: int, seed: int) -> tuple[int, int]:
    """Rewrite one file in FILE_SHARE with one document in DOC_SHARE edited; (files, documents) changed."""
    docs = template_documents(docs_per_file, seed)
    changed = [k for k in range(files) if k % FILE_SHARE == 0]
    for k in changed:
        write_input(corpus / input_name(k), f"f{k}-", docs, edited=True)
    settle([corpus / input_name(k) for k in changed])
    return len(changed), len(changed) * len(range(0, docs_per_file, DOC_SHARE))


# ---------------------------------------------------------------- the measured run


@dataclasses.dataclass
class ProcessPeak:
    pid: int
    role: str
    peak_kib: int = 0  # the kernel's peak-RSS mark (VmHWM), else the largest RSS sampled
    first_seen_s: float = 0.0


@dataclasses.dataclass
class RunFigures:
    wall_s: float
    launch_s: float | None  # the launcher alone, until its first child process
    launch_rss_kib: int  # the launcher's peak RSS by then
    launch_cpu_s: float  # the launcher's CPU time (user and system) by then: less of the shared machine's load
    processes: list[ProcessPeak]
    manifest: dict[str, Any]
    error: str = ""  # why the run failed, its figures up to then kept (a Flink run at a size too large)

    @property
    def launcher(self) -> ProcessPeak:
        return self.processes[0]

    @property
    def max_kib(self) -> int:
        return max(p.peak_kib for p in self.processes)


def _role(proc: psutil.Process) -> str:
    try:
        cmd, name = " ".join(proc.cmdline()), proc.name()
    except psutil.Error:
        return "?"
    if name in ("sh", "bash", "dash"):
        return "shell"  # the command line that starts a worker process
    if "sdk_worker_main" in cmd or "worker_pool_main" in cmd or "SdkHarness" in cmd:
        return "worker"  # an SDK harness: the DirectRunner's worker process, or one the Flink worker pool started
    if name == "java" and "job-server" in cmd:
        return "job server"  # Beam's Flink job server, started by the launcher
    if "-m pip freeze" in cmd:
        return "pip freeze"  # the launcher lists its packages for a portable job's environment
    return "python" if "python" in cmd else (proc.name() or "?")


class Sampler(threading.Thread):
    """Every POLL_SECONDS: each process of the tree, its role and peak RSS; when the launcher got its first child.

    ``roots`` (pid: role): processes not started by the launcher (a Flink cluster's), sampled with their trees.
    """

    def __init__(
        self, pid: int, started: float, stop_at_launch: bool = False, roots: dict[int, str] | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.stop_at_launch = stop_at_launch
        self.started = started
        self.seen: dict[int, ProcessPeak] = {pid: ProcessPeak(pid, "launcher")}
        self.others = [psutil.Process(other) for other in roots or {}]
        self.seen.update({other: ProcessPeak(other, role) for other, role in (roots or {}).items()})
        self.descendants: list[psutil.Process] = []  # the launcher's, to end any it leaves behind
        self.launch_s: float | None = None
        self.launch_rss_kib = 0
        self.launch_cpu_s = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(POLL_SECONDS)

    def sample(self) -> None:
        try:
            children = self.root.children(recursive=True)
        except psutil.Error:
            return
        now = time.perf_counter() - self.started
        if children and self.launch_s is None:
            self.launch_s = now
            self.launch_rss_kib = max(peak_rss_kib(self.root.pid), self.seen[self.root.pid].peak_kib)
            with contextlib.suppress(psutil.Error):
                times = self.root.cpu_times()
                self.launch_cpu_s = times.user + times.system
            if self.stop_at_launch:  # a launch probe: the run stops as for a scheduler's SIGTERM, OUTPUT kept
                self.root.send_signal(signal.SIGTERM)
        self.descendants += [c for c in children if c not in self.descendants]
        for other in self.others:
            try:
                children += [other, *other.children(recursive=True)]
            except psutil.Error:
                continue
        for proc in [self.root, *children]:
            if proc.pid not in self.seen:
                self.seen[proc.pid] = ProcessPeak(proc.pid, _role(proc), first_seen_s=now)
            entry = self.seen[proc.pid]
            try:
                rss = proc.memory_info().rss // 1024
            except psutil.Error:
                continue
            entry.peak_kib = max(entry.peak_kib, rss, peak_rss_kib(proc.pid))

    def stop(self) -> None:
        self._done.set()
        self.join()


def measured_run(
    corpus: Path,
    out: Path,
    stop_at_launch: bool = False,
    beam_args: Sequence[str] = WORKER_ARGS,
    roots: dict[int, str] | None = None,
    timeout: float | None = None,
) -> RunFigures:
    """``zerda-rechunk --incremental`` with ``beam_args`` (2 worker processes), its process tree and ``roots``
    sampled; ``stop_at_launch``: stopped by SIGTERM when its first child process appears (the launch alone;
    OUTPUT keeps its output). A run that fails or outlasts ``timeout`` seconds gives its figures and the error."""
    cmd = [sys.executable, "-m", "pipelines.cli.rechunk", "--input", str(corpus), "--output", str(out)]
    cmd += ["--incremental", "--quiet", "--progress-seconds", "0", *beam_args]
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=child_env(REPO_ROOT), stdout=subprocess.DEVNULL, stderr=err)
        sampler = Sampler(proc.pid, started, stop_at_launch, roots)
        sampler.start()
        timed_out = ""
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = f"stopped after {timeout:g} s. "
            code = -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sampler.stop()
            for left in sampler.descendants:  # a job server the launcher did not stop
                with contextlib.suppress(psutil.Error):
                    left.kill()
        wall = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    processes = sorted(sampler.seen.values(), key=lambda p: p.first_seen_s)
    if code != (128 + signal.SIGTERM if stop_at_launch else 0):
        error = f"{timed_out}zerda-rechunk --incremental exited {code}: {stderr.strip()[-2000:]}"
        return RunFigures(wall, sampler.launch_s, sampler.launch_rss_kib, sampler.launch_cpu_s, processes, {}, error)
    manifest = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    return RunFigures(wall, sampler.launch_s, sampler.launch_rss_kib, sampler.launch_cpu_s, processes, manifest)


def succeeded(run: RunFigures) -> RunFigures:
    """The run, if it did not fail."""
    if run.error:
        raise RuntimeError(run.error)
    return run


def check_counts(manifest: dict[str, Any], documents: int, files: int, changed_docs: int, changed_files: int) -> None:
    """The run did what the change asks: so that a broken carry cannot pass as a fast run."""
    ch = manifest["changes"]
    expected = {
        "incremental": True,
        "documents_changed": changed_docs,
        "documents_unchanged": documents - changed_docs,
        "documents_added": 0,
        "documents_removed": 0,
        "files_unchanged": files - changed_files,
    }
    wrong = {k: (ch.get(k), v) for k, v in expected.items() if ch.get(k) != v}
    if wrong:
        raise RuntimeError(f"the incremental run did not carry as expected (found, expected): {wrong}; {ch}")


# ---------------------------------------------------------------- one size, the report


@dataclasses.dataclass
class SizeResult:
    documents: int
    files: int
    build_s: float
    previous_mb: float
    changed_files: int
    changed_docs: int
    run: RunFigures
    launches: list[tuple[float, int, float]]  # (seconds, launcher KiB, launcher CPU seconds) of each launch probe
    flink: RunFigures | None = None  # the same run on a Flink cluster (--runner flink)
    cluster_start_s: float = 0.0  # that cluster's start, until every TaskManager had registered

    @property
    def launch_s(self) -> float:
        """The median launch time: of the probes and the measured run (a shared machine's noise is large)."""
        return statistics.median([t for t, _, _ in self.launches])

    @property
    def launch_cpu_s(self) -> float:
        return statistics.median([cpu for _, _, cpu in self.launches])

    @property
    def launch_kib(self) -> int:
        return max(kib for _, kib, _ in self.launches)


def measure_size(
    documents: int, files: int, seed: int, scratch: Path, launch_probes: int, flink_timeout: float | None = None
) -> SizeResult:
    """Build the previous output of ``documents`` in ``files`` and run the incremental job on the DirectRunner
    and, given ``flink_timeout``, on a Flink cluster too (from a copy of the same previous output)."""
    docs_per_file = documents // files
    corpus, out, flink_out = scratch / "corpus", scratch / "out", scratch / "out-flink"
    started = time.perf_counter()
    build_previous(corpus, out, files, docs_per_file, seed, scratch)
    build_s = time.perf_counter() - started
    previous_mb = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6
    changed_files, changed_docs = change_corpus(corpus, files, docs_per_file, seed)
    if flink_timeout is not None:
        shutil.copytree(out, flink_out)
    print(f"bench: {documents:,} documents built in {build_s:.0f} s ({previous_mb:,.0f} MB); running", flush=True)
    committed = (out / MANIFEST_FILE).read_bytes()
    probes = [succeeded(measured_run(corpus, out, stop_at_launch=True)) for _ in range(launch_probes)]
    if (out / MANIFEST_FILE).read_bytes() != committed or not (out / SUCCESS_FILE).exists():
        raise RuntimeError("a launch probe, stopped, changed the previous output")
    run = succeeded(measured_run(corpus, out))
    check_counts(run.manifest, docs_per_file * files, files, changed_docs, changed_files)
    launches = [(r.launch_s, r.launch_rss_kib, r.launch_cpu_s) for r in [*probes, run] if r.launch_s is not None]
    result = SizeResult(docs_per_file * files, files, build_s, previous_mb, changed_files, changed_docs, run, launches)
    print(f"bench: {documents:,} documents: {summary_line(result)}", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    if flink_timeout is not None:
        result.flink, result.cluster_start_s = flink_run(corpus, flink_out, scratch / "flink", flink_timeout)
        if not result.flink.error:
            check_counts(result.flink.manifest, docs_per_file * files, files, changed_docs, changed_files)
        peaks = ", ".join(f"{p.role} {_mib(p.peak_kib):,.0f}" for p in result.flink.processes)
        failed = f"; FAILED: {result.flink.error}" if result.flink.error else ""
        print(f"bench: {documents:,} documents on Flink: wall {result.flink.wall_s:.1f} s; {peaks}{failed}", flush=True)
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.rmtree(flink_out, ignore_errors=True)
    return result


def flink_run(corpus: Path, out: Path, workdir: Path, timeout: float) -> tuple[RunFigures, float]:
    """The incremental run on a cluster started for it (its JVMs' peaks are this run's), and the start's seconds.

    The SDK harnesses run as processes of their own, as the DirectRunner's workers do, so each one is measured.
    """
    from tests.flink_cluster import running_cluster  # the tests' cluster: pytest is installed with the bench extra

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    started = time.perf_counter()
    with running_cluster(workdir, harness_processes=True) as cluster:
        start_s = time.perf_counter() - started
        assert cluster.worker_pool is not None
        roots = {cluster.jobmanager.pid: "JobManager", cluster.worker_pool.pid: "worker pool"}
        roots |= {tm.pid: "TaskManager" for tm in cluster.taskmanagers.values()}
        run = measured_run(corpus, out, beam_args=cluster.beam_args(), roots=roots, timeout=timeout)
        if run.error:
            logs = sorted(cluster.logs.glob("taskmanager-*.log"))
            print(*(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in logs), sep="\n")
    shutil.rmtree(workdir, ignore_errors=True)
    return run, start_s


def _mib(kib: int) -> float:
    return kib / 1024


def summary_line(r: SizeResult) -> str:
    peaks = ", ".join(f"{p.role} {_mib(p.peak_kib):,.0f}" for p in r.run.processes)
    launch = ", ".join(f"{t:.1f}" for t, _, _ in r.launches)
    return (
        f"wall {r.run.wall_s:.1f} s; peak RSS MiB: {peaks}; max {_mib(r.run.max_kib):,.0f}; "
        f"launcher until its first child {launch} s (median {r.launch_s:.1f}; CPU {r.launch_cpu_s:.2f} s) at"
        f" {_mib(r.launch_kib):,.0f} MiB"
    )


def ranked(r: SizeResult, role: str) -> list[ProcessPeak]:
    """The processes of one role, largest peak first (worker processes are matched across sizes by rank)."""
    return sorted((p for p in r.run.processes if p.role == role), key=lambda p: -p.peak_kib)


def code_line() -> str:
    """The commit measured, and whether the job's code had uncommitted changes."""
    commit = git("log", "-1", "--format=%h") or "(no commit)"
    dirty = " with uncommitted changes" if git("status", "--porcelain", "--", "pipelines", "zerda_core") else ""
    return f"Code: commit {commit}{dirty}."


def report(argv: Sequence[str], results: list[SizeResult]) -> str:
    lines = header("Incremental run: memory and launch against corpus size", "bench_memory.py", argv)
    lines += [
        code_line(),
        "",
        "A previous output built directly (not chunked) at each size: input files of a seeded template of prose"
        " documents (300-800 characters) replicated with new ids, and zerda's own output of that template"
        " replicated alike (index partitioned by source, chunk files of at most 100,000 rows, manifest with each"
        f" input's stamp). Then {100 // FILE_SHARE}% of the files rewritten with {100 // DOC_SHARE}% of their"
        " documents edited, and `zerda-rechunk --incremental --direct_num_workers=2"
        " --direct_running_mode=multi_processing` as a subprocess, every process of its tree sampled every"
        f" {POLL_SECONDS:g} s (peak: the kernel's VmHWM mark). The run's manifest is checked: documents changed,"
        " unchanged and files not read as the change asks. One run per size. The launch (the launcher alone, until"
        " its first child process, the first worker, appears) is timed in that run and in"
        f" {args_probes(argv)} launch probes before it (runs stopped by SIGTERM at that moment, the previous"
        " output checked unchanged): the median is compared, and the median of the launcher's CPU time by then"
        " (user and system), which the load of a shared machine changes less.",
        "",
        "| documents | files | previous output MB | build s | changed docs | files not read | wall s |"
        " launch s, median (each) | launch CPU s, median | launcher RSS at launch MiB | peak RSS MiB per process |"
        " max MiB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in results:
        ch = r.run.manifest["changes"]
        peaks = ", ".join(f"{p.role} {_mib(p.peak_kib):,.0f}" for p in r.run.processes)
        launch = f"{r.launch_s:.1f} ({', '.join(f'{t:.1f}' for t, _, _ in r.launches)})"
        lines.append(
            f"| {r.documents:,} | {r.files} | {r.previous_mb:,.0f} | {r.build_s:.0f} | {ch['documents_changed']:,} |"
            f" {ch['files_unchanged']} | {r.run.wall_s:.1f} | {launch} | {r.launch_cpu_s:.2f} |"
            f" {_mib(r.launch_kib):,.0f} |"
            f" {peaks} | {_mib(r.run.max_kib):,.0f} |"
        )
    lines += ["", *ratio_lines(results), ""]
    return "\n".join(lines)


def args_probes(argv: Sequence[str]) -> int:
    return int(argv[argv.index("--launch-probes") + 1]) if "--launch-probes" in argv else LAUNCH_PROBES


def _verdict(value: float, limit: float) -> str:
    return "met" if value <= limit else "missed"


def ratio_lines(results: list[SizeResult]) -> list[str]:
    over = [r for r in results for p in r.run.processes if _mib(p.peak_kib) > TARGET_RSS_MIB]
    lines = [
        f"Every process ≤ {TARGET_RSS_MIB:,} MiB at every size: {'missed' if over else 'met'}"
        f" (largest {max(_mib(r.run.max_kib) for r in results):,.0f} MiB).",
    ]
    if len(results) < 2:
        return lines
    small, large = min(results, key=lambda r: r.documents), max(results, key=lambda r: r.documents)
    scale = large.documents / small.documents
    lines += [
        "",
        f"Ratios {large.documents:,} / {small.documents:,} documents ({scale:g}x the corpus);"
        f" target ≤ {TARGET_RATIO}x:",
        "",
        "| figure | small | large | ratio | target |",
        "| --- | ---: | ---: | ---: | --- |",
    ]

    def row(name: str, a: float, b: float, unit: str) -> None:
        ratio = b / a if a else float("inf")
        lines.append(f"| {name} | {a:,.1f} {unit} | {b:,.1f} {unit} | {ratio:.2f}x | {_verdict(ratio, TARGET_RATIO)} |")

    for role in ("launcher", "worker", "python"):  # not the shells that start the workers (a few MiB)
        for rank, (a, b) in enumerate(zip(ranked(small, role), ranked(large, role), strict=False)):
            name = f"peak RSS, {role}" if role == "launcher" else f"peak RSS, {role} #{rank + 1}"
            row(name, _mib(a.peak_kib), _mib(b.peak_kib), "MiB")
    row("peak RSS, largest process", _mib(small.run.max_kib), _mib(large.run.max_kib), "MiB")
    row("launcher wall time until its first child (median)", small.launch_s, large.launch_s, "s")
    row("launcher RSS at that moment (largest)", _mib(small.launch_kib), _mib(large.launch_kib), "MiB")
    lines.append(
        f"| launcher CPU time until its first child (median; no target: the wall time's share of the work) |"
        f" {small.launch_cpu_s:.2f} s | {large.launch_cpu_s:.2f} s | {large.launch_cpu_s / small.launch_cpu_s:.2f}x | |"
    )
    lines.append(
        f"| wall time of the run (no target) | {small.run.wall_s:.1f} s | {large.run.wall_s:.1f} s |"
        f" {large.run.wall_s / small.run.wall_s:.2f}x | |"
    )
    return lines


FLINK_ROLES = ("launcher", "job server", "pip freeze", "worker", "worker pool", "JobManager", "TaskManager", "python")
TOP = 2  # rows per role, its largest processes: a Flink job starts SDK harnesses again and again as tasks come


def flink_report(argv: Sequence[str], results: list[SizeResult]) -> str:
    """The Flink run beside the DirectRunner's, size by size: every process's peak RSS and the ratios."""
    title = "Incremental run on Flink beside the DirectRunner: memory against corpus size"
    lines = header(title, "bench_memory.py", argv)
    lines += [
        code_line(),
        "",
        "The previous output built directly at each size as for incremental_memory.md, then"
        f" {100 // FILE_SHARE}% of the files rewritten with {100 // DOC_SHARE}% of their documents edited, and"
        " `zerda-rechunk --incremental` run twice from the same previous output (copied before the first run):"
        " with `--direct_num_workers=2 --direct_running_mode=multi_processing`, then on a Flink 1.19 session"
        " cluster started for that size alone (tests/flink_cluster.py: a JobManager, 2 TaskManagers of 2 slots,"
        " `--parallelism=2`, Beam's Python worker pool with each SDK harness a process of its own, `EXTERNAL`"
        " environment; the launcher starts Beam's Flink job server). Every process sampled every"
        f" {POLL_SECONDS:g} s (peak: the kernel's VmHWM mark); each run's manifest checked (documents changed,"
        " unchanged, files not read). One run per runner and size. A `worker` is an SDK harness process: the"
        " DirectRunner's worker processes, the worker pool's children on Flink. The JVMs' sizes are the"
        " cluster's settings (TaskManager heap 384 MiB, network 512 MiB, managed 128 MiB), not the corpus's."
        " Wall times are of a shared 2-core machine with other work running: noisy; the memory figures are"
        " what to compare.",
        "",
        "| documents | files | previous output MB | build s | changed docs | files not read |"
        " wall s, DirectRunner | wall s, Flink | Flink cluster start s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        flink = r.flink
        assert flink is not None
        ch = r.run.manifest["changes"]
        flink_wall = f"{flink.wall_s:.1f}" + (" (failed)" if flink.error else "")
        lines.append(
            f"| {r.documents:,} | {r.files} | {r.previous_mb:,.0f} | {r.build_s:.0f} | {ch['documents_changed']:,} |"
            f" {ch['files_unchanged']} | {r.run.wall_s:.1f} | {flink_wall} | {r.cluster_start_s:.1f} |"
        )
    runs = [("DirectRunner", r, r.run) for r in results] + [("Flink", r, r.flink) for r in results if r.flink]
    heads = [f"{name} {r.documents:,}" for name, r, _ in runs]
    direct_heads, flink_heads = " | ".join(heads[: len(results)]), " | ".join(heads[len(results) :])
    lines += [
        "",
        "Peak RSS MiB of each process (processes of a role matched across sizes by rank, largest first;"
        " ratio: the larger size's over the smaller's):",
        "",
        f"| process | {direct_heads} | ratio | {flink_heads} | ratio |",
        "| --- |" + " ---: |" * (len(runs) + 2),
    ]

    def cells(values: list[float | None]) -> list[str]:
        """One runner's figures at each size, then the ratio of the last to the first."""
        shown = ["—" if v is None else f"{v:,.0f}" for v in values]
        first, last = values[0], values[-1]
        return [*shown, f"{last / first:.2f}x" if len(values) > 1 and first and last else "—"]

    def row(name: str, figure: Any) -> None:
        direct = [figure(run) for _, _, run in runs[: len(results)]]
        flink = [figure(run) for _, _, run in runs[len(results) :]]
        lines.append(f"| {name} | " + " | ".join(cells(direct) + cells(flink)) + " |")

    def of_role(role: str, rank: int) -> Any:
        def peak(run: RunFigures) -> float | None:
            ranked_peaks = sorted((p.peak_kib for p in run.processes if p.role == role), reverse=True)
            return _mib(ranked_peaks[rank]) if rank < len(ranked_peaks) else None

        return peak

    for role in FLINK_ROLES:
        most = max(sum(p.role == role for p in run.processes) for _, _, run in runs)
        for rank in range(min(most, TOP)):
            row(f"{role} #{rank + 1}" if most > 1 else role, of_role(role, rank))
    row("worker processes started (count)", lambda run: float(sum(p.role == "worker" for p in run.processes)))
    row("largest process", lambda run: _mib(run.max_kib))
    row("all processes together", lambda run: _mib(sum(p.peak_kib for p in run.processes if p.role != "shell")))
    row("wall time of the run, s (noisy)", lambda run: run.wall_s)
    failures = [(r, r.flink.error) for r in results if r.flink and r.flink.error]
    lines += ["", *(f"On Flink at {r.documents:,} documents the run failed: {error}" for r, error in failures)]
    return "\n".join(lines).rstrip("\n") + "\n"


def check_carried(out: Path, corpus: Path, documents: int, files: int) -> dict[str, Any]:
    """An incremental run with no change over a built previous output: it must carry every document and file."""
    fingerprint = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))["fingerprint"]
    previous = read_previous(str(out), fingerprint, True)
    if not previous.carry:
        raise RuntimeError(f"zerda does not carry the built output: {previous.reason}")
    if not previous.counts_ids:
        raise RuntimeError("zerda does not count duplicate ids from the built output's id counts")
    from pipelines.cli.rechunk import run

    manifest = run(["--input", str(corpus), "--output", str(out), "--incremental", "--quiet"])
    ch = manifest["changes"]
    if (ch["documents_unchanged"], ch["files_unchanged"]) != (documents, files):
        raise RuntimeError(f"the built output is not carried whole: {ch}")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default="250000,1000000", help="corpus sizes in documents (default 250000,1000000)")
    parser.add_argument("--files", type=int, default=200, help="input files at every size (default 200)")
    parser.add_argument(
        "--docs-per-file",
        type=int,
        default=0,
        help="instead of --files: files of this many documents, their number growing with the corpus (its shape"
        " at 10 TB: more files, not bigger ones)",
    )
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument(
        "--launch-probes", type=int, default=LAUNCH_PROBES, help="runs stopped at launch, per size (default 2)"
    )
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the corpora (default: a temp folder)")
    parser.add_argument("--check", action="store_true", help="only build the smallest size and check it is carried")
    parser.add_argument(
        "--runner",
        choices=("direct", "flink"),
        default="direct",
        help="flink: also run the same job on a Flink cluster started for each size, the two reported side by side",
    )
    parser.add_argument(
        "--flink-timeout", type=float, default=3600, help="seconds a Flink run may take before it is stopped"
    )
    parser.add_argument(
        "--results", type=Path, default=None, help=f"default {RESULTS.name}; with --runner flink {RESULTS_FLINK.name}"
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.docs.split(","))
    with tempfile.TemporaryDirectory(prefix="zerda-bench-memory-", dir=args.scratch) as tmp:
        scratch = Path(tmp)
        if args.check:
            build_previous(scratch / "corpus", scratch / "out", args.files, sizes[0] // args.files, args.seed, scratch)
            ch = check_carried(scratch / "out", scratch / "corpus", sizes[0] // args.files * args.files, args.files)
            print(f"bench: the built output is carried: {ch['changes']}")
            return 0
        files = [n // args.docs_per_file if args.docs_per_file else args.files for n in sizes]
        flink_timeout = args.flink_timeout if args.runner == "flink" else None
        results = [
            measure_size(n, f, args.seed, scratch, args.launch_probes, flink_timeout)
            for n, f in zip(sizes, files, strict=True)
        ]
    shown = sys.argv[1:] if argv is None else argv
    if args.runner == "flink":
        save(flink_report(shown, results), args.results or RESULTS_FLINK)
    else:
        save(report(shown, results), args.results or RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
