"""Test only: make zerda's chunking step fail once on one document, a read fail once, or its commit pause,
from outside the product code.

``ZERDA_INJECT_FAULT="<doc_id>@<marker_path>"`` in the environment, then :func:`install` wraps the
job's row-building DoFn (``pipelines.chunking._RowsFn.process``): the first attempt at ``doc_id``
creates the marker file (atomically, so one attempt wins across worker processes) and raises
:class:`InjectedFault` before the document is chunked, a worker failure rather than a bad document.
Later attempts find the marker and go on. The test process calls :func:`install` itself; worker
processes do it through ``sitecustomize.py`` beside this file, found by putting this folder on their
``PYTHONPATH``.

``ZERDA_INJECT_READ_FAULT="<path part>@<marker_path>"`` likewise makes the first read of a local file whose
path holds ``<path part>`` (through fsspec's local file, as zerda reads a previous output) raise an I/O error
(``EIO``) once: a storage hiccup rather than a damaged file.

``ZERDA_PAUSE_COMMIT="<phase>@<marker_path>"`` pauses the commit (``pipelines.output.commit``) for good at
``phase``, after creating the marker file, so that a test can stop the job there: ``before`` its first change
to OUTPUT (the previous output is whole), ``during`` (the previous dataset deleted, nothing of this run's moved
in yet), ``after`` (committed, ``_SUCCESS`` written, the pipeline not finished).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FAULT_ENV = "ZERDA_INJECT_FAULT"
READ_FAULT_ENV = "ZERDA_INJECT_READ_FAULT"
PAUSE_ENV = "ZERDA_PAUSE_COMMIT"
_PAUSE_SECONDS = 600


class InjectedFault(RuntimeError):
    """The worker failure that :data:`FAULT_ENV` asks for."""


def _first(marker: str) -> bool:
    """Whether this is the first attempt: it creates ``marker`` (atomically: one attempt wins)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _fail_once(doc_id: str, marker: str) -> None:
    if _first(marker):
        raise InjectedFault(f"injected worker failure on document {doc_id!r} ({FAULT_ENV})")


def _armed(name: str) -> tuple[str, str] | None:
    """``(target, marker)`` from the environment variable ``name``, None when it is not set."""
    value = os.environ.get(name, "")
    if not value:
        return None
    target, _, marker = value.rpartition("@")
    if not target or not marker:
        raise ValueError(f"{name} must be '<target>@<marker_path>', got {value!r}")
    return target, marker


def _pause(marker: str) -> None:
    Path(marker).touch()
    time.sleep(_PAUSE_SECONDS)


def _install_pause() -> None:
    value = os.environ.get(PAUSE_ENV, "")
    if not value:
        return
    phase, _, marker = value.partition("@")
    from pipelines.output import commit

    if getattr(commit._FinishCommit.process, "_zerda_pause", False):
        return
    if phase == "before":  # after the last read-only step
        read_previous_files = commit._previous_files

        def previous_files(*args: Any) -> Any:
            found = read_previous_files(*args)
            _pause(marker)
            return found

        commit._previous_files = previous_files  # type: ignore[assignment]
    elif phase == "during":  # the previous dataset deleted, nothing moved in

        def move(*args: Any) -> Iterator[Any]:
            _pause(marker)
            yield from ()

        commit._MoveStaged.process = move  # type: ignore[method-assign,assignment]
    elif phase != "after":
        raise ValueError(f"{PAUSE_ENV} must be 'before|during|after@<marker_path>', got {value!r}")
    original = commit._FinishCommit.process

    def process(self: Any, *args: Any) -> Iterator[Any]:
        yield from original(self, *args)
        if phase == "after":
            _pause(marker)

    process._zerda_pause = True  # type: ignore[attr-defined]
    commit._FinishCommit.process = process  # type: ignore[method-assign,assignment]


def install() -> None:
    """Wrap the chunking DoFn when :data:`FAULT_ENV` is set, fsspec's local reads when :data:`READ_FAULT_ENV`
    is, the commit when :data:`PAUSE_ENV` is; idempotent."""
    _install_read_fault()
    _install_pause()
    armed = _armed(FAULT_ENV)
    if armed is None:
        return
    doc_id, marker = armed
    from pipelines import chunking

    original = chunking._RowsFn.process
    if getattr(original, "_zerda_fault", False):
        return

    def process(self: Any, chunks: list[Any]) -> Iterator[Any]:
        if chunks[0].metadata.doc_id == doc_id:
            _fail_once(doc_id, marker)
        yield from original(self, chunks)

    process._zerda_fault = True  # type: ignore[attr-defined]
    chunking._RowsFn.process = process  # type: ignore[method-assign]


def _install_read_fault() -> None:
    armed = _armed(READ_FAULT_ENV)
    if armed is None:
        return
    part, marker = armed
    from fsspec.implementations.local import LocalFileOpener

    original = LocalFileOpener.read
    if getattr(original, "_zerda_fault", False):
        return

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        if part in str(self.path) and _first(marker):
            raise OSError(errno.EIO, f"Input/output error (injected, {READ_FAULT_ENV})", self.path)
        return original(self, *args, **kwargs)

    read._zerda_fault = True  # type: ignore[attr-defined]
    LocalFileOpener.read = read  # type: ignore[method-assign]


def arm(monkeypatch: Any, doc_id: str, marker: Path) -> None:
    """Arm the fault for one test, here and in the worker processes it starts; ``monkeypatch`` undoes it all."""
    from pipelines import chunking

    monkeypatch.setenv(FAULT_ENV, f"{doc_id}@{marker}")
    monkeypatch.setattr(chunking._RowsFn, "process", chunking._RowsFn.process)  # restored after the test
    _install_for_workers(monkeypatch)


def arm_read(monkeypatch: Any, path_part: str, marker: Path) -> None:
    """Arm the read fault (:data:`READ_FAULT_ENV`) for one test, here and in the worker processes it starts."""
    from fsspec.implementations.local import LocalFileOpener

    monkeypatch.setenv(READ_FAULT_ENV, f"{path_part}@{marker}")
    monkeypatch.setattr(LocalFileOpener, "read", LocalFileOpener.read)  # restored after the test
    _install_for_workers(monkeypatch)


def _install_for_workers(monkeypatch: Any) -> None:
    install()
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(repo), str(Path(__file__).parent)]))
