"""How zerda's commands end their process: with their exit code, and without the interpreter's teardown.

Arrow's native thread pools, torn down at interpreter exit while one of their threads is still joinable,
now and then abort the process after every piece of work is done (``terminate called without an active
exception``: SIGABRT, exit 134 or -6; apache/arrow#34314 and #50482, open): a run that committed its output
would be counted as failed by its scheduler. By then nothing is left to do (the output committed or not, the
lease released, the summary printed), so the command flushes its streams and logs and leaves at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn, Protocol


def leave(code: int) -> NoReturn:
    """End the process with ``code`` once stdout, stderr and the logs are flushed; no teardown runs."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or full stdout: the command has said so already
            stream.flush()
    os._exit(code)


class Command(Protocol):
    """A command's entry point, as console scripts call it."""

    def __call__(self, argv: list[str] | None = None) -> NoReturn: ...


def command(main: Callable[[list[str] | None], int]) -> Command:
    """The console-script form of ``main``: its exit code, then :func:`leave`. An error ``main`` does not catch
    (a bug) ends the process as Python does, with its traceback."""

    def run_command(argv: list[str] | None = None) -> NoReturn:
        leave(main(argv))

    run_command.__doc__ = main.__doc__
    return run_command
