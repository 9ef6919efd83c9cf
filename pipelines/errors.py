"""The errors an operator can fix, shared by the job and the report: each one exits with code 2."""

from __future__ import annotations


class UsageError(ValueError):
    """An argument neither zerda nor Beam understands, or a value Beam refuses: nothing was read or written."""


class OutputError(ValueError):
    """OUTPUT cannot be written or read as a zerda output, or another run holds it."""
