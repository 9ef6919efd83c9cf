"""Sizes in characters or in tokens: the one measure the chunker's cut logic asks.

The cutter works on character positions; a measure turns "``n`` units after ``start``" into a
position and back. :data:`CHARACTERS` is the identity (the reference page's unit). A
:class:`TokenMeasure` is built from one tokenization of the whole document: the tokenizer's
character offsets answer every question by bisection, so no candidate chunk is re-tokenized
while cutting. A chunk tokenized alone can differ from its share of the document's tokens at its
edges (a word-piece at a cut), so the chunker counts each chunk's own tokens once at the end and
re-cuts with tighter targets when one is over (:meth:`TokenCounter.count`).

Tokenizers: a Hugging Face ``tokenizer.json`` (the ``tokenizers`` package, extra ``zerda[tokens]``),
by path or as ``package:NAME/PATH`` for a file a Python package ships, e.g.
``package:wordllama/tokenizers/l2_supercat_tokenizer_config.json`` (Llama 2's 32k BPE).
"""

from __future__ import annotations

import hashlib
import importlib.resources
from array import array
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import chain
from pathlib import Path
from stat import S_ISCHR, S_ISDIR, S_ISFIFO, S_ISREG, S_ISSOCK
from typing import Any

from zerda_core.chunks.windows import whitespace_windows

PACKAGE_PREFIX = "package:"
# Documents are tokenized in windows of about this many characters, cut at whitespace: the offsets of
# a 50 MB document as one Python list would cost gigabytes.
TOKEN_WINDOW = 1 << 20
# The largest tokenizer.json read: the biggest models' files are tens of MB; a path to /dev/zero or a
# corpus dump must fail at once, not read forever (a file growing while read stops here too).
MAX_TOKENIZER_BYTES = 256 << 20


class CharacterMeasure:
    """Sizes in characters: ``n`` units after ``start`` is ``start + n``."""

    hard = False  # a merged final tail may exceed the target, as the reference page allows

    def ahead(self, start: int, n: int) -> int:
        """The farthest position ``p`` with ``size(start, p) <= n``."""
        return start + n

    def back(self, end: int, n: int) -> int:
        """The nearest position ``p`` with ``size(p, end) <= n``."""
        return end - n

    def size(self, start: int, end: int) -> int:
        return end - start

    def chars(self, n: int) -> int:
        """About how many characters ``n`` units span (to size paragraph blocks)."""
        return n


CHARACTERS = CharacterMeasure()


class TokenMeasure(CharacterMeasure):
    """Sizes in the tokens of one document: ``size(a, b)`` counts the tokens whose span meets ``[a, b)``.

    ``starts``/``ends`` are the tokens' character offsets, both ascending (tokens do not overlap;
    several byte tokens of one character share its span).
    """

    hard = True  # every chunk within its target in tokens, the merged tail included

    def __init__(self, starts: array[int], ends: array[int], length: int) -> None:
        self.starts = starts
        self.ends = ends
        self.length = length

    def ahead(self, start: int, n: int) -> int:
        """At least one character past ``start``, so a chunk always advances (even past a character of many tokens)."""
        k = bisect_right(self.ends, start) + n
        return max(self.starts[k], start + 1) if k < len(self.starts) else self.length

    def back(self, end: int, n: int) -> int:
        k = bisect_left(self.starts, end) - n - 1
        return self.ends[k] if k >= 0 else 0

    def size(self, start: int, end: int) -> int:
        return bisect_left(self.starts, end) - bisect_right(self.ends, start)

    def chars(self, n: int) -> int:
        return round(n * self.length / max(len(self.starts), 1))


class TokenCounter:
    """A loaded tokenizer: measures documents and counts chunks' tokens (special tokens left out).

    ``digest`` is the SHA-256 of the tokenizer file, so settings that name the same path but a
    changed file fingerprint differently. Thread-safe: ``tokenizers`` encodes without shared state.
    """

    def __init__(self, tokenizer: Any, digest: str) -> None:
        self._tokenizer = tokenizer
        self.digest = digest

    def measure(self, text: str) -> TokenMeasure:
        """The document's token offsets, tokenized window by window at whitespace."""
        flat: array[int] = array("q")
        for piece, base in zip(*whitespace_windows(text, TOKEN_WINDOW), strict=True):
            offsets = array("q", chain.from_iterable(self._tokenizer.encode(piece, add_special_tokens=False).offsets))
            flat.extend(map(base.__add__, offsets) if base else offsets)
        return TokenMeasure(flat[0::2], flat[1::2], len(text))

    def count(self, texts: list[str]) -> list[int]:
        """Each text's own token count, as an embedding model sees it without its special tokens.

        ``encode_batch_fast`` (tokenizers 0.20+) skips the offsets, which a count does not need: a
        quarter to a third faster than ``encode`` one text at a time on the handbook's chunks.
        """
        return [len(encoding) for encoding in self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)]


def tokenizer_path(spec: str) -> Path:
    """The file a tokenizer setting names: a path, or ``package:NAME/PATH`` inside an installed package."""
    if not spec.startswith(PACKAGE_PREFIX):
        return Path(spec).expanduser()
    package, _, inner = spec[len(PACKAGE_PREFIX) :].partition("/")
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError as err:
        raise ValueError(f"tokenizer {spec!r}: package {package!r} is not installed") from err
    return Path(str(root.joinpath(inner)))


def load_tokenizer(spec: str) -> TokenCounter:
    """Load a ``tokenizer.json`` once per process and file version; ``ValueError`` in one line when unusable."""
    path = tokenizer_path(spec)
    try:
        stat = path.stat()
    except OSError as err:
        raise ValueError(f"cannot read tokenizer {spec!r}: {err.strerror or err}") from err
    if not S_ISREG(stat.st_mode):  # a FIFO would block, /dev/zero would never end, a folder cannot be read
        raise ValueError(f"cannot read tokenizer {spec!r}: not a regular file ({_kind(stat.st_mode)})")
    if stat.st_size > MAX_TOKENIZER_BYTES:
        raise ValueError(
            f"cannot read tokenizer {spec!r}: {stat.st_size:,} bytes, over {MAX_TOKENIZER_BYTES:,}:"
            " not a tokenizer.json"
        )
    return _load(spec, str(path), stat.st_mtime_ns, stat.st_size)


def _kind(mode: int) -> str:
    kinds = ((S_ISDIR, "a directory"), (S_ISFIFO, "a FIFO"), (S_ISCHR, "a character device"), (S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a file")


@lru_cache(maxsize=8)
def _load(spec: str, path: str, _mtime_ns: int, _size: int) -> TokenCounter:
    """The tokenizer at ``path``; the file's time and size are part of the cache key, so an edit is seen."""
    try:
        from tokenizers import Tokenizer
    except ImportError as err:
        raise ValueError("size_unit 'tokens' needs the tokenizers package: pip install 'zerda[tokens]'") from err
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_TOKENIZER_BYTES + 1)
    except OSError as err:
        raise ValueError(f"cannot read tokenizer {spec!r}: {err.strerror or err}") from err
    if len(raw) > MAX_TOKENIZER_BYTES:  # it grew after the check
        raise ValueError(f"cannot read tokenizer {spec!r}: over {MAX_TOKENIZER_BYTES:,} bytes: not a tokenizer.json")
    try:
        tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as err:  # a bad UTF-8 byte, or tokenizers' own bare Exception for a bad file
        first = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise ValueError(f"tokenizer {spec!r} is not a tokenizer.json file: {first}") from err
    return TokenCounter(tokenizer, hashlib.sha256(raw).hexdigest())
