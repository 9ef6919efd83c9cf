"""Issue 24: nothing is lost when the storage misbehaves.

Every fault is real: a folder the job cannot list (the CLI run by root without the capabilities that let
root read any folder, ``setpriv``), a temp directory that fills (a 1 MiB tmpfs mounted for the test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.rechunk import run
from tests.common import REPO
from tests.output_checks import read_chunks

_PROSE = "The fennec fox sleeps by day in a burrow under the dunes and hunts by night. "
# root, without these, is held to a folder's mode like any user (tests run as root, who reads any folder)
_UNPRIVILEGED = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_read_search,-dac_override"]


def _jsonl(path: Path, prefix: str, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps({"id": f"{prefix}{n}", "text": f"Document {n}. " + _PROSE * (4 + n)}) for n in range(count))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _snapshot(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}


def _cli(argv: list[str], prefix: list[str] | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The command line in its own process (behind ``prefix``): its exit code and its stderr."""
    command = [*(prefix or []), sys.executable, "-m", "pipelines.rechunk", *argv, "--quiet"]
    done = subprocess.run(
        command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, capture_output=True, text=True
    )
    return done.returncode, done.stderr


def _listing_denied(folder: Path) -> bool:
    """Whether a process behind ``_UNPRIVILEGED`` is refused the listing of ``folder``, its names and sizes."""
    if shutil.which("setpriv") is None:
        return False
    listing = f"import os; [os.stat(e) for e in os.scandir({str(folder)!r})]"
    probe = subprocess.run([*_UNPRIVILEGED, sys.executable, "-c", listing], capture_output=True)
    return probe.returncode != 0


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A corpus with a sub-folder, ``locked``, and ``after.jsonl`` sorted after it."""
    root = tmp_path / "corpus"
    _jsonl(root / "a.jsonl", "a", 3)
    _jsonl(root / "locked" / "l.jsonl", "l", 4)
    _jsonl(root / "locked" / "deeper" / "m.jsonl", "m", 2)
    _jsonl(root / "z" / "after.jsonl", "z", 2)
    return root


def _lock(folder: Path, mode: int) -> None:
    folder.chmod(mode)
    if not _listing_denied(folder):
        folder.chmod(0o755)
        pytest.skip("the kernel does not let setpriv drop CAP_DAC_READ_SEARCH/CAP_DAC_OVERRIDE: root lists any folder")


# (what is locked, its mode, the input): mode 000 cannot be listed; 0444 lists its names, but not their sizes
LOCKED = [
    ("locked", 0o000, "{root}"),
    ("locked", 0o000, "{root}/**"),
    ("locked", 0o000, "{root}/*/*.jsonl"),
    ("locked", 0o000, "{root}/l*"),
    ("locked/deeper", 0o000, "{root}"),
    ("locked", 0o444, "{root}"),
]


@pytest.mark.parametrize("incremental", [False, True], ids=["full", "incremental"])
@pytest.mark.parametrize(("locked", "mode", "pattern"), LOCKED, ids=[f"{p[0]}-{p[1]:o}-{p[2]}" for p in LOCKED])
def test_a_folder_that_cannot_be_listed_stops_the_job_before_anything_is_written(
    corpus: Path, tmp_path: Path, locked: str, mode: int, pattern: str, incremental: bool
) -> None:
    """Left out in silence, its files would be missing from the output and, incrementally, listed as removed
    in ``_changes`` (the embedding job deletes them from the vector store): exit 2, one line, OUTPUT as it was."""
    output = tmp_path / "out"
    argv = ["--input", pattern.format(root=corpus), "--output", str(output)]
    run([*argv, "--quiet"])
    sources = set(read_chunks(output).column("source").to_pylist())
    assert any(f"/{locked}/" in source for source in sources), sources  # the folder's documents were there
    before = _snapshot(output)
    _lock(corpus / locked, mode)
    try:
        code, stderr = _cli([*argv, *(["--incremental"] if incremental else [])], _UNPRIVILEGED)
    finally:
        (corpus / locked).chmod(0o755)

    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("zerda: error: "), stderr
    assert f"folder '{corpus / locked}" in lines[0] and "Permission denied" in lines[0], stderr
    assert _snapshot(output) == before  # no removals listed, no chunk lost, the previous _SUCCESS kept


@pytest.mark.parametrize(
    ("locked", "pattern"), [("_old", "{root}"), (".Trash-0", "{root}/**"), ("locked", "{root}/z*/*.jsonl")]
)
def test_a_folder_never_read_may_be_unlistable(corpus: Path, tmp_path: Path, locked: str, pattern: str) -> None:
    """A ``.``/``_`` folder is skipped, and one the glob cannot reach is not read: neither stops the job."""
    if locked != "locked":
        shutil.copytree(corpus / "locked", corpus / locked)
    output = tmp_path / "out"
    _lock(corpus / locked, 0)
    try:
        code, stderr = _cli(["--input", pattern.format(root=corpus), "--output", str(output)], _UNPRIVILEGED)
    finally:
        (corpus / locked).chmod(0o755)
    assert code == 0, stderr
    assert (output / "_SUCCESS").exists()
