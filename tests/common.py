"""Where the tests find the repository and its shipped texts, the Beam options for worker processes, a free
port for the servers the tests start, and a spy on how many calls of a function run at once."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
MULTI_PROCESS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]

# Llama 2's tokenizer.json, shipped in wordllama's wheel (the dev extra installs it): the real tokenizer the
# size_unit tokens tests cut with.
LLAMA_TOKENIZER = "package:wordllama/tokenizers/l2_supercat_tokenizer_config.json"


def most_at_once(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, seconds: float = 0.02) -> list[int]:
    """Make ``module.name`` take ``seconds`` longer (an object store's round trips); the returned list's one
    value becomes the most calls of it that ran at the same time."""
    real, running, most = getattr(module, name), [0], [0]
    lock = threading.Lock()

    def slowed(*args: Any, **kwargs: Any) -> Any:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(seconds)
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(module, name, slowed)
    return most


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now, for a server the tests start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
