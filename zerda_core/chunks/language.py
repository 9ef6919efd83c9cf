"""Per-document language by script share: Arabic letters against Latin letters."""

from __future__ import annotations

import re

_ARABIC_LETTERS = re.compile(r"[\u0620-\u064A\u0671-\u06D3\u06FA-\u06FC\u0750-\u077F]+")
_LATIN_LETTERS = re.compile(r"[A-Za-z\u00C0-\u024F]+")
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
    arabic = sum(map(len, _ARABIC_LETTERS.findall(sample)))
    latin = sum(map(len, _LATIN_LETTERS.findall(sample)))
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
