"""Progress lines at a steady interval on long runs, from inside the workers.

Each worker process keeps one :class:`Progress` and logs what it has done so far: files
started, documents, megabytes of text and chunks, with the throughput since it started; the
process id tells the workers' lines apart.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("zerda.progress")
DEFAULT_INTERVAL_SECONDS = 10.0
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # the launcher's and the workers' lines alike


def use_launcher_format() -> None:
    """Give the worker process's plain stderr handler the launcher's format.

    Beam's local worker processes (``--direct_running_mode=multi_processing``) print log lines through
    Python's default stderr handler (``INFO:zerda.progress:...``), set up by the first module-level
    ``logging.warning`` of their start-up. Only that handler is touched: the launcher's own, pytest's
    and a remote runner's handlers keep theirs.
    """
    for handler in logging.getLogger().handlers:
        default = handler.formatter is None or handler.formatter._fmt == logging.BASIC_FORMAT
        if type(handler) is logging.StreamHandler and handler.stream is sys.stderr and default:
            handler.setFormatter(logging.Formatter(LOG_FORMAT))


class Progress:
    """Counts work and logs a line when ``interval`` seconds have passed since the last one."""

    def __init__(self, interval: float = DEFAULT_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._started = self._last = clock()
        use_launcher_format()
        self._source = ""
        self.files = self.documents = self.chunks = self.characters = 0

    def add(self, source: str, characters: int, chunks: int) -> None:
        """Count one document; a file is counted when its first document arrives (they arrive together)."""
        with self._lock:
            if source != self._source:
                self._source = source
                self.files += 1
            self.documents += 1
            self.characters += characters
            self.chunks += chunks
            now = self._clock()
            if self.interval > 0 and now - self._last >= self.interval:
                self._last = now
                log.info("%s", self.line(now))

    def line(self, now: float) -> str:
        megabytes = self.characters / 1e6
        elapsed = max(now - self._started, 1e-9)
        return (
            f"progress (pid {os.getpid()}): {self.files:,} files, {self.documents:,} documents, "
            f"{megabytes:,.1f} M characters ({megabytes / elapsed:,.2f} M/s), {self.chunks:,} chunks"
        )
