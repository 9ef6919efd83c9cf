"""AdaptiveChunker: chunk size follows the document's information density.

Dense technical text (code, SQL, formulas) gets small chunks for precise
retrieval; narrative text gets large ones for context. Every chunk is an exact
slice of the input, no non-whitespace character is lost, and each chunk (its
carried overlap included) is at most the target size, except a short final tail
merged into the chunk before it. Sizes are characters, or tokens of a tokenizer
(:mod:`zerda_core.chunks.tokens`), where the bound holds for the merged tail too.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from bisect import bisect_right

import numpy as np
import numpy.typing as npt

from zerda_core.chunks.base import BaseChunker
from zerda_core.chunks.charclasses import (
    ARABIC_LETTER,
    ASCII_UPPER,
    CODE_MARK,
    Classes,
    Codes,
    Offsets,
    Scan,
    code_points,
    scan,
    words,
)
from zerda_core.chunks.config import ChunkConfig
from zerda_core.chunks.language import detect_language
from zerda_core.chunks.sentences import SentenceEnds, drop_inside, merge_sorted
from zerda_core.chunks.structure import Structure, find_structure
from zerda_core.chunks.tokens import CHARACTERS, CharacterMeasure
from zerda_core.chunks.types import ChunkMetadata, ChunkType, DocumentChunk
from zerda_core.chunks.windows import whitespace_windows

log = logging.getLogger(__name__)

TECHNICAL_WORDS = frozenset(
    """
    def class lambda elif async await import return yield const var let void struct func fn self this None True
    False null nullptr printf println SELECT FROM WHERE JOIN INSERT UPDATE DELETE CREATE TABLE GROUP ORDER
    API APIs SDK SDKs HTTP HTTPS REST JSON XML YAML URL URI GET POST PUT PATCH TCP UDP CLI CPU GPU
    algorithm algorithms theorem lemma equation equations integral derivative matrix vector polynomial logarithm
    خوارزمية خوارزميات معادلة معادلات مصفوفة دالة برمجة استعلام
    """.split()
)
# What the chunker computes, by number: a new density formula (``_estimate_density``) or a new way of packing
# sentences into chunks (``_Cutter``) gives other chunks of the same text, so the number is part of every
# fingerprint of chunks (pipelines/settings.py) and goes up with each change of either.
DENSITY_VERSION = 4
_DECIMAL = re.compile(r"\.(?=[0-9])(?<=[0-9]\.)")  # the digit after first: it turns away most dots in one test
_COMPLEXITY = re.compile(r"O\([^()\n]{1,20}\)")
ARABIC_LONG_WORD = 7  # letters
_WINDOW = 1 << 20
VOCABULARY_WINDOW = 50
VOCABULARY_BLOCKS = 8
TECH_HITS_FULL = 4.0
WORD_LENGTH_BASELINE = 4.5
ARABIC_WORD_LENGTH_BASELINE = 4.1
WORD_LENGTH_SPAN = 3.0
LONG_LATIN_WORD = 8
LONG_WORDS_FULL = 0.5


def _estimate_density(text: str) -> float:
    """Information density of ``text`` in [0, 1], by the reference page's weighted formula.

    The four terms and weights are the reference page's; each is defined as a rate or an
    average, so a text and the same text repeated score alike, and a page and its Arabic
    translation score alike (checked on the Debian handbook in tests/test_density.py).
    Words are the whitespace-separated tokens; an Arabic word is one holding an Arabic
    letter (U+0620-U+064A).

    - technical hits (weight 0.4): words that are programming or SQL keywords, API/SDK/HTTP
      terms or maths terms (``TECHNICAL_WORDS``), plus each code punctuation mark
      ``{}<>[]()=``, decimal numbers and ``O(...)`` complexities; per 100 non-whitespace
      characters (indentation and script do not dilute it), divided by ``TECH_HITS_FULL``
      (4 hits per 100 such characters, about a Python module's rate) and capped at 1.
    - unique vocabulary ratio (0.3): the mean, over blocks of ``VOCABULARY_WINDOW`` (50)
      consecutive words, of distinct words / 50 (a mean segmental type-token ratio), a word
      known by its first character (A-Z lowercased), its last character and its length: a
      key packed from three numbers in numpy, where lowercasing, splitting and hashing the
      words themselves cost a Python step per word and several times more on Arabic text.
      ``n // 50`` blocks but at most ``VOCABULARY_BLOCKS`` (8), spread evenly over the ``n``
      words (block ``k`` of ``m`` starts at word ``k * (n - 50) // (m - 1)``); a text of
      fewer than 100 words has one block, its first 50 words (or all of them). A plain
      distinct/words ratio falls as a text grows; this does not (8 blocks, 400 words, are
      enough for a page, its translation and the page repeated to score alike).
    - average word length score (0.2): ``(mean word length - baseline) / 3`` clamped to
      [0, 1]; the baseline is the words' mean of 4.5 characters for a non-Arabic word and
      4.1 for an Arabic one (Arabic words of the handbook are 0.4 characters shorter than
      the English words of the same pages: short vowels are unwritten). Plain English
      prose scores about 0.2, Python source about 0.6.
    - complex words (0.1, the reference page's Arabic complex hits, made script-neutral):
      the share of long words among all words, times 2, capped at 1. A long word is an
      Arabic word holding 7+ Arabic letters (the page's indicator, Arabic words of 7+
      characters, its diacritics U+064B-U+0652 and the punctuation glued to it not counted:
      the letter counts that tell Arabic words apart already give it) or a non-Arabic word
      of ``LONG_LATIN_WORD`` (8)+ characters (about as frequent in English as 7-letter words
      in Arabic, on the handbook's parallel pages: 23% and 21% of words).
    The text is scanned in 1 MiB windows, so memory stays bounded on huge documents (each
    window gives its own vocabulary blocks). Each window is classified character by character in
    numpy (:mod:`zerda_core.chunks.charclasses`): Arabic costs what ASCII costs.
    """
    return _density_and_scan(text)[0]


def _density_and_scan(text: str) -> tuple[float, Scan | None]:
    """``_estimate_density`` of ``text``, and its scan when it is one window (all but huge documents).

    A huge document's windows are scanned one at a time, each scan freed before the next, so memory stays bounded.
    """
    pieces = whitespace_windows(text, _WINDOW)[0]
    if len(pieces) != 1:
        return _density([_window_counts(piece, scan(piece)) for piece in pieces]), None
    found = scan(pieces[0])
    return _density([_window_counts(pieces[0], found)]), found


def _density(sums: list[tuple[int, int, int, int, int, int, int]]) -> float:
    """``_estimate_density`` of a text from its windows' ``_window_counts``."""
    if not sums:
        return 0.0
    words, word_chars, tech_hits, long_words, arabic_words, distinct, block_words = map(sum, zip(*sums, strict=True))
    if words == 0:
        return 0.0
    vocab_ratio = distinct / block_words
    baseline = WORD_LENGTH_BASELINE + (ARABIC_WORD_LENGTH_BASELINE - WORD_LENGTH_BASELINE) * arabic_words / words
    length_score = min(max((word_chars / words - baseline) / WORD_LENGTH_SPAN, 0.0), 1.0)
    density = (
        min(tech_hits / (word_chars / 100) / TECH_HITS_FULL, 1.0) * 0.4
        + vocab_ratio * 0.3
        + length_score * 0.2
        + min(long_words / words / LONG_WORDS_FULL, 1.0) * 0.1
    )
    return min(max(density, 0.0), 1.0)


# Numpy scalars for the operands of numpy calls made on every page: a Python int costs a call a third more (its type is
# worked out each time)
_ARABIC_LETTER_BIT = np.uint8(ARABIC_LETTER)
_CODE_MARK_BIT = np.uint8(CODE_MARK)
_ASCII_UPPER_BIT = np.uint8(ASCII_UPPER)
_LONG_LATIN_WORD = np.intp(LONG_LATIN_WORD)
_ARABIC_LONG_WORD_BITS = np.int32(ARABIC_LONG_WORD * ARABIC_LETTER)  # letters_before counts 4 per Arabic letter
_ZERO = np.int32(0)


def _window_counts(window: str, found: Scan) -> tuple[int, int, int, int, int, int, int]:
    """What ``_estimate_density`` sums over windows: words, their characters, technical hits, long words,
    Arabic words, and distinct words and words of the vocabulary blocks.

    The words are the runs of non-space characters (``found``), as ``str.split()`` cuts them. A page holds
    a few thousand characters, so each numpy call's fixed cost weighs as much as its work: the words' keys
    (``_word_keys``) serve both the technical words and the vocabulary.
    """
    codes, classes, starts, ends = found
    if len(starts) == 0:
        return 0, 0, 0, 0, 0, 0, 0
    lengths = ends - starts
    word_chars = int(np.add.reduce(lengths))  # what lengths.sum() computes, without its Python wrapper
    long_latin = lengths >= _LONG_LATIN_WORD
    arabic_words = long_words = 0
    # each Arabic letter's class holds the bit ARABIC_LETTER (4) once: summed, 4 per letter
    letters = None if window.isascii() else classes & _ARABIC_LETTER_BIT  # no Arabic letter is ASCII
    if letters is not None and np.count_nonzero(letters):
        letters_before = _letters_before(letters)
        word_letters = letters_before[ends] - letters_before[starts]  # 4 per letter
        arabic = word_letters > _ZERO
        arabic_words = int(np.count_nonzero(arabic))
        long_latin = long_latin > arabic  # and not Arabic
        long_words = int(np.count_nonzero(word_letters >= _ARABIC_LONG_WORD_BITS))
    long_words += int(np.count_nonzero(long_latin))
    keys = _word_keys(codes, classes, starts, ends, lengths)
    tech_hits = (
        _technical_words(window, keys, starts, ends)
        + int(np.count_nonzero(classes & _CODE_MARK_BIT))
        + len(_DECIMAL.findall(window))
        + _complexities(window)
    )
    distinct, block_words = _vocabulary(keys)
    return len(starts), word_chars, tech_hits, long_words, arabic_words, distinct, block_words


def _complexities(window: str) -> int:
    """How many ``O(...)`` complexities ``window`` holds: scanned from its first "O", found by ``find`` (a memchr)."""
    first = window.find("O")
    return 0 if first == -1 else len(_COMPLEXITY.findall(window, first))


def _letters_before(letters: Classes) -> npt.NDArray[np.int32]:
    """The sum of ``letters`` over the first ``i`` characters, for every ``i`` from 0 to ``len(letters)``."""
    before = np.zeros(len(letters) + 1, np.int32)
    np.add.accumulate(letters, dtype=np.int32, out=before[1:])  # cumsum() would take a slower way to the same sums
    return before


Keys = npt.NDArray[np.uint64]
_CODE_BITS = np.uint64(21)  # code points and window lengths (at most 1 MiB) fit in 21 bits


def _word_keys(codes: Codes, classes: Classes, starts: Offsets, ends: Offsets, lengths: Offsets) -> Keys:
    """A key per word (``lengths``: ``ends - starts``) that packs its first code point (A-Z lowercased), its last and
    its length, 21 bits each: equal keys are equal (first, last, length) triples, what ``_vocabulary`` tells words
    apart by."""
    keys = codes[starts].astype(np.uint64)
    keys += classes[starts] & _ASCII_UPPER_BIT
    keys <<= _CODE_BITS
    keys |= codes[ends - 1]
    keys <<= _CODE_BITS
    keys |= lengths.view(np.uint64)
    return keys


def _token_slots(keys: Keys) -> npt.NDArray[np.uint64]:
    """A slot in ``_TECHNICAL_SLOTS`` per token, from its key (``_word_keys``): the top bits of a product that
    spreads every bit of the key over them. Equal keys share a slot, so a token whose slot no technical word
    has is not one (a token differing from one only in the case of its first letter is compared as a string)."""
    return (keys * _MIX) >> _SLOT_SHIFT


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd; its (wrapping) product spreads every input bit over the top bits
_SLOT_BITS = 16
_SLOT_SHIFT = np.uint64(64 - _SLOT_BITS)


def _technical_slots() -> npt.NDArray[np.bool_]:
    """The slots (``_token_slots``) of the technical words."""
    codes, classes = code_points(" ".join(sorted(TECHNICAL_WORDS)))
    starts, ends = words(classes)
    slots = np.zeros(1 << _SLOT_BITS, np.bool_)
    slots[_token_slots(_word_keys(codes, classes, starts, ends, ends - starts))] = True
    return slots


_TECHNICAL_SLOTS = _technical_slots()


def _technical_words(window: str, keys: Keys, starts: Offsets, ends: Offsets) -> int:
    """How many tokens are ``TECHNICAL_WORDS``: only the few in a technical word's slot (``_token_slots``) are
    compared, so most tokens are never built or hashed as strings."""
    found = _TECHNICAL_SLOTS.take(_token_slots(keys)).nonzero()[0]
    spans = zip(starts[found].tolist(), ends[found].tolist(), strict=True)
    return sum(window[start:end] in TECHNICAL_WORDS for start, end in spans)


def _vocabulary(keys: Keys) -> tuple[int, int]:
    """Distinct words and words, summed over the vocabulary blocks, words told apart by their keys
    (``_word_keys``): sorting each block's keys puts equal ones side by side. The blocks are those
    ``_estimate_density`` names; their starts are worked out in numpy (a list made into an array costs more on a page),
    and a lone block is a slice.
    """
    n = len(keys)
    count = min(VOCABULARY_BLOCKS, n // VOCABULARY_WINDOW)
    if count <= 1:
        block = np.sort(keys[:VOCABULARY_WINDOW])
        return 1 + int(np.count_nonzero(block[1:] != block[:-1])), len(block)
    first = _BLOCK_NUMBERS[:count] * (n - VOCABULARY_WINDOW) // (count - 1)
    blocks = keys[first[:, np.newaxis] + _BLOCK_OFFSETS]  # one row per block
    blocks.sort(axis=1)
    return count + int(np.count_nonzero(blocks[:, 1:] != blocks[:, :-1])), blocks.size


_BLOCK_OFFSETS = np.arange(VOCABULARY_WINDOW, dtype=np.intp)
_BLOCK_NUMBERS = np.arange(VOCABULARY_BLOCKS, dtype=np.intp)


class AdaptiveChunker(BaseChunker):
    """Sentence-aware chunker whose target size shrinks as information density grows.

    ``target_size = max_size - density * (max_size - min_size)``, clamped to
    ``[min_size, max_size]``. A given ``config`` takes precedence over the keyword
    sizes (and ``density_scope``, ``size_unit``, ``tokenizer``). With ``density_scope="section"`` each chunk's target
    follows the density of the paragraphs around it (``extra["local_density"]``), so the
    prose and the code of one manual get different sizes; ``extra["density"]`` stays the
    whole document's. With ``size_unit="tokens"`` sizes count ``tokenizer``'s tokens
    (``extra["token_count"]`` per chunk), offsets stay characters. ``base_size`` and
    ``technical_threshold`` are stored, not used in splitting (density is continuous).
    Stateless after construction: thread-safe.
    """

    def __init__(
        self,
        config: ChunkConfig | None = None,
        *,
        base_size: int = 512,
        min_size: int = 100,
        max_size: int = 1500,
        overlap: int = 128,
        technical_threshold: float = 0.5,
        language: str = "auto",
        density_scope: str = "document",
        size_unit: str = "characters",
        tokenizer: str | None = None,
    ) -> None:
        if config is None:
            config = ChunkConfig(
                base_size=base_size,
                min_size=min_size,
                max_size=max_size,
                overlap=overlap,
                technical_threshold=technical_threshold,
                density_scope=density_scope,
                size_unit=size_unit,
                tokenizer=tokenizer,
            )
        if not isinstance(language, str) or not language:
            raise ValueError("language must be a non-empty string such as 'auto', 'en' or 'ar'")
        self.config = config
        self.base_size = config.base_size
        self.min_size = config.min_size
        self.max_size = config.max_size
        self.overlap = config.overlap
        self.technical_threshold = config.technical_threshold
        self.min_chunk_size = config.min_chunk_size
        self.density_scope = config.density_scope
        self.size_unit = config.size_unit
        self.language = language
        self._tokens = config.token_counter()
        warning = config.size_warning()
        if warning is not None:
            log.warning("%s", warning)

    def target_size(self, density: float) -> int:
        """The chunk size for a document of this density, clamped to ``[min_size, max_size]``."""
        if self.min_size >= self.max_size:
            return self.min_size
        target = round(self.max_size - density * (self.max_size - self.min_size))
        return min(max(target, self.min_size), self.max_size)

    def sizing(self, text: str) -> tuple[float, int, int]:
        """The density, target size and overlap ``chunk`` uses for ``text``, without chunking it.

        The overlap is capped at half the target, so every chunk moves forward.
        """
        return self._sizing(_estimate_density(text))

    def _sizing(self, density: float) -> tuple[float, int, int]:
        """``sizing`` for a text of this (unrounded) density."""
        density = round(density, 4)
        target = self.target_size(density)
        return density, target, min(self.overlap, target // 2)

    def chunk(self, text: str, doc_id: str = "", source: str = "") -> list[DocumentChunk]:
        """Cut ``text`` into density-sized chunks; a text under ``min_chunk_size`` gives ``[]``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        for name, value in (("doc_id", doc_id), ("source", source)):
            if not isinstance(value, str):  # else chunk_id, which hashes them, fails later, far from the call
                raise TypeError(f"{name} must be str, got {type(value).__name__} (pass str({name}) for a number)")
        if len(text.strip()) < max(self.min_chunk_size, 1):
            return []
        raw_density, whole = _density_and_scan(text)  # the text classified once, for the density and the language
        density, target, _ = self._sizing(raw_density)
        language = detect_language(text, whole and whole.classes) if self.language == "auto" else self.language
        del whole  # its arrays (about 15 bytes a character) are not held while the text is cut
        measure = CHARACTERS if self._tokens is None else self._tokens.measure(text)
        by_section = self.density_scope == "section"
        sizing = self._local_sizing(text, measure) if by_section else _Sizing([0], [target], None)
        structure = find_structure(text)
        spans, token_counts = self._cut(text, sizing, structure, measure)
        adaptive, targets = ChunkType.ADAPTIVE, sizing.targets
        # Positional arguments, in the field order of ChunkMetadata: keywords cost a third more per chunk; a dict
        # display, a quarter less than a copy of a shared one.
        chunks = [
            DocumentChunk(
                text[start:end],
                ChunkMetadata(
                    doc_id,
                    source,
                    index,
                    adaptive,
                    language,
                    start,
                    end,
                    {"density": density, "target_size": targets[block]},
                ),
            )
            for index, (start, end, block) in enumerate(spans)
        ]
        if sizing.densities is not None:
            for chunk, (_, _, block) in zip(chunks, spans, strict=True):
                chunk.metadata.extra["local_density"] = sizing.densities[block]
        if token_counts is not None:
            for chunk, count in zip(chunks, token_counts, strict=True):
                chunk.metadata.extra["token_count"] = count
        if structure.heading_starts:
            for chunk, section in zip(chunks, structure.sections_at([start for start, _, _ in spans]), strict=True):
                if section:
                    chunk.metadata.extra["section"] = section
        return chunks

    def _cut(
        self, text: str, sizing: _Sizing, structure: Structure, measure: CharacterMeasure
    ) -> tuple[list[tuple[int, int, int]], list[int] | None]:
        """The chunk spans ``(start, end, block)``, and in tokens each chunk's own token count.

        In tokens the cut measures the document's tokens; a chunk tokenized alone may count a few
        more at its edges. Then the document is cut again with every target lowered by the worst
        excess, until each chunk's own count is within its target (or the targets are down to 1).
        """
        margin = 0
        while True:
            aimed = sizing.lowered(margin)
            ends = SentenceEnds(text)
            breaks = _keep_fences_whole(ends, structure, aimed, measure)
            spans = _Cutter(text, aimed, self.overlap, self.min_chunk_size, breaks, measure).cut(ends)
            if self._tokens is None:
                return spans, None
            counts = self._tokens.count([text[start:end] for start, end, _ in spans])
            excess = max(count - sizing.targets[block] for count, (_, _, block) in zip(counts, spans, strict=True))
            if excess <= 0 or margin >= max(sizing.targets) - 1:
                return spans, counts
            margin = min(margin + excess, max(sizing.targets) - 1)

    def _local_sizing(self, text: str, measure: CharacterMeasure) -> _Sizing:
        """Targets by block of paragraphs: each block's density is measured with its neighbours on both sides."""
        block = max(measure.chars(max(self.max_size, self.min_size)), SECTION_BLOCK_MIN)
        starts = _paragraph_blocks(text, block)
        bounds = [*starts, len(text)]
        last = len(starts) - 1
        densities = [
            round(_estimate_density(text[starts[max(i - 1, 0)] : bounds[min(i + 2, last + 1)]]), 4)
            for i in range(len(starts))
        ]
        return _Sizing(starts, [self.target_size(d) for d in densities], densities)


def _keep_fences_whole(
    ends: SentenceEnds, structure: Structure, sizing: _Sizing, measure: CharacterMeasure
) -> list[int]:
    """Make headings and fence edges sentence ends, and each fenced block that fits its target one sentence.

    Returns the structural ends a chunk prefers to stop at: before a blank line, a heading or a fence,
    and after a fence.
    """
    targets = sizing.targets
    whole = [(a, b) for a, b in structure.fences if measure.size(a, b) <= targets[sizing.block_at(a)]]
    if structure.breaks or whole:
        ends.restructure(structure.breaks, whole)
    return drop_inside(merge_sorted(ends.paragraph_ends, structure.breaks), whole)


SECTION_BLOCK_MIN = 500
# A chunk that has reached this share of its target ends at the last blank line, heading or fence edge
# in reach rather than at the last sentence end.
STRUCTURE_SHARE = 0.6
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")


def _paragraph_blocks(text: str, size: int) -> list[int]:
    """Starts of consecutive blocks of about ``size`` characters, ending at a blank line (else a newline) when near."""
    starts = [0]
    while starts[-1] + size < len(text):
        reach = starts[-1] + size
        found = _PARAGRAPH_BREAK.search(text, reach, reach + 2 * size)
        cut = found.end() if found else text.find("\n", reach, reach + 2 * size) + 1 or reach + 2 * size
        if cut >= len(text):
            break
        starts.append(cut)
    return starts


class _Sizing:
    """Targets by block: block ``i`` covers ``[starts[i], starts[i + 1])``; one block for whole-document density."""

    __slots__ = ("densities", "starts", "targets")

    def __init__(self, starts: list[int], targets: list[int], densities: list[float] | None) -> None:
        self.starts = starts
        self.targets = targets
        self.densities = densities

    def block_at(self, position: int) -> int:
        return bisect_right(self.starts, position) - 1

    def lowered(self, margin: int) -> _Sizing:
        """The same blocks with every target ``margin`` lower (at least 1)."""
        if margin == 0:
            return self
        return _Sizing(self.starts, [max(t - margin, 1) for t in self.targets], self.densities)


_WORD_START = re.compile(r"(?<!\S)\S")
_NON_SPACE = re.compile(r"\S")
_SPACES = (" ", "\t", "\n", "\r")
_ZWJ = "\u200d"
_CLUSTER_TAIL = re.compile("[\u200d\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]")  # ZWJ, skin tones, flag tags


def _continues_cluster(text: str, i: int) -> bool:
    """Whether ``text[i]`` belongs with the character before it: a combining mark (accents, Arabic
    harakat, Thai vowels, variation selectors), an emoji modifier or tag, or what follows a ZWJ."""
    if not 0 < i < len(text):
        return False
    char = text[i]
    return unicodedata.category(char)[0] == "M" or bool(_CLUSTER_TAIL.match(char)) or text[i - 1] == _ZWJ


def _cluster_start(text: str, i: int, floor: int) -> int:
    """``i``, moved back to the start of the character cluster it falls inside, but not to ``floor`` or
    below (then ``i``): a cut inside a word never strands an accent or splits an emoji."""
    j = i
    while j > floor and _continues_cluster(text, j):
        j -= 1
    return i if _continues_cluster(text, j) or j == floor else j


class _Cutter:
    """Packs sentences (between the ends ``SentenceEnds`` finds) into chunks of at most their target.

    A chunk's target is its block's (``_Sizing``), taken where the chunk starts. A chunk
    after the first starts inside the last ``overlap`` characters of the one before (capped
    at half that chunk's target), snapped forward to a sentence start, else to a word start
    (shrunk further when that lets the next sentence fit whole). A sentence that cannot fit is cut at the last
    whitespace in reach (a newline in the second half of the window is preferred), else at
    a character.
    """

    def __init__(
        self,
        text: str,
        sizing: _Sizing,
        overlap: int,
        min_chunk_size: int,
        breaks: list[int],
        measure: CharacterMeasure = CHARACTERS,
    ) -> None:
        self.text = text
        self.measure = measure
        self.breaks = breaks
        self.sizing = sizing
        self.max_overlap = overlap
        self.min_chunk_size = min_chunk_size
        self.blocks = len(sizing.starts)
        self.block = 0
        self.target = sizing.targets[0]
        self.overlap = min(overlap, self.target // 2)
        self.structural = int(self.target * STRUCTURE_SHARE)  # how far into a chunk a structural end is wanted
        # in characters (the default) a size is a difference: the few steps a chunk takes do the sum, not a call
        self.characters = type(measure) is CharacterMeasure

    def _aim(self, start: int | None) -> int:
        """Take the target and overlap of the block holding ``start`` (a new chunk's start), and return the
        chunk's reach: the farthest end its target allows (0 when no chunk is open)."""
        if start is None:
            return 0
        if self.blocks > 1:
            self.block = self.sizing.block_at(start)
            self.target = self.sizing.targets[self.block]
            self.overlap = min(self.max_overlap, self.target // 2)
            self.structural = int(self.target * STRUCTURE_SHARE)
        return start + self.target if self.characters else self.measure.ahead(start, self.target)

    def cut(self, ends: SentenceEnds) -> list[tuple[int, int, int]]:
        """Chunks as ``(start, end, block)``."""
        chunks: list[tuple[int, int, int]] = []
        start: int | None = None  # the open chunk's start; it may lie inside the previous chunk
        end = 0  # the open chunk's end
        fresh = False  # whether the open chunk holds text the previous chunk does not
        limit = 0  # the open chunk's reach (``_aim``)
        next_sentence, last_within = ends.next_sentence, ends.last_within  # looked up once, called at every chunk
        aim, next_start = self._aim, self._next_start
        s, e = next_sentence(0)  # the current sentence's start and end
        length = len(self.text)
        while s < length:
            while True:
                if start is None or (not fresh and limit <= s):
                    start, end, fresh = s, s, False
                    limit = aim(start)
                if e <= limit:  # this sentence fits, and maybe more after it
                    end, fresh = last_within(limit), True
                    break
                if fresh:
                    better = self._structural_end(ends, start, end, chunks[-1][1] if chunks else start)
                    if better != end:  # the chunk ends earlier: the sentence after it is another one
                        end = better
                        s, e = next_sentence(better)
                    chunks.append((start, end, self.block))
                    start, fresh = next_start(ends, start, end, e), False
                    limit = aim(start)
                    continue
                piece_end, s = self._cut_sentence(s, limit)
                chunks.append((start, piece_end, self.block))
                start, end = self._next_start(ends, start, piece_end, e), piece_end
                limit = self._aim(start)
            s, e = next_sentence(end)
        if fresh and start is not None:
            chunks.append((start, end, self.block))
        return self._merge_short_tail(chunks)

    def _structural_end(self, ends: SentenceEnds, start: int, end: int, previous_end: int) -> int:
        """The last structural end in ``[start + STRUCTURE_SHARE * target, end]`` past ``previous_end`` (the
        chunk before it ends there: a chunk starting in its overlap must still advance), else ``end``."""
        breaks = self.breaks
        lowest = start + self.structural if self.characters else self.measure.ahead(start, self.structural)
        floor = start if start > previous_end else previous_end  # a conditional, not max(): a call per chunk
        i = bisect_right(breaks, end) - 1
        while i >= 0 and breaks[i] >= lowest:
            if breaks[i] > floor and ends.is_end(breaks[i]):
                return breaks[i]
            i -= 1
        return end

    def _next_start(self, ends: SentenceEnds, start: int, end: int, next_end: int) -> int | None:
        """Where the chunk after ``[start, end)`` begins: inside its overlap, or ``None`` for no overlap.

        No overlap when any would keep the next sentence (ending at ``next_end``) from fitting
        although it fits alone: a fenced block that fits is never cut for the sake of overlap.
        """
        if self.overlap == 0:
            return None
        measure = self.measure
        if self.characters:
            lowest, fitting = end - self.overlap, next_end - self.target
        else:
            lowest, fitting = measure.back(end, self.overlap), measure.back(next_end, self.target)
        if lowest <= start:
            lowest = start + 1
        if fitting < lowest:
            fitting = lowest
        found = self._overlap_start(ends, fitting, end)
        if found is not None:
            return found
        following = _NON_SPACE.search(self.text, end)
        if following is not None and next_end <= measure.ahead(following.start(), self.target):
            return None  # no overlap lets the next sentence fit, and it fits alone
        found = self._overlap_start(ends, lowest, end)
        if found is not None:
            return found
        while lowest < end and _continues_cluster(self.text, lowest):  # never start inside a cluster
            lowest += 1
        return lowest if lowest < end else None

    def _overlap_start(self, ends: SentenceEnds, low: int, end: int) -> int | None:
        """The first sentence start in ``[low, end)``, else the first word start there, else None.

        A chunk that starts where a sentence, a paragraph or a heading does keeps what begins there whole:
        a heading that closed the chunk before is carried into the chunk of the body it introduces, which
        retrieves better than a chunk that starts mid-sentence (docs/retrieval.md).
        """
        if low >= end:
            return None
        found = ends.first_start_within(low, end)
        if found is not None:
            return found
        word = _WORD_START.search(self.text, low, end)
        return word.start() if word is not None else None

    def _cut_sentence(self, s: int, limit: int) -> tuple[int, int]:
        """Cut the sentence starting at ``s`` at or before ``limit``: (piece end, rest start)."""
        text = self.text
        cut = text.rfind("\n", s + (limit - s) // 2, limit + 1)
        if cut <= s:
            cut = max(text.rfind(space, s + 1, limit + 1) for space in _SPACES)
        if cut <= s:
            cut = _cluster_start(text, limit, s)  # one "word" longer than the window: cut inside it
        piece_end = cut
        while piece_end > s + 1 and text[piece_end - 1].isspace():
            piece_end -= 1
        rest = _NON_SPACE.search(text, cut)
        return piece_end, rest.start() if rest else len(text)

    def _merge_short_tail(self, chunks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """A final chunk adding fewer than ``min_chunk_size`` new characters joins the one before (and its target).

        In tokens only when the merged chunk stays within that target: the bound in tokens is hard.
        """
        if len(chunks) < 2:
            return chunks
        (prev_start, prev_end, block), (_, last_end, _) = chunks[-2], chunks[-1]
        if len(self.text[prev_end:last_end].strip()) < self.min_chunk_size and (
            not self.measure.hard or self.measure.size(prev_start, last_end) <= self.sizing.targets[block]
        ):
            chunks[-2:] = [(prev_start, last_end, block)]
        return chunks
