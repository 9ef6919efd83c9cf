"""Real corpora for the chunker benchmark, taken from Debian documentation packages.

Text nobody on the project wrote keeps the benchmark honest: our own samples would flatter
whatever the chunker was tuned on. ``setup_corpus.sh`` installs the packages; this module
extracts their text once into ``benchmarks/.corpus/*.jsonl`` (gitignored) and loads it back.

- ``python-docs``: the reStructuredText sources of the Python manual (package python3-doc),
  about 11 MB of English prose with code samples, tables and API references.
- ``handbook-ar``: the Arabic (ar-MA) Debian Administrator's Handbook (package debian-handbook),
  HTML stripped to text; a partial translation, so Arabic prose mixed with English and commands.

Run ``python benchmarks/corpus.py --prepare`` to (re)build the cache from the installed packages.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

CACHE_DIR = Path(__file__).resolve().parent / ".corpus"
SETUP_SCRIPT = Path(__file__).resolve().parent / "setup_corpus.sh"


@dataclass(frozen=True)
class RealCorpus:
    """Where one corpus lives once its Debian package is installed, and how to read a file of it."""

    name: str
    package: str
    find_files: Callable[[], list[Path]]
    read_text: Callable[[Path], str]


def _python_doc_sources() -> list[Path]:
    """The ``_sources`` of the newest installed Python manual (python3-doc pulls in python3.X-doc)."""
    found = Path("/usr/share/doc").glob("python3*/html/_sources")
    roots = sorted(found, key=lambda p: _version_key(p.parent.parent.name))
    return sorted(roots[-1].rglob("*.txt")) if roots else []


def _version_key(dirname: str) -> tuple[int, ...]:
    """'python3.11' -> (3, 11), so that python3.9 sorts before python3.11."""
    return tuple(int(n) for n in re.findall(r"\d+", dirname))


def _handbook_ar_pages() -> list[Path]:
    """The ar-MA chapters of the Debian Administrator's Handbook."""
    return sorted(Path("/usr/share/doc/debian-handbook/html/ar-MA").glob("*.html"))


class _TextExtractor(HTMLParser):
    """HTML to plain text: blocks become paragraphs, <pre> keeps its lines, scripts and styles vanish."""

    BLOCKS = frozenset("p div h1 h2 h3 h4 h5 h6 li dt dd pre tr table section br title blockquote".split())
    HIDDEN = frozenset(("script", "style", "head"))

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self._hidden = 0
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self._hidden += 1
        if tag == "pre":
            self._pre += 1
        if tag in self.BLOCKS:
            self._parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        if tag in self.BLOCKS:
            self._parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._parts.append(data if self._pre else re.sub(r"\s+", " ", data))

    def text(self) -> str:
        """The collected text with runs of blank lines and stray spaces at line edges squeezed out."""
        joined = "".join(self._parts)
        joined = re.sub(r"[ \t]*\n[ \t]*", "\n", joined)
        return re.sub(r"\n{3,}", "\n\n", joined).strip()


def html_to_text(html: str) -> str:
    """Plain text of an HTML page, using only the standard library."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    return parser.text()


REAL_CORPORA: tuple[RealCorpus, ...] = (
    RealCorpus("python-docs", "python3-doc", _python_doc_sources, lambda p: p.read_text(encoding="utf-8")),
    RealCorpus("handbook-ar", "debian-handbook", _handbook_ar_pages, lambda p: html_to_text(p.read_text("utf-8"))),
)


def cache_path(name: str) -> Path:
    """Where a prepared corpus is cached."""
    return CACHE_DIR / f"{name}.jsonl"


def prepare(corpus: RealCorpus) -> int:
    """Extract one corpus from its installed package into the cache; returns the number of documents."""
    files = corpus.find_files()
    if not files:
        print(f"corpus: {corpus.name}: no files; is the Debian package {corpus.package} installed?", file=sys.stderr)
        return 0
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = cache_path(corpus.name).with_suffix(".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as out:
        for path in files:
            text = corpus.read_text(path)
            if text.strip():
                out.write(json.dumps({"id": str(path), "text": text}, ensure_ascii=False) + "\n")
                count += 1
    tmp.replace(cache_path(corpus.name))
    return count


def load(name: str) -> list[str] | None:
    """The cached documents of one corpus, or None when it has not been prepared."""
    path = cache_path(name)
    if not path.exists():
        return None
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines]


def iter_cached() -> Iterator[tuple[str, list[str]]]:
    """Every prepared real corpus, in a fixed order."""
    for corpus in REAL_CORPORA:
        docs = load(corpus.name)
        if docs:
            yield corpus.name, docs


def main(argv: list[str] | None = None) -> int:
    """CLI used by setup_corpus.sh: rebuild the cache from whatever packages are installed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", action="store_true", help="extract text from the installed packages")
    args = parser.parse_args(argv)
    if not args.prepare:
        parser.print_help()
        return 0
    found = 0
    for corpus in REAL_CORPORA:
        count = prepare(corpus)
        if count:
            size = cache_path(corpus.name).stat().st_size / 1e6
            print(f"corpus: {corpus.name}: {count} documents, {size:.1f} MB cached in {cache_path(corpus.name)}")
        found += count > 0
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
