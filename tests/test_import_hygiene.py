"""Importing zerda changes nothing process-wide: its logging and error hooks are installed by its own commands
(the rechunk and report commands, the DirectRunner's worker processes), never by an import."""

from __future__ import annotations

import subprocess
import sys

from tests.common import REPO

# Run in a fresh interpreter: Beam and the other dependencies are imported first, so that what they do at
# import (Beam's own ``logging.warning`` gives the root logger a handler) is the baseline, then every module of
# zerda's; the hooks must be what they were, and Python's defaults.
_CHECK = """
import importlib, logging, pkgutil, sys
import apache_beam, fsspec, pyarrow, pyarrow.parquet

def state():
    root = logging.getLogger()
    return (logging.getLogRecordFactory(), sys.excepthook, list(root.filters), list(root.handlers), root.level)

before = state()
assert before[0] is logging.LogRecord and before[1] is sys.__excepthook__, before
from pipelines.chunk_text import ChunkText
assert state() == before, ("ChunkText", state(), before)
import pipelines
names = [m.name for m in pkgutil.walk_packages(pipelines.__path__, "pipelines.")]
for name in names:
    if name.endswith("sitecustomize") or name.endswith("__main__"):
        continue
    importlib.import_module(name)
    assert state() == before, (name, state(), before)
print("clean", len(names))
"""


def test_importing_any_pipelines_module_leaves_logging_and_excepthook_alone() -> None:
    run = subprocess.run([sys.executable, "-c", _CHECK], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.startswith("clean"), run.stderr[-3000:]
    assert int(run.stdout.split()[1]) > 30  # every module was imported, not a few


_COMMAND = """
import logging, sys
from pipelines.report.cli import main
code = main(["{missing}"])
assert logging.getLogRecordFactory() is not logging.LogRecord and sys.excepthook is not sys.__excepthook__
print("installed", code)
"""


def test_the_commands_install_their_hooks(tmp_path: object) -> None:
    """The other side: zerda's own command still redacts its process's records and tracebacks."""
    code = _COMMAND.format(missing=f"{tmp_path}/none")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.stdout.strip() == "installed 2", run.stderr[-3000:]
