"""Per-document language by script share: Arabic letters against Latin letters."""

from __future__ import annotations

import re

import numpy as np

from zerda_core.chunks.charclasses import ARABIC_SCRIPT, LATIN, Classes, code_points

_LATIN_LETTERS = re.compile(r"[A-Za-z\u00C0-\u024F]+")  # the LATIN class
_SAMPLE_CHARS = 4_096
_SAMPLES = 8
MAJORITY = 0.8


def detect_language(text: str, classes: Classes | None = None) -> str:
    """``ar`` or ``en`` when that script holds at least 80% of the letters, else ``mixed``.

    ``und`` when the text has no Arabic or Latin letter at all. Long texts are
    judged on evenly spaced samples, so the cost stays bounded. ``classes``: those of
    ``text``'s characters (``code_points``), when the caller has them: the sample is not classified again.
    """
    pieces = _spread_sample(len(text))
    # Given the classes of a text that is not ASCII, the sample string is not built: counted on the classes, an
    # ASCII sample gives what the regex would (its letters are A-Z and a-z).
    if classes is None or text.isascii():
        sample = "".join(text[piece] for piece in pieces)
        if sample.isascii():
            return "en" if _LATIN_LETTERS.search(sample) else "und"
        classes = code_points(sample)[1]
    elif len(pieces) > 1:
        classes = np.concatenate([classes[piece] for piece in pieces])
    arabic = int(np.count_nonzero(classes & ARABIC_SCRIPT))
    latin = int(np.count_nonzero(classes & LATIN))
    letters = arabic + latin
    if letters == 0:
        return "und"
    if arabic >= MAJORITY * letters:
        return "ar"
    if latin >= MAJORITY * letters:
        return "en"
    return "mixed"


def _spread_sample(length: int) -> list[slice]:
    """The pieces of a text of ``length`` characters that are judged: all of it, or ``_SAMPLES`` spread evenly."""
    if length <= _SAMPLE_CHARS:
        return [slice(0, length)]
    width = _SAMPLE_CHARS // _SAMPLES
    step = (length - width) // (_SAMPLES - 1)
    return [slice(i * step, i * step + width) for i in range(_SAMPLES)]
