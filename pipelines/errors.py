"""zerda's error types, one module for the job and the report.

Usage errors (an argument, a setting, an input, an output) exit with code 2 before OUTPUT changes. A run that
fails after launch exits with code 1 and one line: a :class:`JobError`, or an :class:`Explained` failure a
worker raised, whose own message is that line whatever the runner (found by :func:`explained_line`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator


class UsageError(ValueError):
    """An argument neither zerda nor Beam understands, or a value Beam refuses: nothing was read or written."""


class SettingsError(ValueError):
    """Invalid run settings or an unreadable config file; the CLI exits with code 2."""


class InputError(ValueError):
    """An input pattern that matches no file, cannot be listed, or would read the output; the CLI exits with
    code 2."""


class OutputError(ValueError):
    """OUTPUT cannot be written or read as a zerda output, or another run holds it."""


class ManifestError(OutputError):
    """A ``_manifest.json`` that is not zerda's (not JSON, not an object, a part of the wrong shape). ``why``
    says what is wrong without the file's name, for a reader that words the refusal its own way."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where} is {why}")
        self.why = why


class NewerManifestError(OutputError):
    """A ``_manifest.json`` of a format newer than this zerda reads: refused, never guessed at, since a newer
    zerda may have changed what its keys mean. Not a :class:`ManifestError`: a reader that starts over on a
    broken manifest must not overwrite what a newer zerda wrote."""


class JobError(RuntimeError):
    """A runner on a cluster could not start or finish the job after launch (OUTPUT's lease was taken): exit
    code 1, one line, and OUTPUT keeps its previous output. A RuntimeError, as Beam raises for a failed job."""


class Explained(Exception):
    """A failure whose message is all an operator needs: the launcher prints it as the run's one line, not
    the worker's traceback around it."""


class StorageError(OSError):
    """The storage failed while a file was read (not its content): the runner retries."""


class EnvironmentFault(StorageError, Explained):
    """The worker's environment failed while a file was read (temp disk full, out of memory, a disk's I/O
    error, a permission), not the file: never a reject, which would commit good data as bad; the runner
    retries, then the job fails and OUTPUT keeps its previous output."""


class InputChanged(StorageError, Explained):
    """An input file changed (rewritten, grown, cut) while the parts of it split across workers were read: the
    parts would mix two versions of the file, so the part is read again (the runner retries it, and a part that
    finds the file changed before it reads becomes a reject); a runner that cannot retry fails the job with one
    line, OUTPUT as it was."""


class RunStopped(RuntimeError):
    """A writer was asked for a new file after the launcher was stopped (Ctrl-C, SIGTERM): an in-memory run's
    pipeline thread cannot be killed, and a file it began after the run's files were deleted would stay."""


class StagingFault(OSError, Explained):
    """Writing the run's files into OUTPUT's staging failed for the storage's reason, not a passing one (its disk
    full, a quota, a read-only or denied folder): the run fails with one line, OUTPUT as it was."""


class CommitError(OSError, Explained):
    """The commit found files it did not stage, missing or short of rows: nothing is marked ``_SUCCESS``."""


class TableConflict(CommitError):
    """Another run committed to the Iceberg table while this one wrote: this run commits nothing (exit code 2)."""


class PreviousUnreadable(RuntimeError, Explained):
    """A previous output's index or chunk file an incremental run cannot read or trust (damaged in place, another
    file put in its place): the launcher runs again in full, which its message, one line, says why
    (``pipelines.incremental.previous.unreadable_carry``); its traceback would read as a crash."""


class AccountingError(RuntimeError, Explained):
    """Records read do not add up to documents chunked plus rejects: something was lost or doubled. Checked
    by the commit before it changes OUTPUT."""


def _explained_names() -> list[str]:
    found, pending = [], list(Explained.__subclasses__())
    while pending:
        kind = pending.pop()
        found.append(kind.__name__)
        pending += kind.__subclasses__()
    return found


def chain(error: BaseException | None) -> Iterator[BaseException]:
    """``error`` and every error it was raised from or while handling, each once."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        err = pending.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        yield err
        pending += [err.__cause__, err.__context__]


def explains(error: BaseException | None) -> Explained | None:
    """The :class:`Explained` failure in ``error``'s chain (itself, or what it was raised from), if any."""
    return next((err for err in chain(error) if isinstance(err, Explained)), None)


def explained_line(error: BaseException) -> str | None:
    """The message of the :class:`Explained` failure that ended a run, if one did: from the exception chain
    (a run in this process), else from the text the failure reached the launcher as (a worker process's or a
    cluster's traceback, which names the class: its name is the code, never the wording)."""
    explained = explains(error)
    if explained is not None:
        return _one_line(str(explained))
    names = "|".join(_explained_names())
    found = re.findall(rf"\b(?:{names}): ([^\n]+)", str(error))
    return _one_line(found[-1]) if found else None


_BEAM_STEP = re.compile(r" \[while running '[^'\n]*'\]")  # what Beam adds to a failed step's message


def without_beam_steps(message: str) -> str:
    """A worker's message without the ``[while running 'step']`` Beam appends to it."""
    return _BEAM_STEP.sub("", message)


def _one_line(message: str) -> str:
    return without_beam_steps(" ".join(message.split()))
