"""The errors an operator can fix, shared by the job and the report: each one exits with code 2, but JobError (1)."""

from __future__ import annotations


class UsageError(ValueError):
    """An argument neither zerda nor Beam understands, or a value Beam refuses: nothing was read or written."""


class OutputError(ValueError):
    """OUTPUT cannot be written or read as a zerda output, or another run holds it."""


class JobError(RuntimeError):
    """A runner on a cluster could not start or finish the job after launch (OUTPUT's lease was taken): exit
    code 1, one line, and OUTPUT keeps its previous output. A RuntimeError, as Beam raises for a failed job."""
