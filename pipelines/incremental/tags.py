"""The names of the tagged outputs the incremental steps pass between them."""

from __future__ import annotations

_TO_CHUNK, _HASH, _TOTALS = "to_chunk", "hash", "totals"


_CHANGES, _FACTS, _INDEX, _DROPPED, _IDS, _DUPLICATES = "changes", "facts", "index", "dropped", "ids", "duplicates"
