"""Where the tests find the repository and its shipped texts, and the Beam options for worker processes."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
MULTI_PROCESS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]

# Llama 2's tokenizer.json, shipped in wordllama's wheel (the dev extra installs it): the real tokenizer the
# size_unit tokens tests cut with.
LLAMA_TOKENIZER = "package:wordllama/tokenizers/l2_supercat_tokenizer_config.json"
