"""A SHA-256 of everything AdaptiveChunker returns on a fixed set of texts, per configuration.

A speed change to the chunker must leave its output byte-identical: run this before and after and
compare the digests (``--save FILE`` writes them, ``--check FILE`` compares against a saved run).
Texts: the Python manual (python-docs, from the benchmark's corpus cache), the Arabic and English
Debian handbook pages (/usr/share/doc/debian-handbook/html), and tests/data. Configurations: the
defaults, section-scoped density, and small sizes (many chunks per document).

Run from the repo root: ``python benchmarks/chunk_digest.py [--save F | --check F]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `zerda_core` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from zerda_core.chunks import AdaptiveChunker

REPO = Path(__file__).resolve().parent.parent
HANDBOOK = Path("/usr/share/doc/debian-handbook/html")
CONFIGS: dict[str, dict[str, object]] = {
    "default": {},
    "section": {"density_scope": "section"},
    "small": {"min_size": 40, "max_size": 300, "overlap": 32},
    "small-section": {"min_size": 60, "max_size": 400, "overlap": 48, "density_scope": "section"},
    "no-overlap": {"min_size": 100, "max_size": 800, "overlap": 0},
}


def texts() -> dict[str, list[str]]:
    """Every text set, by name."""
    sets: dict[str, list[str]] = {}
    python_docs = corpus.load("python-docs")
    if python_docs:
        sets["python-docs"] = python_docs
    for lang in ("ar-MA", "en-US"):
        pages = sorted((HANDBOOK / lang).glob("*.html"))
        if pages:
            sets[f"handbook-{lang}"] = [corpus.html_to_text(p.read_text("utf-8")) for p in pages]
    sets["tests-data"] = [p.read_text("utf-8") for p in sorted((REPO / "tests" / "data").iterdir()) if p.is_file()]
    return sets


def digest(chunker: AdaptiveChunker, docs: list[str]) -> str:
    """SHA-256 over every chunk's text and metadata, in order."""
    h = hashlib.sha256()
    for i, doc in enumerate(docs):
        for c in chunker.chunk(doc, doc_id=f"d{i}", source="s"):
            m = c.metadata
            fields = [m.doc_id, m.source, m.chunk_index, str(m.chunk_type), m.language, m.start_char, m.end_char]
            h.update(c.text.encode("utf-8", "surrogatepass"))
            h.update(json.dumps([fields, m.extra, c.chunk_id], sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--save", type=Path)
    options.add_argument("--check", type=Path)
    args = options.parse_args()
    sets = texts()
    found = {
        f"{name}/{config}": digest(AdaptiveChunker(**kwargs), docs)  # type: ignore[arg-type]
        for config, kwargs in CONFIGS.items()
        for name, docs in sets.items()
    }
    for key, value in found.items():
        print(f"{key}: {value[:16]}")
    if args.save:
        args.save.write_text(json.dumps(found, indent=1) + "\n")
    if args.check:
        saved = json.loads(args.check.read_text())
        differ = [key for key in saved if saved[key] != found.get(key)]
        print("identical" if not differ else f"DIFFERENT: {', '.join(differ)}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
