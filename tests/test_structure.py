"""Cuts along structure: blank lines, headings and fence edges preferred, fitting fences whole, heading paths."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.chunk_checks import assert_chunk_contract
from tests.common import DATA
from tests.test_chunker_properties import structured_text
from zerda_core.chunks import AdaptiveChunker, ChunkConfig
from zerda_core.chunks.adaptive_chunker import STRUCTURE_SHARE
from zerda_core.chunks.structure import TITLE_CHARS, find_structure

GUIDE = (DATA / "guide.md").read_text(encoding="utf-8")
# Independent of the chunker's scan: a fenced block from its opening line to a closing line of the same mark.
FENCE = re.compile(r"(?ms)^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$")
BREAK_AFTER = re.compile(r"[ \t]*\n(?:[ \t]*\n|[ \t]*#{1,6}[ \t]|[ \t]*(?:```|~~~))")
RST = """Guide
=====

Intro to the guide. It explains how the tool is set up and used.

Install
-------

Get the tool first.

From source
~~~~~~~~~~~

Clone the repository, then build it.

Usage
-----

Run it.
"""


def _structural(text: str, end: int) -> bool:
    """Whether a chunk ending at ``end`` ends before a blank line, a heading or a fence, or after a fence."""
    return bool(BREAK_AFTER.match(text, end)) or any(m.end() == end for m in FENCE.finditer(text))


def test_guide_chunks_carry_their_heading_path() -> None:
    chunks = AdaptiveChunker(min_size=60, max_size=200, overlap=0).chunk(GUIDE)
    sections = [c.metadata.extra.get("section") for c in chunks]
    assert sections[0] == "Deploying the ingestion API"
    assert {"Deploying the ingestion API > Configuration", "Deploying the ingestion API > Limits"} <= set(sections)


def test_rst_headings_give_nested_paths() -> None:
    structure = find_structure(RST)
    assert structure.paths == ["Guide", "Guide > Install", "Guide > Install > From source", "Guide > Usage"]
    config = ChunkConfig(min_size=40, max_size=60, overlap=0, min_chunk_size=5)
    chunks = AdaptiveChunker(config).chunk(RST)
    section_of = {line: c.metadata.extra.get("section") for c in chunks for line in c.text.splitlines()}
    assert section_of["Clone the repository, then build it."] == "Guide > Install > From source"
    assert section_of["Run it."] == "Guide > Usage"


def test_a_huge_heading_is_cut_in_the_path_each_chunk_carries() -> None:
    """A 200 KB heading over a long body: each chunk's section stays a few hundred characters."""
    text = "# " + "Title " * 40_000 + "\n\n## " + "Sub " * 25_000 + "\n\n" + "Body words go on. " * 3_000
    chunker = AdaptiveChunker(min_size=200, max_size=1200, overlap=0)
    chunks = chunker.chunk(text)
    title, sub = ("Title " * 40_000)[:199] + "…", ("Sub " * 25_000)[:199] + "…"
    assert chunks[-1].metadata.extra["section"] == f"{title} > {sub}"
    assert all(len(c.metadata.extra.get("section", "")) <= 2 * TITLE_CHARS + 3 for c in chunks)
    assert_chunk_contract(chunker, text, chunks)


def test_plain_text_has_no_section_and_python_comments_inside_fences_are_not_headings() -> None:
    assert all("section" not in c.metadata.extra for c in AdaptiveChunker().chunk("plain words. " * 50))
    fenced = "Intro line.\n\n```\n# not a heading\nx = 1\n```\n"
    assert find_structure(fenced).heading_starts == []


def test_chunks_end_at_structure_once_they_have_a_good_share_of_the_target() -> None:
    text = GUIDE + "\n" + (DATA / "mixed_en_ar.md").read_text(encoding="utf-8")
    for size in (150, 250, 400):
        chunker = AdaptiveChunker(ChunkConfig(min_size=size, max_size=size, overlap=0, min_chunk_size=20))
        chunks = chunker.chunk(text)
        assert_chunk_contract(chunker, text, chunks)
        for chunk in chunks[:-1]:
            meta = chunk.metadata
            reach = range(meta.start_char + int(size * STRUCTURE_SHARE), meta.end_char)
            if not _structural(text, meta.end_char):
                assert not any(_structural(text, p) for p in reach), (size, chunk.text)


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    text=structured_text,
    size=st.integers(40, 600),
    overlap=st.integers(0, 200),
    scope=st.sampled_from(["document", "section"]),
)
def test_a_fenced_block_that_fits_is_never_cut(text: str, size: int, overlap: int, scope: str) -> None:
    config = ChunkConfig(min_size=size, max_size=size, overlap=overlap, density_scope=scope)
    chunker = AdaptiveChunker(config)
    chunks = chunker.chunk(text)
    assert_chunk_contract(chunker, text, chunks)
    for fence in FENCE.finditer(text):
        if fence.end() - fence.start() <= size:
            assert not [c for c in chunks if fence.start() < c.metadata.end_char < fence.end()], fence.group()
