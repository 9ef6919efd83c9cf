"""The chunkers under test, each behind the same tiny interface so the timing loop treats them alike.

None of the peers adapts its size per document, so by default each one is handed, per document,
the target and overlap zerda picks for that document (``peer_budget``), worked out once before
timing; zerda works out its own inside its timed call and ignores the budget it is handed.
``--peer-size N`` instead gives every peer a fixed budget of N characters (overlap ``--overlap``).
Every tool counts characters (no tokenizer), so no tool pays for tokenisation the others skip.
A peer whose package is missing (``pip install -e .[bench]``) is skipped with a message.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.evaluation.splitters import PEER_CHUNKERS
from pipelines.evaluation.splitters import version_of as _version

Budget = tuple[int, int]  # (chunk size, overlap) in characters, what a peer is asked for on one document


@dataclass(frozen=True)
class Sizes:
    """The size settings every tool is built from, so a memory probe subprocess can rebuild the same tool.

    ``peer_size`` None means the peers get zerda's per-document target; a number fixes their size.
    """

    peer_size: int | None = None
    overlap: int = 128
    min_size: int = 100
    max_size: int = 1500


@dataclass(frozen=True)
class Tool:
    """A named chunker: ``run(text, size, overlap)`` is what gets timed, ``texts`` turns its output into strings."""

    key: str
    name: str
    version: str
    settings: str
    run: Callable[[str, int, int], Sequence[Any]]
    texts: Callable[[Sequence[Any]], list[str]]


def peer_budget(sizes: Sizes) -> Callable[[str], Budget]:
    """What a peer is asked for on a document: zerda's own target and overlap for it, or the fixed ``peer_size``."""
    if sizes.peer_size is not None:
        fixed = (sizes.peer_size, sizes.overlap)
        return lambda text: fixed
    from zerda_core.chunks import AdaptiveChunker

    chunker = AdaptiveChunker(overlap=sizes.overlap, min_size=sizes.min_size, max_size=sizes.max_size)

    def budget(text: str) -> Budget:
        _, target, overlap = chunker.sizing(text)
        return target, overlap

    return budget


def _budget_settings(sizes: Sizes, size_name: str, overlap_name: str) -> str:
    """A peer's size settings for the report, under that peer's own parameter names."""
    if sizes.peer_size is not None:
        return f"{size_name}={sizes.peer_size}, {overlap_name}={sizes.overlap}"
    return f"{size_name}=zerda's target per document, {overlap_name}=min({sizes.overlap}, that target // 2)"


def zerda_tool(sizes: Sizes) -> Tool:
    """zerda's AdaptiveChunker with the sizes the issue names; raises ImportError when it is not there yet."""
    import zerda_core
    from zerda_core.chunks import AdaptiveChunker

    chunker = AdaptiveChunker(overlap=sizes.overlap, min_size=sizes.min_size, max_size=sizes.max_size)

    def run(text: str, size: int, overlap: int) -> Sequence[Any]:
        # the peers' budget is ignored: working out its own target is part of what zerda is timed on
        return chunker.chunk(text, doc_id="bench", source="bench")

    return Tool(
        "zerda",
        "zerda AdaptiveChunker",
        getattr(zerda_core, "__version__", "?"),  # the tree under test, not whatever zerda pip installed
        f"overlap={sizes.overlap}, min_size={sizes.min_size}, max_size={sizes.max_size}",
        run,
        lambda chunks: [c.text for c in chunks],
    )


def _peer_tool(key: str, name: str, settings: str) -> Tool:
    """A peer as zerda-eval builds it (``PEER_CHUNKERS``), one chunker per (size, overlap) built on first use:
    the untimed warm-up pass meets every budget first, so none is built while being timed. Raises ImportError
    when the peer is not installed."""
    peer = PEER_CHUNKERS[key]
    build = functools.cache(peer.load())

    def run(text: str, size: int, overlap: int) -> Sequence[Any]:
        return build(size, overlap)(text)

    return Tool(key, name, _version(peer.distribution), settings, run, peer.texts)


def chonkie_tool(sizes: Sizes) -> Tool:
    """chonkie's SentenceChunker on its built-in character tokenizer (no model download)."""
    settings = f"tokenizer='character', {_budget_settings(sizes, 'chunk_size', 'chunk_overlap')}"
    return _peer_tool("chonkie", "chonkie SentenceChunker", settings)


def semchunk_tool(sizes: Sizes) -> Tool:
    """semchunk with ``len`` as token counter, memoize=False."""
    settings = f"{_budget_settings(sizes, 'chunk_size', 'overlap')}, token_counter=len, memoize=False"
    return _peer_tool("semchunk", "semchunk", settings)


def langchain_tool(sizes: Sizes) -> Tool:
    """langchain's RecursiveCharacterTextSplitter with its default separators and len."""
    settings = _budget_settings(sizes, "chunk_size", "chunk_overlap")
    return _peer_tool("langchain", "langchain RecursiveCharacterTextSplitter", settings)


FACTORIES: dict[str, Callable[[Sizes], Tool]] = {
    "zerda": zerda_tool,
    "chonkie": chonkie_tool,
    "semchunk": semchunk_tool,
    "langchain": langchain_tool,
}
KEYS = tuple(FACTORIES)


def make_tool(key: str, sizes: Sizes) -> Tool:
    """Build one tool by key; raises ImportError when its package is missing."""
    return FACTORIES[key](sizes)


def build_tools(sizes: Sizes) -> list[Tool]:
    """zerda first, then every peer that imports; a missing one is reported and skipped, not fatal."""
    tools: list[Tool] = []
    for key in KEYS:
        try:
            tools.append(make_tool(key, sizes))
        except ImportError as exc:
            hint = "is zerda_core on the path?" if key == "zerda" else "pip install -e '.[bench]'"
            print(f"bench: skipping {key}: {exc} ({hint})", file=sys.stderr)
    return tools


def by_key(tools: list[Tool], key: str) -> Tool | None:
    """The tool with ``key``, if it was built."""
    return next((t for t in tools if t.key == key), None)
