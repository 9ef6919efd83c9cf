"""MetadataEnricher: the top keywords of each chunk, scored by TF-IDF within its document."""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from zerda_core.chunks.types import DocumentChunk

_WORD = re.compile(r"[^\W\d_][^\W_]*(?:['’-][^\W\d_]+)*")
_ARABIC_DIACRITICS = re.compile(r"[\u064B-\u0652\u0640]")

ENGLISH_STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves
    may might must shall upon within without one two three many much us via per
    using use used uses get gets set etc however thus therefore since every another
    """.split()
)
ARABIC_STOP_WORDS = frozenset(
    """
    في من على إلى الى عن مع هذا هذه ذلك تلك التي الذي الذين اللذين هو هي هم هن أنا نحن أنت أنتم كان كانت يكون
    تكون كانوا قد لقد لا لم لن ما ماذا متى أين كيف كل بعض غير بين عند بعد قبل حتى إذا اذا إن ان أن أو او ثم
    لكن بل كما أي أيضا أيضاً حيث وهو وهي وفي ومن وعلى إلا الا فقط هناك هنا منذ خلال ضمن دون نحو لدى
    تحت فوق أمام خلف حول عبر ضد مثل سوف ليس ليست وقد وكان وكانت ولا ولم هل
    عليه عليها عليهم فيه فيها فيهم منه منها منهم به بها بهم له لها لهم إليه إليها التى وذلك وهذا وهذه
    يمكن كذلك أكثر أقل جدا ومع وإن وأن فإن لأن لان حين عندما بينما إذ لذلك ذات ذو أما إما هؤلاء أولئك
    ونحن وهم وهن كلا بها أنه أنها إنه إنها ولكن وكل
    """.split()
)
# Words that fill code and URLs but say nothing about a chunk: `self`, the parts of `https://www.x.com/`.
CODE_NOISE = frozenset(
    """
    self cls this def elif else return import none true false null nil var let const void args kwargs str int
    http https www com org net html htm php
    """.split()
)
STOP_WORDS = ENGLISH_STOP_WORDS | ARABIC_STOP_WORDS | CODE_NOISE


class MetadataEnricher:
    """Adds ``metadata.extra["keywords"]``: ``[(term, score), ...]``, best first, to each chunk.

    A term's score in a chunk is its frequency in the chunk times its inverse chunk
    frequency across the chunks of the same document (smoothed: ``ln((1 + n) / (1 + df)) + 1``),
    so words that mark out one chunk from its siblings rank first. Ties break on the
    term, so the result is deterministic. English and Arabic stop words, code and URL noise
    (``self``, ``http``, ``com``: :data:`CODE_NOISE`) and words of fewer than ``min_length``
    letters are left out; Arabic diacritics and tatweel are ignored. Only the ``top_k`` best
    terms of a chunk are rounded and sorted, which keeps enrichment cheap beside chunking.
    """

    def __init__(self, top_k: int = 5, min_length: int = 3) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        if min_length < 1:
            raise ValueError("min_length must be at least 1")
        self.top_k = top_k
        self.min_length = min_length

    def enrich(self, chunks: Sequence[DocumentChunk]) -> list[DocumentChunk]:
        """Score keywords for ``chunks`` (in place) and return them as a list."""
        by_document: dict[tuple[str, str], list[DocumentChunk]] = defaultdict(list)
        for chunk in chunks:
            by_document[(chunk.metadata.source, chunk.metadata.doc_id)].append(chunk)
        for siblings in by_document.values():
            self._score_document(siblings)
        return list(chunks)

    def terms(self, text: str) -> list[str]:
        """The words of ``text`` that can be keywords, lowercased."""
        plain = _ARABIC_DIACRITICS.sub("", text).lower()
        return [w for w in _WORD.findall(plain) if len(w) >= self.min_length and w not in STOP_WORDS]

    def _score_document(self, chunks: list[DocumentChunk]) -> None:
        counts = [Counter(self.terms(chunk.text)) for chunk in chunks]
        n = len(chunks)
        document_frequency = Counter(term for count in counts for term in count)
        idf = {term: math.log((1 + n) / (1 + df)) + 1 for term, df in document_frequency.items()}
        for chunk, count in zip(chunks, counts, strict=True):
            total = sum(count.values())
            best = heapq.nsmallest(self.top_k, count.items(), key=lambda item: (-item[1] * idf[item[0]], item[0]))
            chunk.metadata.extra["keywords"] = [(term, round(freq / total * idf[term], 4)) for term, freq in best]
