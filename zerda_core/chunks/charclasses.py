"""The class of every character of a text (space, Arabic letter, ...) as a numpy array, in one table lookup.

Density and language detection count characters and words of a few kinds. A regex with Unicode
classes, or a Python step per token, costs several times more per character on Arabic text than a
vectorised lookup of each code point, which costs the same in every script.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

Classes = npt.NDArray[np.uint8]
Offsets = npt.NDArray[np.intp]
Codes = npt.NDArray[np.uint8] | npt.NDArray[np.uint32]

SPACE = 1  # str.isspace(), where str.split() splits
CODE_MARK = 2  # one of CODE_PUNCTUATION
ARABIC_LETTER = 4  # U+0620-U+064A, density's Arabic letters
ARABIC_SCRIPT = 8  # the letters language detection counts as Arabic (with Persian and Urdu ones)
LATIN = 16  # A-Z, a-z, U+00C0-U+024F
ASCII_UPPER = 32  # A-Z; the bit is what lowercases one: ord("A") + 32 == ord("a")
CODE_PUNCTUATION = "{}<>[]()="
_LAST_SPACE = 0x3000  # the highest code point str.isspace() accepts (tests/test_density.py checks it)


def _table() -> Classes:
    """The classes of code points up to ``_LAST_SPACE``, and one more entry (no class) for every code point above."""
    table = np.zeros(_LAST_SPACE + 2, np.uint8)
    table[[c for c in range(_LAST_SPACE + 1) if chr(c).isspace()]] |= SPACE
    table[[ord(mark) for mark in CODE_PUNCTUATION]] |= CODE_MARK
    table[0x620:0x64B] |= ARABIC_LETTER
    for first, last in ((0x620, 0x64A), (0x671, 0x6D3), (0x6FA, 0x6FC), (0x750, 0x77F)):
        table[first : last + 1] |= ARABIC_SCRIPT
    for first, last in ((ord("A"), ord("Z")), (ord("a"), ord("z")), (0xC0, 0x24F)):
        table[first : last + 1] |= LATIN
    table[ord("A") : ord("Z") + 1] |= ASCII_UPPER
    return table


_TABLE = _table()
# The bit as a numpy scalar: a Python int operand costs a numpy call a third more (its type is worked out each time)
_SPACE_BIT = np.uint8(SPACE)
_ASCII_TABLE = _TABLE[:128].tobytes() + bytes(128)


def code_points(text: str) -> tuple[Codes, Classes]:
    """The code point of each character of ``text`` (lone surrogates included), and its class bits.

    ASCII text is classified by ``bytes.translate``, several times faster than an array lookup.
    """
    if text.isascii():
        data = text.encode("ascii")
        return np.frombuffer(data, np.uint8), np.frombuffer(data.translate(_ASCII_TABLE), np.uint8)
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    return codes, _TABLE.take(codes, mode="clip")  # code points past the table take its last entry: no class


def words(classes: Classes) -> tuple[Offsets, Offsets]:
    """Starts and ends of the runs of non-space characters: ``str.split()``'s tokens.

    The mask is written straight into its padded copy: on a page, each numpy call costs as much as its work.
    """
    padded = np.zeros(len(classes) + 2, np.bool_)  # a run at either end has an edge too
    np.equal(classes & _SPACE_BIT, 0, out=padded[1:-1])
    edges = (padded[1:] != padded[:-1]).nonzero()[0]  # np.flatnonzero's wrappers cost more than the scan on a page
    return edges[0::2], edges[1::2]


class Scan(NamedTuple):
    """A text's code points and classes (``code_points``), and its words: the runs of non-space characters."""

    codes: Codes
    classes: Classes
    starts: Offsets
    ends: Offsets


def scan(text: str) -> Scan:
    """``text`` classified once, for the density and the language detection of one document to share."""
    codes, classes = code_points(text)
    return Scan(codes, classes, *words(classes))
