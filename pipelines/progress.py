"""Progress lines at a steady interval on long runs, from inside the workers.

Each worker process keeps one :class:`Progress` and logs what it has done so far: files
started, documents, megabytes of text and chunks, with the throughput since it started; the
process id tells the workers' lines apart.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger("zerda.progress")
DEFAULT_INTERVAL_SECONDS = 10.0
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # the launcher's and the workers' lines alike


class Progress:
    """Counts work and logs a line when ``interval`` seconds have passed since the last one."""

    def __init__(self, interval: float = DEFAULT_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._started = self._last = clock()
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
