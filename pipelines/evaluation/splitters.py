"""The ways a corpus is cut under evaluation: zerda's settings, fixed windows and the peer splitters.

Each splitter turns a document's text into character spans ``(start, end)``: zerda and the fixed windows
give offsets; a peer's chunk texts are found in the document, in order. The peers (LangChain's recursive
splitter, chonkie's SentenceChunker, semchunk) count characters, so no tokenizer is downloaded; one that
is not installed raises ImportError, which the caller reports and skips.

A zerda splitter with an ``embed_text`` template (``output.embed_text``) ranks each chunk by its rendered
text (:mod:`pipelines.embed_text`) while its span, and so the gold overlap, stays the chunk's offsets.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import zerda_core
from pipelines.embed_text import TITLE_KEY, check_template, render
from pipelines.records import SourceRecord
from pipelines.settings import ChunkingSettings

TextSpans = list[tuple[int, int]]
Cut = tuple[TextSpans, list[str] | None]  # a document's spans, and the text each is ranked by (None: its own)
PEERS = ("fixed", "langchain", "chonkie", "semchunk")


@dataclass(frozen=True)
class Splitter:
    """A named way to cut a document into character spans: ``cut(number, text)`` gives the spans of the pool's
    document ``number`` and, for a splitter that ranks its chunks by another text than their own (zerda's
    ``embed_text``), that text for each span, from the same cut."""

    name: str
    family: str
    version: str
    cut: Callable[[int, str], Cut]


def version_of(dist: str) -> str:
    """Installed version of a distribution, or '?' when it is not installed as one (e.g. a source tree)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def peer_overlap(size: int) -> int:
    """The peers' overlap: zerda's default 128 characters, at most a quarter of the chunk."""
    return min(128, size // 4)


def located(text: str, pieces: Sequence[str]) -> TextSpans:
    """Where each chunk text stands in ``text``: searched from the previous chunk's start, as chunks come in order.

    A chunk that cannot be found (a splitter that rewrote the text) is an error, not a silent miss.
    """
    spans, cursor = [], 0
    for piece in pieces:
        at = text.find(piece, cursor)
        if at < 0:
            raise ValueError(f"chunk not found in its document after offset {cursor}: {piece[:60]!r}")
        spans.append((at, at + len(piece)))
        cursor = at
    return spans


def zerda_splitter(
    name: str, chunking: ChunkingSettings, embed_text: str | None = None, documents: Sequence[SourceRecord] = ()
) -> Splitter:
    """zerda's AdaptiveChunker for a config's chunking section; its own offsets are the spans.

    With an ``embed_text`` template the chunks are ranked by their rendered text; ``documents`` (by document
    number, as read) fill ``{doc_id}`` and ``{title}``, and ``{source}`` is empty: the evaluation pools
    documents, not files.
    """
    chunker = chunking.chunker()
    template = check_template(embed_text)

    def cut(number: int, text: str) -> Cut:
        if template is None:
            return [(c.metadata.start_char, c.metadata.end_char) for c in chunker.chunk(text)], None
        read = documents[number] if number < len(documents) else None
        chunks = chunker.chunk(text, doc_id="" if read is None else read.doc_id)
        if read is not None and read.title is not None:
            for chunk in chunks:
                chunk.metadata.extra[TITLE_KEY] = read.title
        return [(c.metadata.start_char, c.metadata.end_char) for c in chunks], [render(template, c) for c in chunks]

    return Splitter(name, "zerda", zerda_core.__version__, cut)


def fixed_splitter(size: int) -> Splitter:
    """Windows of ``size`` characters, each starting ``size - overlap`` after the one before."""
    overlap = peer_overlap(size)

    def cut(number: int, text: str) -> Cut:
        # the last window starts before len - overlap, so it reaches the end of the text
        starts = range(0, max(len(text) - overlap, 1), size - overlap)
        return [(start, min(start + size, len(text))) for start in starts], None

    return Splitter(f"fixed {size}", "fixed", "-", cut)


PeerBuilder = Callable[[int, int], Callable[[str], Sequence[Any]]]  # (size, overlap) -> text -> the peer's chunks


@dataclass(frozen=True)
class Peer:
    """A peer chunker, counting characters: ``load()`` imports it (ImportError when it is not installed) and
    gives how it is built at a (size, overlap); ``texts`` turns what it returns into chunk texts. The one place
    the peers are built, for zerda-eval and the benchmarks alike."""

    distribution: str
    load: Callable[[], PeerBuilder]
    texts: Callable[[Sequence[Any]], list[str]] = list


def _langchain() -> PeerBuilder:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return lambda size, overlap: RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap).split_text


def _chonkie() -> PeerBuilder:
    from chonkie import SentenceChunker

    return lambda size, overlap: SentenceChunker(tokenizer="character", chunk_size=size, chunk_overlap=overlap).chunk


def _semchunk() -> PeerBuilder:
    import semchunk

    def build(size: int, overlap: int) -> Callable[[str], Sequence[Any]]:
        # len as the token counter; memoize=False because caching len() only slows it down
        return lambda text: semchunk.chunk(text, size, len, memoize=False, overlap=overlap)

    return build


PEER_CHUNKERS: dict[str, Peer] = {
    "langchain": Peer("langchain-text-splitters", _langchain),
    "chonkie": Peer("chonkie", _chonkie, lambda chunks: [c.text for c in chunks]),
    "semchunk": Peer("semchunk", _semchunk),
}


def peer_splitter(key: str, size: int) -> Splitter:
    """A peer (or fixed windows) at ``size`` characters; raises ImportError when the peer is not installed."""
    if key == "fixed":
        return fixed_splitter(size)
    peer = PEER_CHUNKERS[key]
    split = peer.load()(size, peer_overlap(size))

    def cut(number: int, text: str) -> Cut:
        return located(text, peer.texts(split(text))), None

    return Splitter(f"{key} {size}", key, version_of(peer.distribution), cut)


def peer_splitters(sizes: Sequence[int], peers: Sequence[str] = PEERS, prog: str = "zerda-eval") -> list[Splitter]:
    """Every peer at every size; a peer that is not installed is skipped with one message on stderr."""
    built = []
    for key in peers:
        for size in sizes:
            try:
                built.append(peer_splitter(key, size))
            except ImportError as exc:
                print(f"{prog}: skipping {key}: {exc} (pip install 'zerda[bench]')", file=sys.stderr)
                break
    return built
