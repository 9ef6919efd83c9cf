"""Logging in the DirectRunner's worker processes (``multi_processing``), set before Beam's first line.

Beam starts each worker as ``python -m apache_beam.runners.worker.sdk_worker_main``, a command zerda
cannot change, and two lines came out before any of zerda's code ran there: ``import apache_beam`` warns
``apitools not found`` through ``logging.warning``, which gives the root logger a stderr handler in
Python's default format, and the harness then logs ``Logging handler created.`` at INFO through it
(zerda's progress lines came out through that handler too). The one hook Python offers before a module
runs is ``sitecustomize``: :func:`worker_environment` puts ``pipelines/cli/worker_site`` first on the
workers' ``PYTHONPATH`` and the levels in :data:`ENV`; its ``sitecustomize`` installs zerda's redaction of
credentials (``pipelines.redact.install``) before Beam logs its options, gives the root logger one
stderr handler in the launcher's format, for zerda's records at zerda's level and every other logger's
at Beam's, then runs the ``sitecustomize`` the environment would have run without it, if any.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from pipelines.progress import LOG_FORMAT

ENV = "ZERDA_WORKER_LOG"  # JSON: {"beam": level, "zerda": level, "format": LOG_FORMAT}
SITE = str(Path(__file__).with_name("worker_site"))


@contextlib.contextmanager
def worker_environment(levels: tuple[str, str] | None) -> Iterator[None]:
    """While the pipeline runs, the worker processes it starts redact credentials from what they log and
    log at ``levels`` (Beam's, zerda's; None: as Beam sets them up); then the launcher's environment is as
    it was."""
    saved = {name: os.environ.get(name) for name in (ENV, "PYTHONPATH")}
    if levels is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = json.dumps({"beam": levels[0], "zerda": levels[1], "format": LOG_FORMAT})
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SITE, saved["PYTHONPATH"]) if p)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
