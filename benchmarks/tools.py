"""The chunkers under test, each behind the same tiny interface so the timing loop treats them alike.

Peers are configured with a fixed character budget (``--peer-size``, default 512, overlap 128),
because none of them adapts its size per document; zerda picks its own target per document
between ``min_size`` and ``max_size``, and the benchmark reports that target beside the speeds.
Every tool counts characters (no tokenizer), so no tool pays for tokenisation the others skip.
A peer whose package is missing (``pip install -e .[bench]``) is skipped with a message.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any


@dataclass(frozen=True)
class Tool:
    """A named chunker: ``run`` is what gets timed, ``texts`` turns its output into strings afterwards."""

    key: str
    name: str
    version: str
    settings: str
    run: Callable[[str], Sequence[Any]]
    texts: Callable[[Sequence[Any]], list[str]]


def _version(dist: str) -> str:
    """Installed version of a distribution, or '?' when it is not installed as one (e.g. a source tree)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def zerda_tool(overlap: int, min_size: int, max_size: int) -> Tool:
    """zerda's AdaptiveChunker with the sizes the issue names; raises ImportError when it is not there yet."""
    import zerda_core
    from zerda_core.chunks import AdaptiveChunker

    chunker = AdaptiveChunker(overlap=overlap, min_size=min_size, max_size=max_size)

    def run(text: str) -> Sequence[Any]:
        return chunker.chunk(text, doc_id="bench", source="bench")

    return Tool(
        "zerda",
        "zerda AdaptiveChunker",
        getattr(zerda_core, "__version__", "?"),  # the tree under test, not whatever zerda pip installed
        f"overlap={overlap}, min_size={min_size}, max_size={max_size}",
        run,
        lambda chunks: [c.text for c in chunks],
    )


def chonkie_tool(size: int, overlap: int) -> Tool:
    """chonkie's SentenceChunker on its built-in character tokenizer (no model download)."""
    from chonkie import SentenceChunker

    chunker = SentenceChunker(tokenizer="character", chunk_size=size, chunk_overlap=overlap)
    return Tool(
        "chonkie",
        "chonkie SentenceChunker",
        _version("chonkie"),
        f"tokenizer='character', chunk_size={size}, chunk_overlap={overlap}",
        chunker.chunk,
        lambda chunks: [c.text for c in chunks],
    )


def semchunk_tool(size: int, overlap: int) -> Tool:
    """semchunk with ``len`` as token counter; memoize=False because caching len() only slows it down."""
    import semchunk

    def run(text: str) -> Sequence[Any]:
        return semchunk.chunk(text, size, len, memoize=False, overlap=overlap)

    return Tool(
        "semchunk",
        "semchunk",
        _version("semchunk"),
        f"chunk_size={size}, token_counter=len, overlap={overlap}, memoize=False",
        run,
        list,
    )


def langchain_tool(size: int, overlap: int) -> Tool:
    """langchain's RecursiveCharacterTextSplitter with its default separators and len."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)
    return Tool(
        "langchain",
        "langchain RecursiveCharacterTextSplitter",
        _version("langchain-text-splitters"),
        f"chunk_size={size}, chunk_overlap={overlap}",
        splitter.split_text,
        list,
    )


@dataclass(frozen=True)
class Sizes:
    """The size settings every tool is built from, so a memory probe subprocess can rebuild the same tool."""

    peer_size: int = 512
    overlap: int = 128
    min_size: int = 100
    max_size: int = 1500


KEYS = ("zerda", "chonkie", "semchunk", "langchain")


def make_tool(key: str, sizes: Sizes) -> Tool:
    """Build one tool by key; raises ImportError when its package is missing."""
    if key == "zerda":
        return zerda_tool(sizes.overlap, sizes.min_size, sizes.max_size)
    peers = {"chonkie": chonkie_tool, "semchunk": semchunk_tool, "langchain": langchain_tool}
    return peers[key](sizes.peer_size, sizes.overlap)


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
