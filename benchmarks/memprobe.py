"""Peak memory of chunking one document, measured in a fresh process.

A fresh process per (tool, size) keeps one measurement's heap from hiding the next, and peak
RSS (unlike tracemalloc) also sees memory that native code (chonkie's Rust core) allocates.
The kernel's peak-RSS mark is reset just before ``chunk`` (``/proc/self/clear_refs``), so the
result is the growth caused by chunking alone, with the input text already in memory.

A peer chunks with ``--budget SIZE OVERLAP``; bench_chunker.py works it out (zerda's target and
overlap for the document, or the fixed ``--peer-size``) and passes it in, so this process's heap
holds nothing left over from doing so. Without ``--budget`` it is worked out here by the same rule.

Used by bench_chunker.py; by hand: ``python -m benchmarks.memprobe chonkie doc.txt``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.tools import KEYS, Budget, Sizes, make_tool, peer_budget


def _status_kb(field: str) -> int:
    """A ``VmRSS``/``VmHWM`` figure from /proc/self/status, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux >= 4.0); False where unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def probe(key: str, text: str, sizes: Sizes, budget: Budget) -> dict[str, float]:
    """Chunk ``text`` once and return RSS before, peak during, chunk count, seconds and the peers' budget."""
    size, overlap = budget
    tool = make_tool(key, sizes)
    tool.run(text[:2000], size, overlap)  # warm imports, regex compilation and the chunker for this budget
    gc.collect()
    exact = _reset_peak()
    before = _status_kb("VmRSS") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    chunks = tool.run(text, size, overlap)
    seconds = time.perf_counter() - start
    peak = _status_kb("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "rss_before_kb": before,
        "rss_peak_kb": peak,
        "growth_kb": max(0, peak - before),
        "chunks": len(chunks),
        "seconds": seconds,
        "exact_peak": exact,
        "size": size,
        "overlap": overlap,
    }


def main(argv: list[str] | None = None) -> int:
    """CLI: print one JSON object with the measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", choices=KEYS)
    parser.add_argument("doc", type=Path, help="UTF-8 text file holding the one document to chunk")
    parser.add_argument("--sizes", default="{}", help="JSON of benchmarks.tools.Sizes fields")
    parser.add_argument(
        "--budget", type=int, nargs=2, metavar=("SIZE", "OVERLAP"), help="a peer's chunk size and overlap"
    )
    args = parser.parse_args(argv)
    sizes = Sizes(**json.loads(args.sizes))
    text = args.doc.read_text(encoding="utf-8")
    budget: Budget = (args.budget[0], args.budget[1]) if args.budget else peer_budget(sizes)(text)
    print(json.dumps(probe(args.tool, text, sizes, budget)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
