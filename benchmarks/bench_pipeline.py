"""End-to-end speed and memory of the Beam pipeline beside a plain Python loop, in one run.

Why this shape:
- The corpus is many JSONL files (plain, uncompressed, unless ``--gzip``) mixing real text no one
  here wrote (Debian's Python manual and Arabic handbook, see corpus.py; repeated with new ids to
  fill half the size) and the seeded synthetic mix (synthetic.py), alternating. Each document goes to
  the file with the fewest bytes, so every file has the same mix and the first quarter of the files
  is a representative 1x corpus.
- Every measurement is a fresh subprocess: the plain loop (plain_loop.py), the pipeline on the
  in-memory DirectRunner with one worker, and on ``multi_processing`` with two worker processes.
  All pay the same interpreter start and imports; wall time is what a user waits for.
- Modes run interleaved within each repetition (the first mode rotated), medians reported, so
  machine noise lands on all of them alike. The page cache is warmed before the first run.
- Peak memory: the kernel's peak-RSS mark (VmHWM) of every process of the tree, the largest one,
  and the sum of RSS over the process tree sampled by psutil (which includes Beam's worker processes).

Run from the repo root: ``python benchmarks/bench_pipeline.py`` (about 3-4 minutes on 2 cores; builds
the 100 MB corpus under benchmarks/.corpus/ once) or ``--quick`` (10 MB, under a minute). A full
run rewrites benchmarks/results/pipeline.md. ``--profile`` adds stage times and a cProfile of an
in-process run; ``--code DIR`` measures a patched copy of pipelines/ (results not saved by default).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gzip
import io
import itertools
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `pipelines` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus, synthetic
from benchmarks.scaffold import (
    REPO_ROOT,
    RESULTS_DIR,
    ensure_real_corpora,
    header,
    parser,
    peak_rss_kib,
    save,
    source_line,
)

RESULTS = RESULTS_DIR / "pipeline.md"
PLAIN_LOOP = Path(__file__).resolve().parent / "plain_loop.py"
CORPUS_FORMAT = 2  # bump when the corpus layout changes, so stale caches are rebuilt
REAL_SHARE = 0.5  # of the corpus bytes taken from the Debian docs (repeated), the rest synthetic
SYNTHETIC_SLICE_BYTES = 4_000_000  # synthetic text generated at a time
# The issues' targets: throughput over a plain loop's (issue 3: the loop without a write; issue 12: what the job
# cannot avoid, the loop that also writes the Parquet), and peak RSS at 4x over 1x.
SPEED_TARGETS = (
    ("issue 3", "plain", {"direct-1": 0.8, "multi-2": 1.4}),
    ("issue 12", "plain-parquet", {"direct-1": 0.9, "multi-2": 1.6}),
)
MEMORY_TARGET = 1.3
POLL_SECONDS = 0.05
MIN_FIT_BYTES = 20_000_000  # a smaller 1x corpus gives no usable fixed-cost / marginal-rate line
MIB = 1 << 20


# ---------------------------------------------------------------- corpus


@dataclass(frozen=True)
class BenchCorpus:
    """The JSONL files of one benchmark corpus and what is in them."""

    directory: Path
    files: list[Path]
    jsonl_bytes: dict[str, int]  # uncompressed, per file name
    documents: int
    real_share: float  # of the uncompressed JSONL bytes
    gzip: bool

    @property
    def n_bytes(self) -> int:
        """Uncompressed JSONL bytes: what MB/s counts, with or without --gzip."""
        return sum(self.jsonl_bytes[f.name] for f in self.files)

    @property
    def stored_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)

    def subset(self, fraction: float) -> BenchCorpus:
        """The first ``fraction`` of the files: the same mix, since documents were dealt evenly."""
        files = self.files[: max(1, round(len(self.files) * fraction))]
        documents = round(self.documents * len(files) / len(self.files))  # about: only shown
        return BenchCorpus(self.directory, files, self.jsonl_bytes, documents, self.real_share, self.gzip)


def _json_line(doc_id: str, text: str) -> bytes:
    return (json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n").encode("utf-8")


def real_documents() -> Iterator[tuple[str, str]]:
    """Debian-doc documents as (id, text), cycled for ever (copy k gets a ``#k`` id); none if not prepared."""
    docs = [(f"{name}/{i}", text) for name, texts in corpus.iter_cached() for i, text in enumerate(texts)]
    if not docs:
        return
    for copy in itertools.count():
        for doc_id, text in docs:
            yield f"{doc_id}#{copy}", text


def synthetic_documents(seed: int) -> Iterator[tuple[str, str]]:
    """Seeded synthetic documents as (id, text), generated a slice at a time so memory stays bounded."""
    for part in itertools.count():
        for i, text in enumerate(synthetic.generate(SYNTHETIC_SLICE_BYTES, seed=seed + part)):
            yield f"synthetic/{part}/{i}", text


def corpus_lines(target_bytes: int, seed: int) -> Iterator[tuple[bytes, bool]]:
    """(JSONL line, is real) until ``target_bytes``: a real document whenever real text is under its share."""
    real, made = real_documents(), synthetic_documents(seed)
    written = {True: 0, False: 0}
    while (total := written[True] + written[False]) < target_bytes:
        doc = next(real, None) if written[True] <= REAL_SHARE * total else None
        is_real = doc is not None
        line = _json_line(*(doc or next(made)))
        written[is_real] += len(line)
        yield line, is_real


def corpus_dir(mb: float, n_files: int, seed: int, use_gzip: bool) -> Path:
    """Cache folder named after everything that shapes the corpus."""
    kind = "jsonl.gz" if use_gzip else "jsonl"
    return corpus.CACHE_DIR / f"pipeline-v{CORPUS_FORMAT}-{mb:g}MB-{n_files}files-{kind}-seed{seed}"


def build_corpus(directory: Path, mb: float, n_files: int, seed: int, use_gzip: bool) -> dict[str, Any]:
    """Write the corpus into ``directory``, streamed (this process must stay small: a child forked from it
    inherits its RSS in ``ru_maxrss``), through a temporary folder so a killed build is never reused.

    Each document goes to the file with the fewest bytes so far: even sizes, and the same mix in every file.
    """
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    suffix = ".jsonl.gz" if use_gzip else ".jsonl"
    sizes = [0] * n_files
    paths = [tmp / f"part-{index:03d}{suffix}" for index in range(n_files)]
    meta: dict[str, Any] = {"documents": 0, "jsonl_bytes": 0, "real_bytes": 0}
    with contextlib.ExitStack() as stack:
        opened = (gzip.open(p, "wb", 6) if use_gzip else p.open("wb") for p in paths)  # noqa: SIM115 - ExitStack
        outs = [stack.enter_context(out) for out in opened]
        for line, is_real in corpus_lines(int(mb * 1e6), seed):
            smallest = sizes.index(min(sizes))
            outs[smallest].write(line)
            sizes[smallest] += len(line)
            meta["documents"] += 1
            meta["jsonl_bytes"] += len(line)
            meta["real_bytes"] += len(line) if is_real else 0
    meta["files"] = {path.name: size for path, size in zip(paths, sizes, strict=True)}
    (tmp / "_meta.json").write_text(json.dumps(meta))
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return meta


def load_corpus(mb: float, n_files: int, seed: int, use_gzip: bool, allow_setup: bool) -> BenchCorpus:
    """The cached corpus, built first if missing; the real Debian corpora are prepared if they can be."""
    directory = corpus_dir(mb, n_files, seed, use_gzip)
    meta_path = directory / "_meta.json"
    if not meta_path.exists() or "files" not in json.loads(meta_path.read_text()):
        ensure_real_corpora(allow_setup)
        print(f"bench: building the {mb:g} MB corpus in {directory} (once)", flush=True)
        build_corpus(directory, mb, n_files, seed, use_gzip)
    meta = json.loads(meta_path.read_text())
    files = [directory / name for name in sorted(meta["files"])]
    real_share = meta["real_bytes"] / max(1, meta["jsonl_bytes"])
    return BenchCorpus(directory, files, meta["files"], meta["documents"], real_share, use_gzip)


def warm_page_cache(files: Sequence[Path]) -> None:
    """Read every file once so the first measured run does not pay for the disk."""
    for path in files:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


# ---------------------------------------------------------------- measuring one subprocess


@dataclass
class Run:
    """One subprocess: times, peak memory, and what it reported (JSON tally or manifest counts)."""

    wall_s: float
    cpu_s: float
    proc_peak_mib: float
    tree_peak_mib: float
    inner_s: float
    chunks: int
    processes: int
    foreign_cpu: float | None


@dataclass
class Measurement:
    """What ``measure`` saw of one finished subprocess."""

    wall_s: float
    cpu_s: float
    maxrss_kib: int
    hwm_kib: int
    tree_peak_bytes: int
    processes: int
    foreign_cpu: float | None
    stdout: str


def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat), or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def foreign_share(busy_before: float | None, busy_after: float | None, own_cpu: float, wall: float) -> float | None:
    """Share of the machine's cores kept busy by other processes during a run: noise, not our cost."""
    if busy_before is None or busy_after is None:
        return None
    return max(0.0, (busy_after - busy_before - own_cpu) / (wall * (os.cpu_count() or 1)))


class TreeSampler(threading.Thread):
    """Samples, for a process and all its descendants, the summed RSS and the largest peak-RSS mark."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.hwm_kib = 0
        self.processes = 1
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            pids, total = self._tree()
            self.peak = max(self.peak, total)
            self.processes = max(self.processes, len(pids))
            self.hwm_kib = max([self.hwm_kib, *map(peak_rss_kib, pids)])
            self._stop_event.wait(POLL_SECONDS)

    def _tree(self) -> tuple[list[int], int]:
        """The pids of the process tree and its summed RSS; without psutil, the process alone and 0."""
        try:
            import psutil
        except ImportError:
            return [self.pid], 0
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return [], 0
        total = 0
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return [proc.pid for proc in tree], total

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def measure(cmd: list[str], env: dict[str, str], cwd: Path) -> Measurement:
    """Run ``cmd`` to the end; raises RuntimeError with the stderr tail when it fails.

    ``wait4`` gives the CPU time of the process and every descendant it waited for (Beam's worker
    processes). Peak memory comes from the sampler: each process's VmHWM (its exact peak since exec)
    and the tree's RSS sum. ``ru_maxrss`` is only a fallback off Linux: a forked child starts with its
    parent's RSS in it, so it reports this benchmark's own size when that is larger.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        busy_before = busy_cpu_seconds()
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted: do not leave the run behind
            proc.kill()
            proc.wait()
            sampler.stop()
            raise
        wall = time.perf_counter() - start
        busy_after = busy_cpu_seconds()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
        sampler.stop()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {stderr.strip()[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    foreign = foreign_share(busy_before, busy_after, cpu, wall)
    return Measurement(wall, cpu, usage.ru_maxrss, sampler.hwm_kib, sampler.peak, sampler.processes, foreign, stdout)


# ---------------------------------------------------------------- the modes


@dataclass(frozen=True)
class Mode:
    """A way to process the corpus: a command line builder and how to read its inner time and chunks."""

    key: str
    label: str
    pipeline: bool
    beam_args: tuple[str, ...] = ()
    parquet: bool = False

    def command(self, files: Sequence[Path], out: Path) -> list[str]:
        if not self.pipeline:
            extra = ["--parquet", str(out)] if self.parquet else []
            return [sys.executable, str(PLAIN_LOOP), *extra, *map(str, files)]
        inputs = [arg for f in files for arg in ("--input", str(f))]
        return [
            sys.executable,
            "-m",
            "pipelines.cli.rechunk",
            *inputs,
            "--output",
            str(out),
            "--quiet",
            "--progress-seconds",
            "0",
            *self.beam_args,
        ]


MODES = (
    Mode("plain", "plain loop: read + chunk + row dicts", pipeline=False),
    Mode("plain-parquet", "plain loop + Parquet write", pipeline=False, parquet=True),
    Mode(
        "direct-1",
        "pipeline, DirectRunner in_memory, 1 worker",
        pipeline=True,
        beam_args=("--direct_running_mode=in_memory", "--direct_num_workers=1"),
    ),
    Mode(
        "multi-2",
        "pipeline, DirectRunner multi_processing, 2 workers",
        pipeline=True,
        beam_args=("--direct_running_mode=multi_processing", "--direct_num_workers=2"),
    ),
)
REFERENCE = "plain"


@dataclass(frozen=True)
class Setup:
    """Where the code under test is imported from, and a scratch folder for outputs."""

    code: Path
    scratch: Path


def child_env(code: Path) -> dict[str, str]:
    """The environment for every subprocess: the code on PYTHONPATH, so Beam's worker processes import it too."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def run_mode(mode: Mode, files: Sequence[Path], setup: Setup) -> Run:
    """One measured run of ``mode``; its output folder is deleted afterwards."""
    out = setup.scratch / f"out-{mode.key}"
    shutil.rmtree(out, ignore_errors=True)
    try:
        seen = measure(mode.command(files, out), child_env(setup.code), setup.code)
        if mode.pipeline:
            manifest = json.loads((out / "_manifest.json").read_text())
            inner, chunks = float(manifest["timings"]["seconds"]), int(manifest["counts"]["chunks"])
        else:
            tally = json.loads(seen.stdout.strip().splitlines()[-1])
            inner, chunks = float(tally["seconds"]), int(tally["chunks"])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    peak_mib = (seen.hwm_kib or seen.maxrss_kib) / 1024
    tree_mib = max(seen.tree_peak_bytes / MIB, peak_mib)  # the sampler may miss a short peak
    return Run(seen.wall_s, seen.cpu_s, peak_mib, tree_mib, inner, chunks, seen.processes, seen.foreign_cpu)


@dataclass
class Series:
    """Every run of one mode on one corpus."""

    mode: Mode
    n_bytes: int
    n_files: int
    runs: list[Run] = field(default_factory=list)

    def median(self, attribute: str) -> float:
        return statistics.median(getattr(run, attribute) for run in self.runs)

    def mb_per_s(self, attribute: str = "wall_s") -> list[float]:
        return [self.n_bytes / 1e6 / getattr(run, attribute) for run in self.runs]


def interleaved(
    modes: Sequence[Mode], data: BenchCorpus, reps: int, budget_s: float, setup: Setup
) -> dict[str, Series]:
    """``reps`` rounds of every mode, first mode rotated each round; fewer rounds if over ``budget_s``."""
    series = {m.key: Series(m, data.n_bytes, len(data.files)) for m in modes}
    started = time.perf_counter()
    for rep in range(reps):
        shift = rep % len(modes)
        for mode in [*modes[shift:], *modes[:shift]]:
            run = run_mode(mode, data.files, setup)
            series[mode.key].runs.append(run)
            print(
                f"bench: {data.n_bytes / 1e6:.0f} MB round {rep + 1}/{reps} {mode.key}: {run.wall_s:.1f}s wall, "
                f"{run.inner_s:.1f}s inner, "
                f"{run.cpu_s:.1f} CPU s, others used {_percent(run.foreign_cpu)} of the cores, "
                f"peak {run.proc_peak_mib:.0f} MiB (tree of {run.processes}: {run.tree_peak_mib:.0f} MiB), "
                f"{run.chunks} chunks",
                flush=True,
            )
        elapsed = time.perf_counter() - started
        if rep + 1 < reps and elapsed / (rep + 1) * (rep + 2) > budget_s:
            print(f"bench: stopping after {rep + 1} rounds: another would pass the {budget_s:.0f}s budget")
            break
    return series


def _percent(share: float | None) -> str:
    return "?" if share is None else f"{100 * share:.0f}%"


# ---------------------------------------------------------------- profile


def _stage_timer(times: dict[str, float]) -> Callable[[], None]:
    """Time every fused stage of the FnApiRunner (a private method, so best effort); returns the undo."""
    try:
        from apache_beam.runners.portability.fn_api_runner import fn_runner
    except ImportError:
        return lambda: None
    runner = fn_runner.FnApiRunner
    original = getattr(runner, "_execute_bundle", None)
    if original is None:
        return lambda: None

    def timed(self: Any, context: Any, bundle_manager: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, context, bundle_manager, *args, **kwargs)
        finally:
            name = bundle_manager.stage.name
            times[name] = times.get(name, 0.0) + time.perf_counter() - start

    runner._execute_bundle = timed  # type: ignore[method-assign]
    return lambda: setattr(runner, "_execute_bundle", original)


def _short_stage(name: str, width: int = 110) -> str:
    """A fused stage's name without Beam's parentheses and ref_AppliedPTransform_ prefixes."""
    parts = [part.strip("()+ ").replace("ref_AppliedPTransform_", "") for part in name.split(")+(")]
    text = " + ".join(part for part in parts if part)
    return text if len(text) <= width else text[: width - 3] + "..."


def profile_pipeline(files: Sequence[Path], setup: Setup, top: int = 30) -> str:
    """Where an in-process ``pipelines.cli.rechunk.run`` (in_memory, 1 worker) spends its time: stages and functions."""
    sys.path.insert(0, str(setup.code))
    from pipelines.cli.rechunk import run

    out = setup.scratch / "out-profile"
    argv = [*(arg for f in files for arg in ("--input", str(f))), "--output", str(out), "--quiet"]
    argv += ["--progress-seconds", "0", "--direct_running_mode=in_memory", "--direct_num_workers=1"]
    stages: dict[str, float] = {}
    undo = _stage_timer(stages)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    try:
        profiler.enable()
        run(argv)
        profiler.disable()
    finally:
        undo()
    total = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    text = io.StringIO()
    text.write(
        f"run() took {total:.2f}s under cProfile; {len(stages)} fused stages took {sum(stages.values()):.2f}s:\n"
    )
    for name, seconds in sorted(stages.items(), key=lambda item: -item[1]):
        text.write(f"  {seconds:7.3f}s  {_short_stage(name)}\n")
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


# ---------------------------------------------------------------- report


@dataclass(frozen=True)
class Results:
    """Everything measured: the rounds on the whole corpus (4x) and on its first quarter (1x)."""

    data: BenchCorpus
    large: dict[str, Series]
    small: dict[str, Series]


def speed_table(series: dict[str, Series]) -> str:
    """One row per mode: throughput end to end and inner, ratios to the plain loop, CPU, peak memory, noise."""
    ref = series[REFERENCE]
    ref_wall = statistics.median(ref.mb_per_s())
    ref_inner = statistics.median(ref.mb_per_s("inner_s"))
    lines = [
        "| mode | MB/s end to end (median) | range | vs plain loop | MB/s inner | inner vs plain | CPU s, all"
        " processes | peak RSS, largest process | peak RSS, process tree | cores busy with other work |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in series.values():
        wall, inner = s.mb_per_s(), s.mb_per_s("inner_s")
        foreign = [r.foreign_cpu for r in s.runs if r.foreign_cpu is not None]
        lines.append(
            f"| {s.mode.label} | {statistics.median(wall):.2f} | {min(wall):.2f}-{max(wall):.2f} "
            f"| {statistics.median(wall) / ref_wall:.2f}x | {statistics.median(inner):.2f} "
            f"| {statistics.median(inner) / ref_inner:.2f}x | {s.median('cpu_s'):.1f} "
            f"| {s.median('proc_peak_mib'):.0f} MiB | {s.median('tree_peak_mib'):.0f} MiB "
            f"| {_percent(max(foreign) if foreign else None)} max |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Line:
    """Wall time as fixed + bytes / rate, fitted through the 1x and 4x medians of one mode."""

    fixed_s: float
    mb_per_s: float

    @classmethod
    def fit(cls, small: Series, large: Series) -> Line | None:
        extra_s = large.median("wall_s") - small.median("wall_s")
        extra_mb = (large.n_bytes - small.n_bytes) / 1e6
        if extra_s <= 0 or extra_mb <= 0:
            return None
        rate = extra_mb / extra_s
        return cls(small.median("wall_s") - small.n_bytes / 1e6 / rate, rate)


def scaling_table(results: Results) -> str:
    """Fixed start-up cost and marginal throughput per mode: which of the two a missed target comes from."""
    lines = [
        f"| mode | wall s at 1x ({_mb(results.small)}) | wall s at 4x ({_mb(results.large)}) | fixed cost s"
        " | marginal MB/s | marginal vs plain loop |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    ref = _fit(results, REFERENCE)
    for key, large in results.large.items():
        small = results.small.get(key)
        if small is None:
            continue
        line = _fit(results, key)
        fixed = f"{line.fixed_s:.2f}" if line else "—"
        rate = f"{line.mb_per_s:.2f}" if line else "—"
        ratio = f"{line.mb_per_s / ref.mb_per_s:.2f}x" if line and ref else "—"
        lines.append(
            f"| {large.mode.label} | {small.median('wall_s'):.2f} | {large.median('wall_s'):.2f} | {fixed}"
            f" | {rate} | {ratio} |"
        )
    return "\n".join(lines)


def _fit(results: Results, key: str) -> Line | None:
    small, large = results.small.get(key), results.large.get(key)
    return Line.fit(small, large) if small and large else None


def _mb(series: dict[str, Series]) -> str:
    return f"{next(iter(series.values())).n_bytes / 1e6:.0f} MB"


def chunk_check(results: Results) -> str:
    """Every run on a corpus must have made the same chunks, or the comparison is void."""
    notes = []
    for name, series in (("4x", results.large), ("1x", results.small)):
        counts = {run.chunks for s in series.values() for run in s.runs}
        if len(counts) > 1:
            notes.append(
                f"WARNING: the {name} runs made different numbers of chunks {sorted(counts)}: void comparison."
            )
        elif counts:
            notes.append(f"Every {name} run made the same {counts.pop()} chunks.")
    return " ".join(notes)


def memory_ratio(small: Series, large: Series) -> float:
    """Peak RSS at 4x over 1x (medians of the largest process's VmHWM)."""
    return large.median("proc_peak_mib") / small.median("proc_peak_mib")


def memory_table(results: Results) -> str:
    """Peak RSS of each mode at 1x and 4x the corpus; the target is on the one-worker pipeline."""
    lines = [
        "| mode | peak RSS at 1x | at 4x | 4x / 1x | process tree at 1x | at 4x |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key, large in results.large.items():
        small = results.small.get(key)
        if small is None:
            continue
        ratio = memory_ratio(small, large)
        shown = f"**{ratio:.2f}x**" if key == "direct-1" else f"{ratio:.2f}x"
        lines.append(
            f"| {large.mode.label} | {small.median('proc_peak_mib'):.0f} MiB | {large.median('proc_peak_mib'):.0f} MiB"
            f" | {shown} | {small.median('tree_peak_mib'):.0f} MiB | {large.median('tree_peak_mib'):.0f} MiB |"
        )
    return "\n".join(lines)


def target_lines(results: Results) -> list[str]:
    """Met/MISSED for each of the issue's targets."""
    series = results.large
    lines = []
    for issue, baseline, goals in SPEED_TARGETS:
        if baseline not in series:
            continue
        ref = statistics.median(series[baseline].mb_per_s())
        for key, goal in goals.items():
            if key in series:
                got = statistics.median(series[key].mb_per_s()) / ref
                verdict = "met" if got >= goal else "MISSED"
                lines.append(
                    f"- {issue}: {series[key].mode.label}: {got:.2f}x the {series[baseline].mode.label} end to end"
                    f" (target ≥ {goal}x): {verdict}"
                )
    if "direct-1" in results.small and "direct-1" in series:
        got = memory_ratio(results.small["direct-1"], series["direct-1"])
        verdict = "met" if got <= MEMORY_TARGET else "MISSED"
        lines.append(f"- peak RSS at 4x / 1x corpus, one worker: {got:.2f}x (target ≤ {MEMORY_TARGET}x): {verdict}")
    return lines


def versions_line() -> str:
    """Versions of what the pipeline runs on."""
    import apache_beam
    import pyarrow

    return f"apache-beam {apache_beam.__version__}, pyarrow {pyarrow.__version__}"


def corpus_line(data: BenchCorpus) -> str:
    stored = (
        f", {data.stored_bytes / 1e6:.1f} MB gzip-compressed (.jsonl.gz)" if data.gzip else " (.jsonl, uncompressed)"
    )
    return (
        f"{data.n_bytes / 1e6:.1f} MB of JSONL{stored} in {len(data.files)} files, {data.documents} documents: about"
        f" {100 * data.real_share:.0f}% Debian-doc text (python-docs + handbook-ar from corpus.py, repeated with new"
        f" ids) and the rest synthetic.generate (seeded); cached in `{_shown_path(data.directory)}`"
    )


def _shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


METHOD = (
    "Method: every run is a fresh subprocess on the same files, the modes interleaved round-robin (first mode"
    " rotated each round), medians reported; the page cache is warmed first. MB/s is uncompressed JSONL bytes"
    " (10^6) per second. *End to end* is the subprocess's wall time (interpreter start, imports, pipeline construction,"
    " run, commit): what the targets use. *Inner* leaves start-up out: the plain loop's own timer, and the"
    " pipeline's `_manifest.json` `timings.seconds` (pipeline construction, run and commit)."
    " The plain loop (benchmarks/plain_loop.py) is the pipeline's own per-record code without Beam: `read_file`,"
    " then `ChunkDocuments`' two DoFns (the same AdaptiveChunker built the same way, the same row dicts); the"
    " *+ Parquet write* row also writes the rows as zstd Parquet (one file per input file and density bucket)."
    ' The ratio columns use the loop without the write (issue 3: "reads the same files and calls the same'
    ' chunker"); issue 12\'s targets use the loop with it ("what the job cannot avoid").'
    " The pipeline runs `python -m pipelines.cli.rechunk --input F... --output DIR --quiet"
    " --progress-seconds 0` plus the Beam options in the mode's name: the full job (Parquet, rejects, manifest,"
    " commit), with the repo on PYTHONPATH for the worker processes. Peak RSS: *largest process* is the largest"
    " VmHWM (the kernel's peak-RSS mark since exec) among the process and its descendants; *process tree* is the"
    f" summed RSS of the process and its descendants. Both sampled every {POLL_SECONDS * 1000:.0f} ms."
    " CPU s is user + system time of the whole tree. *Cores busy with other work* is the machine's busy CPU time"
    " not spent by the measured tree, over wall time x cores (the worst run): other jobs on the machine, which"
    " slow the 2-worker mode most."
)


def report(results: Results, argv: list[str], code: Path) -> str:
    """The whole markdown report."""
    rounds = len(results.large[REFERENCE].runs)
    small_rounds = len(results.small[REFERENCE].runs) if REFERENCE in results.small else 0
    parts = [
        *header("Pipeline speed and memory benchmark", "bench_pipeline.py", argv, f"; {versions_line()}"),
        f"Measured: {source_line(('pipelines', 'zerda_core'), code)}.",
        "",
        f"Corpus: {corpus_line(results.data)}. 1x is its first quarter of the files (same mix).",
        f"Rounds: {rounds} on the whole corpus (4x), {small_rounds} on 1x.",
        "",
        METHOD,
        "",
        f"## Speed, {_mb(results.large)} (4x)",
        "",
        speed_table(results.large),
        "",
        chunk_check(results),
        "",
    ]
    if results.small:
        parts += ["## Fixed cost and marginal throughput", ""]
        if next(iter(results.small.values())).n_bytes < MIN_FIT_BYTES:
            parts += [f"Not fitted: the 1x corpus is under {MIN_FIT_BYTES / 1e6:.0f} MB, start-up dominates.", ""]
        else:
            parts += [
                "A line through each mode's 1x and 4x median wall times: the fixed cost is what a run pays whatever"
                " the corpus size (interpreter, imports, pipeline construction and translation, worker start-up,"
                " the small stages), the marginal rate is the throughput on each extra MB.",
                "",
                scaling_table(results),
                "",
            ]
        parts += [
            "## Memory",
            "",
            memory_table(results),
            "",
        ]
    parts += ["## Targets", "", *target_lines(results), ""]
    return "\n".join(parts)


# ---------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Options; --quick shrinks the corpus and the rounds for a sanity run."""
    options = parser(__doc__, RESULTS, "sanity run: 10 MB corpus in 16 files, 1-2 rounds")
    options.add_argument("--mb", type=float, default=100.0, help="corpus size in MB of JSONL (default 100)")
    options.add_argument("--files", type=int, default=32, help="number of corpus files (default 32)")
    options.add_argument("--gzip", action="store_true", help="gzip the corpus files (.jsonl.gz) instead of plain")
    options.add_argument("--reps", type=int, default=5, help="interleaved rounds on the whole corpus (default 5)")
    options.add_argument("--small-reps", type=int, default=3, help="rounds on the 1x quarter (default 3; 0: none)")
    options.add_argument("--budget-s", type=float, default=360.0, help="time budget for the 4x rounds; fewer if over")
    options.add_argument("--modes", default=",".join(m.key for m in MODES), help="comma-separated subset of modes")
    options.add_argument("--code", type=Path, default=REPO_ROOT, help="import pipelines/ from here (a patched copy)")
    options.add_argument("--profile", action="store_true", help="print stage times and a cProfile (1x, in process)")
    args = options.parse_args(argv)
    if args.quick:
        args.mb, args.files, args.reps, args.small_reps = 10.0, 16, min(args.reps, 2), min(args.small_reps, 1)
    keys = args.modes.split(",")
    unknown = set(keys) - {m.key for m in MODES}
    if unknown or REFERENCE not in keys:
        options.error(f"--modes: unknown {sorted(unknown)} or missing {REFERENCE!r}")
    args.mode_list = [m for m in MODES if m.key in keys]
    args.code = args.code.resolve()
    return args


def measure_all(args: argparse.Namespace, data: BenchCorpus, setup: Setup) -> Results:
    """The 1x rounds first (they also warm the bytecode caches), then the 4x rounds."""
    small: dict[str, Series] = {}
    if args.small_reps > 0:
        small = interleaved(args.mode_list, data.subset(0.25), args.small_reps, args.budget_s, setup)
    large = interleaved(args.mode_list, data, args.reps, args.budget_s, setup)
    return Results(data, large, small)


def main(argv: list[str] | None = None) -> int:
    """Build or load the corpus, run the rounds, print the report and save it on full runs of this repo's code."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    data = load_corpus(args.mb, args.files, args.seed, args.gzip, not args.no_setup)
    print(f"bench: {corpus_line(data)}", flush=True)
    warm_page_cache(data.files)
    with tempfile.TemporaryDirectory(prefix="zerda-bench-") as scratch_dir:
        setup = Setup(args.code, Path(scratch_dir))
        results = measure_all(args, data, setup)
        profile = profile_pipeline(data.subset(0.25).files, setup) if args.profile else ""
    if profile:
        print(f"\nProfile of pipelines.cli.rechunk.run on the 1x corpus, in process:\n{profile}")
    default_out = None if args.quick or args.code != REPO_ROOT else RESULTS
    save(report(results, argv, args.code), args.out or default_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
