"""Where the tests find the repository and its shipped texts, and the Beam options for worker processes."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
MULTI_PROCESS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
