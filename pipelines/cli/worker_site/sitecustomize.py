"""Run by Python as each local Beam worker process starts, before Beam's first import logs anything
(``pipelines.cli.worker_log`` puts this folder first on the workers' ``PYTHONPATH``).

The ``pipelines`` importable this early may not be the launcher's (the folder it runs from joins
``sys.path`` only after this runs), so the two modules taken from it, ``pipelines.redact`` and
``pipelines.terminal_table`` (standard library only), are imported from the folder holding this one: the
launcher's own copy, which the worker then keeps, as it must to unpickle the launcher's DoFns.
"""

from __future__ import annotations

import atexit
import gc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from pathlib import Path

_OURS = ("zerda", "pipelines")


class _Levels(logging.Filter):
    """zerda's records from zerda's level up, every other logger's (Beam's, grpc's) from Beam's: per handler,
    so the levels Beam sets on its loggers as the worker starts cannot let its start-up lines through."""

    def __init__(self, beam: int, zerda: int) -> None:
        super().__init__()
        self._beam, self._zerda = beam, zerda

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name.split(".", 1)[0] in _OURS
        return record.levelno >= (self._zerda if ours else self._beam)


def _configure(formatter: type[logging.Formatter]) -> None:
    """The root logger's one stderr handler: with a handler there, ``logging.warning()`` adds no other."""
    settings = json.loads(os.environ.get("ZERDA_WORKER_LOG") or "{}")
    if not settings:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(settings["format"]))
    levels = (logging.getLevelName(settings["beam"]), logging.getLevelName(settings["zerda"]))
    handler.addFilter(_Levels(*levels))
    logging.getLogger().addHandler(handler)
    atexit.register(gc.freeze)  # as the launcher does: the heap left at exit is freed with the process


def _install_redaction() -> type[logging.Formatter]:
    """Credentials out of every record and uncaught traceback of this worker, from Beam's first line on
    (its ``Pipeline_options`` line holds the storage options given on the command line); returns the
    formatter that shows control characters in a log line escaped, as the launcher's lines are."""
    checkout = str(Path(__file__).resolve().parents[3])
    sys.path.insert(0, checkout)
    try:
        from pipelines import redact, terminal_table
    finally:
        sys.path.remove(checkout)
    redact.install()
    return terminal_table.VisibleFormatter


def _run_next_sitecustomize() -> None:
    """The ``sitecustomize`` Python would have run without this folder first on the path, if any."""
    here = Path(__file__).resolve().parent
    path = [folder for folder in sys.path if Path(folder or ".").resolve() != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_configure(_install_redaction())
_run_next_sitecustomize()
