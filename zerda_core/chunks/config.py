"""ChunkConfig: the settings a chunker reads, validated once at construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zerda_core.chunks.tokens import TokenCounter, load_tokenizer

DENSITY_SCOPES = ("document", "section")
MAX_SIZE = 2**31 - 1  # sizes and counts are stored as Arrow int32
SIZE_UNITS = ("characters", "tokens")


# The reference page's names for four settings; ``ChunkConfig`` accepts and answers to them too.
REFERENCE_NAMES = {
    "adaptive_base_size": "base_size",
    "adaptive_min_size": "min_size",
    "adaptive_max_size": "max_size",
    "adaptive_technical_threshold": "technical_threshold",
}
_DEFAULTS: dict[str, Any] = {"base_size": 512, "min_size": 100, "max_size": 1500, "technical_threshold": 0.5}


@dataclass(frozen=True, init=False)
class ChunkConfig:
    """Chunking settings, in the one spelling ``AdaptiveChunker``'s keywords, ``ChunkText``,
    ``ZerdaChunker`` and the YAML's ``chunking:`` section share.

    The reference page spells four of them ``adaptive_base_size``, ``adaptive_min_size``,
    ``adaptive_max_size`` and ``adaptive_technical_threshold``: the constructor takes those keywords
    too and the config answers to them as read-only attributes, so the reference page's code runs.
    ``min_chunk_size`` is the size (non-whitespace-trimmed characters) under which a
    whole document is dropped and under which a final tail joins the chunk before it.
    ``min_size > max_size`` is allowed, as the reference page says:
    every target then collapses to ``min_size``, and :meth:`size_warning` says so.
    That is the one rule for sizes: the chunker and the pipeline's YAML settings both build a
    ``ChunkConfig``, so both check sizes here.

    ``density_scope``: ``document`` (the reference page: one density, one target per document)
    or ``section`` (opt-in: the density of the paragraphs around each chunk sets its target).

    ``size_unit``: ``characters`` (the reference page) or ``tokens``: base, min, max and overlap
    count the tokens of ``tokenizer`` (a ``tokenizer.json`` path or ``package:NAME/PATH``,
    see :mod:`zerda_core.chunks.tokens`), and no chunk exceeds its target in tokens (unless the
    target is smaller than one character's own tokens: such a chunk holds that one character).
    ``min_chunk_size`` stays in characters in both units: it rejects near-empty documents.
    """

    base_size: int
    min_size: int
    max_size: int
    overlap: int
    technical_threshold: float
    min_chunk_size: int
    density_scope: str
    size_unit: str
    tokenizer: str | None

    def __init__(
        self,
        *,
        base_size: int = _DEFAULTS["base_size"],
        min_size: int = _DEFAULTS["min_size"],
        max_size: int = _DEFAULTS["max_size"],
        overlap: int = 128,
        technical_threshold: float = _DEFAULTS["technical_threshold"],
        min_chunk_size: int = 100,
        density_scope: str = "document",
        size_unit: str = "characters",
        tokenizer: str | None = None,
        adaptive_base_size: int | None = None,
        adaptive_min_size: int | None = None,
        adaptive_max_size: int | None = None,
        adaptive_technical_threshold: float | None = None,
    ) -> None:
        values: dict[str, Any] = {
            "base_size": base_size,
            "min_size": min_size,
            "max_size": max_size,
            "overlap": overlap,
            "technical_threshold": technical_threshold,
            "min_chunk_size": min_chunk_size,
            "density_scope": density_scope,
            "size_unit": size_unit,
            "tokenizer": tokenizer,
        }
        given = {
            "adaptive_base_size": adaptive_base_size,
            "adaptive_min_size": adaptive_min_size,
            "adaptive_max_size": adaptive_max_size,
            "adaptive_technical_threshold": adaptive_technical_threshold,
        }
        for reference, value in given.items():
            if value is None:
                continue
            name = REFERENCE_NAMES[reference]
            if values[name] != _DEFAULTS[name]:
                raise TypeError(f"ChunkConfig got {name} and {reference}, two names for one setting: give one")
            values[name] = value
        for name, value in values.items():
            object.__setattr__(self, name, value)
        self._check()

    @property
    def adaptive_base_size(self) -> int:
        """``base_size``, by the reference page's name (as are the three below)."""
        return self.base_size

    @property
    def adaptive_min_size(self) -> int:
        return self.min_size

    @property
    def adaptive_max_size(self) -> int:
        return self.max_size

    @property
    def adaptive_technical_threshold(self) -> float:
        return self.technical_threshold

    def _check(self) -> None:
        for name in ("base_size", "min_size", "max_size"):
            _require(is_size(getattr(self, name), 1), name, f"an integer in [1, {MAX_SIZE}]")
        _require(is_size(self.overlap, 0), "overlap", f"an integer in [0, {MAX_SIZE}]")
        _require(is_size(self.min_chunk_size, 0), "min_chunk_size", f"an integer in [0, {MAX_SIZE}]")
        threshold = self.technical_threshold
        _require(
            isinstance(threshold, (int, float)) and 0.0 <= threshold <= 1.0,
            "technical_threshold",
            "a number in [0, 1]",
        )
        _require(self.density_scope in DENSITY_SCOPES, "density_scope", "one of " + ", ".join(DENSITY_SCOPES))
        _require(self.size_unit in SIZE_UNITS, "size_unit", "one of " + ", ".join(SIZE_UNITS))
        if self.size_unit == "characters":
            _require(self.tokenizer is None, "tokenizer", "unset (None) when size_unit is characters")
            return
        tokenizer = self.tokenizer
        _require(isinstance(tokenizer, str) and tokenizer.strip() != "", "tokenizer", "a tokenizer.json path")
        try:
            self.token_counter()
        except ValueError as err:
            raise ValueError(f"ChunkConfig.tokenizer: {err}") from err

    def token_counter(self) -> TokenCounter | None:
        """The loaded tokenizer (cached per process) when sizes are in tokens, else ``None``."""
        return None if self.tokenizer is None else load_tokenizer(self.tokenizer)

    def size_warning(self) -> str | None:
        """What is odd but allowed about the sizes (``min_size > max_size``), or ``None``."""
        if self.min_size > self.max_size:
            return f"min_size ({self.min_size}) > max_size ({self.max_size}): every chunk target collapses to min_size"
        return None


def is_size(value: object, low: int) -> bool:
    """The one rule for a size (or overlap): an int (not a bool) in ``[low, MAX_SIZE]``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_SIZE


def _require(ok: bool, name: str, what: str) -> None:
    if not ok:
        raise ValueError(f"ChunkConfig.{name} must be {what}")
