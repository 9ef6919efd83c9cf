"""Real text no one here wrote, from Debian packages: the handbook's parallel pages and a mixed corpus.

The density tests measure on these instead of sentences picked to pass. ``make test`` installs
the one package not in a base system (debian-handbook); a missing package fails the test
with the command that installs it, never a skip.
"""

from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

from benchmarks.corpus import html_to_text

HANDBOOK = Path("/usr/share/doc/debian-handbook/html")
PYTHON_LIB = Path("/usr/lib/python3.11")
LICENSES = Path("/usr/share/common-licenses")
DOCS = Path("/usr/share/doc")
MAN1 = Path("/usr/share/man/man1")
_ARABIC_LETTER = re.compile("[\u0620-\u064a]")
_LATIN_LETTER = re.compile("[A-Za-z]")
# The Arabic handbook is a partial translation; a page counts as translated when Arabic holds this share of
# its letters (commands, paths and option names stay Latin even in a translated page).
TRANSLATED_SHARE = 0.3
PER_SOURCE = 40
SEED = 11


def require(path: Path, package: str) -> Path:
    """``path``, or a failure that says which Debian package to install."""
    assert path.exists() and any(path.iterdir()), (
        f"{path} is missing: install the Debian package {package} (apt-get install -y {package}); `make test` does"
    )
    return path


def handbook_pairs() -> list[tuple[str, str]]:
    """(English, Arabic) text of every handbook page whose ar-MA version is translated."""
    en_dir, ar_dir = require(HANDBOOK / "en-US", "debian-handbook"), require(HANDBOOK / "ar-MA", "debian-handbook")
    pairs = []
    for ar_page in sorted(ar_dir.glob("*.html")):
        en_page = en_dir / ar_page.name
        if not en_page.exists():
            continue
        arabic = html_to_text(ar_page.read_text(encoding="utf-8"))
        letters = len(_ARABIC_LETTER.findall(arabic)), len(_LATIN_LETTER.findall(arabic))
        if letters[0] >= TRANSLATED_SHARE * sum(letters):
            pairs.append((html_to_text(en_page.read_text(encoding="utf-8")), arabic))
    return pairs


def _sample(paths: list[Path]) -> list[Path]:
    ordered = sorted(paths)
    random.Random(SEED).shuffle(ordered)
    return ordered[:PER_SOURCE]


def _read_gz(path: Path) -> str:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def mixed_corpus() -> dict[str, list[str]]:
    """Documents by kind: Python source, licences, Debian changelogs, man pages (troff) and handbook pages."""
    python = [p for p in require(PYTHON_LIB, "libpython3.11-stdlib").rglob("*.py") if p.stat().st_size > 3000]
    changelogs = [p for p in require(DOCS, "base-files").glob("*/changelog.Debian.gz") if p.stat().st_size > 1500]
    man_pages = [p for p in require(MAN1, "man-db").glob("*.1.gz") if p.stat().st_size > 1500]
    licences = [p for p in require(LICENSES, "base-files").iterdir() if p.is_file()]
    handbook = list(require(HANDBOOK / "en-US", "debian-handbook").glob("*.html"))
    return {
        "source code": [p.read_text(encoding="utf-8", errors="replace") for p in _sample(python)],
        "licences": [p.read_text(encoding="utf-8", errors="replace") for p in _sample(licences)],
        "changelogs": [_read_gz(p) for p in _sample(changelogs)],
        "man pages": [_read_gz(p) for p in _sample(man_pages)],
        "handbook": [html_to_text(p.read_text(encoding="utf-8")) for p in _sample(handbook)],
    }
