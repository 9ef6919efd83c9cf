"""Per-document language by script share: Arabic letters against Latin letters."""

from __future__ import annotations

import re

import numpy as np

from zerda_core.chunks.charclasses import ARABIC_SCRIPT, LATIN, code_points

_LATIN_LETTERS = re.compile(r"[A-Za-z\u00C0-\u024F]+")  # the LATIN class
_SAMPLE_CHARS = 4_096
_SAMPLES = 8
MAJORITY = 0.8


def detect_language(text: str) -> str:
    """``ar`` or ``en`` when that script holds at least 80% of the letters, else ``mixed``.

    ``und`` when the text has no Arabic or Latin letter at all. Long texts are
    judged on evenly spaced samples, so the cost stays bounded.
    """
    sample = _spread_sample(text)
    if sample.isascii():
        return "en" if _LATIN_LETTERS.search(sample) else "und"
    classes = code_points(sample)[1]
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


def _spread_sample(text: str) -> str:
    if len(text) <= _SAMPLE_CHARS:
        return text
    width = _SAMPLE_CHARS // _SAMPLES
    step = (len(text) - width) // (_SAMPLES - 1)
    return "".join(text[i * step : i * step + width] for i in range(_SAMPLES))
