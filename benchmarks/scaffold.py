"""What every benchmark script shares: its common options, the real corpora, the report's header and saving it.

Each script keeps only what it measures; the lines that say where, when and on which code a result was
obtained are written here once, so every results file states them the same way.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks import corpus

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_SEED = 20240601


def parser(doc: str | None, results: Path, quick: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark has: --quick, --seed, --no-setup and --out."""
    parsed = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parsed.add_argument("--quick", action="store_true", help=quick)
    parsed.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed for every sample the benchmark draws")
    parsed.add_argument("--no-setup", action="store_true", help="do not run setup_corpus.sh (apt-get) if needed")
    parsed.add_argument("--out", type=Path, help=f"where to write the markdown (default: {results} on full runs)")
    return parsed


def ensure_real_corpora(allow_setup: bool) -> None:
    """Install the Debian documentation packages once, through setup_corpus.sh, unless cached already."""
    if all(corpus.cache_path(c.name).exists() for c in corpus.REAL_CORPORA):
        return
    if not allow_setup:
        print("bench: real corpora not prepared and --no-setup given", file=sys.stderr)
        return
    print(f"bench: preparing real corpora with {corpus.SETUP_SCRIPT.name} (apt-get install, once)", flush=True)
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(corpus.SETUP_SCRIPT)], env=env, check=False)
    if done.returncode != 0:
        print("bench: could not prepare the real corpora; continuing without them", file=sys.stderr)


def git(*args: str) -> str:
    """Output of a git command in the repo, or '' where git or the repo is missing."""
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def source_line(folders: Sequence[str] = ("zerda_core",), code: Path = REPO_ROOT) -> str:
    """Which code was measured: a digest of the folders' .py files, and the commit when it is this repo."""
    digest = hashlib.blake2b(digest_size=6)
    for folder in folders:
        for path in sorted((code / folder).rglob("*.py")):
            digest.update(path.relative_to(code).as_posix().encode() + b"\0" + path.read_bytes())
    named = " + ".join(folders)
    if code.resolve() != REPO_ROOT:
        return f"{named} from {code} (not this repo), source digest {digest.hexdigest()}"
    commit = git("log", "-1", "--format=%h", "--", *folders) or "(no commit)"
    dirty = " with uncommitted changes" if git("status", "--porcelain", "--", *folders) else ""
    return f"{named} at commit {commit}{dirty}, source digest {digest.hexdigest()}"


def machine_line() -> str:
    """CPU, cores and Python, so numbers from different machines are not compared blindly."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()} ({platform.python_implementation()})"


def header(title: str, script: str, argv: Sequence[str], machine_extra: str = "") -> list[str]:
    """The first lines of a results file: title, when and by which command, on which machine."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([f"python benchmarks/{script}", *argv])
    return [
        f"# {title}",
        "",
        f"Generated {when} by `{command}` (from the repo root).",
        f"Machine: {machine_line()}{machine_extra}.",
    ]


_SECTION = re.compile(r"<!-- ([\w-]+):begin -->\n.*?<!-- \1:end -->\n", re.S)


def save(text: str, out: Path | None) -> None:
    """Print the report and, when ``out`` is given, write it there.

    The sections another script keeps in the same file (``save_section``) are carried over.
    """
    print("\n" + text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        previous = out.read_text(encoding="utf-8") if out.exists() else ""
        sections = [m.group(0) for m in _SECTION.finditer(previous)]
        out.write_text("\n".join([text.rstrip("\n") + "\n", *sections]), encoding="utf-8")
        print(f"bench: wrote {out}")


def save_section(text: str, name: str, out: Path | None) -> None:
    """Print a report that is one section of a results file and, when ``out`` is given, put it there:
    in place of that section's previous run, else appended."""
    print("\n" + text)
    if not out:
        return
    block = f"<!-- {name}:begin -->\n{text.rstrip(chr(10))}\n<!-- {name}:end -->\n"
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    found = next((m for m in _SECTION.finditer(old) if m.group(1) == name), None)
    new = old[: found.start()] + block + old[found.end() :] if found else old.rstrip("\n") + "\n\n" + block
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(new, encoding="utf-8")
    print(f"bench: wrote {out}")


def peak_rss_kib(pid: int) -> int:
    """The kernel's peak-RSS mark of a process (VmHWM: since its exec, unlike ``ru_maxrss``), 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0
