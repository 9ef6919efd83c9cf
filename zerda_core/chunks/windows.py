"""Long texts in bounded pieces: density and tokenization each scan a huge document window by window."""

from __future__ import annotations


def whitespace_windows(text: str, size: int) -> tuple[list[str], list[int]]:
    """``text`` in pieces of about ``size`` characters ending at whitespace (no word split), with their offsets."""
    pieces, bases, start = [], [], 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            space = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
            end = space + 1 if space > start else end
        pieces.append(text[start:end])
        bases.append(start)
        start = end
    return pieces, bases
