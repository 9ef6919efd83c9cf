"""Globs to corpus files on the workers, in the shape of Beam's ``fileio.MatchAll``: the job graph holds the
input patterns, never the files they match, and the launcher does no I/O a file.

At launch, :func:`check_inputs` asks each pattern for its first file only (a usage error, exit 2, when it has
none, when a folder it walks cannot be listed, or when it would read the output). In the job,
:class:`MatchInputs` lists each pattern on a worker (:func:`pipelines.input.expand.match_pattern`: sizes and
stamps from the listing, credentials redacted), keeps a file reached by several paths once (by its identity,
under its :func:`~pipelines.input.expand.preferred` path), and :class:`JudgeInputs` tells the files not to read
(same stamp as the previous run's report of their source, rows carried) from those to read.
"""

from __future__ import annotations

import glob
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.pvalue import PBegin, TaggedOutput
from apache_beam.typehints.decorators import no_annotations
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import glob_translate

from pipelines.errors import Explained, InputError
from pipelines.input.expand import (
    InputFile,
    _StrictWalk,
    file_identity,
    glob_root,
    listing_errors,
    listing_failed,
    local_exists,
    match_pattern,
    may_hold_matches,
    preferred,
    refuse_output_inside,
    say_listed_again,
    say_skipped,
)
from pipelines.redact import bounded, redact_url, remember_credentials
from pipelines.settings import COMPRESSION_SUFFIXES

log = logging.getLogger("pipelines.input.expand")  # the launcher's listing said these lines under this name

UNCHANGED = "unchanged"  # JudgeInputs: the previous reports of the files not read


class MatchFailed(InputError, Explained):
    """A pattern a worker could not list (a folder denied below its root): the run fails with this one line,
    exit code 2, and OUTPUT keeps its previous output (left out, the folder's files would count as deleted)."""


def check_inputs(patterns: Sequence[str], output: str | None = None) -> None:
    """The launch's check of the inputs, with I/O a pattern, never a file: each pattern must match a file (its
    walk stops at the first one) and must not read ``output``'s chunks. Raises :class:`InputError`."""
    for url in [*patterns, output or ""]:
        remember_credentials(url)  # libraries may echo them in shapes no URL rule catches
    for pattern in patterns:
        if output is not None:
            refuse_output_inside(pattern, output)
        with listing_errors(pattern):
            found = _has_a_file(pattern)
        if not found:
            raise InputError(f"input {bounded(redact_url(pattern))!r} matches no file")


def _has_a_file(pattern: str) -> bool:
    """Whether ``pattern`` matches a file its full listing (:func:`~pipelines.input.expand.match_pattern`) would
    keep: a walk of its root, top down, into the folders that may hold matches only, that stops at the first."""
    fs, path = url_to_fs(pattern)
    exists = local_exists(pattern, path) if isinstance(fs, LocalFileSystem) else fs.exists(path)
    if exists and not fs.isdir(path):
        return True
    magic = glob.has_magic(path) and not exists
    if not exists and not magic:
        return False
    root = glob_root(path) if magic else path
    matches = re.compile(glob_translate(path)).match if magic else None
    walk = _StrictWalk(fs, listing_failed(pattern, root, path if magic else ""))
    base = root.rstrip("/")
    for folder, folders, names in walk.walk(root or "/", topdown=True):
        below = [part for part in folder[len(base) :].split("/") if part]
        folders[:] = sorted(
            name for name in folders if not name.startswith((".", "_")) and _may_hold(path, root, [*below, name], magic)
        )
        for name in names:
            if name.startswith((".", "_")):
                continue
            if matches is None:
                return True
            parts = [*below, name]
            if any(matches("/".join([base, *parts[: i + 1]])) for i in range(len(parts))):
                return True
    return False


def _may_hold(path: str, root: str, parts: list[str], magic: bool) -> bool:
    return not magic or may_hold_matches(path, root, parts)


def may_spread(patterns: Sequence[str]) -> bool:
    """Whether a pattern may match a compressed file, whose records (of a large JSONL or Parquet file read whole
    by one worker) are spread before chunking (:func:`pipelines.input.split.spread_whole`): told by the end of
    the pattern's name, and for a name without wildcards whether it is a folder (one check a pattern). Only a
    matter of speed: without the branch that spreads them, such a file's records are chunked where it is read.
    """
    for pattern in patterns:
        fs, path = url_to_fs(pattern)
        name = path.rstrip("/").rsplit("/", 1)[-1].lower()
        tail = re.split(r"[*?\[\]]", name)[-1]  # the literal end of the name, after its last wildcard
        if "**" in name or any(tail.endswith(s) or s.endswith(tail) for s in COMPRESSION_SUFFIXES):
            return True  # ``*``, ``*.gz``, ``a.jsonl.gz``...: a compressed name may match
        if tail == name and (glob.has_magic(path) or fs.isdir(path)):
            return True  # a folder, named or matched: any file below it
    return False


class MatchInputs(beam.PTransform):
    """Input patterns -> the InputFiles they match, each file once, matched on the workers (one task a pattern).

    A file reached by several patterns meets its other paths by its identity (a local file's real path, else its
    URL) in a shuffle of paths, not of contents; the :func:`~pipelines.input.expand.preferred` path is kept.
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        super().__init__()
        self._patterns = list(patterns)

    def expand(self, pbegin: PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Patterns" >> beam.Create(self._patterns, reshuffle=False)
            | "SpreadPatterns" >> beam.Reshuffle()
            | "Match" >> beam.FlatMap(_matched)
            | "ByIdentity" >> beam.GroupByKey()
            | "OnePath" >> beam.ParDo(_OnePath())
        )


def _matched(pattern: str) -> Iterator[tuple[bytes, InputFile]]:
    remember_credentials(pattern)  # this worker's redaction knows them too
    try:
        files, skipped = match_pattern(pattern)
    except MatchFailed:
        raise
    except InputError as err:
        raise MatchFailed(str(err)) from err
    say_skipped(skipped)
    folders: dict[str, str] = {}
    for file in files:  # bytes: a local name need not be UTF-8 (its undecodable bytes kept as surrogates)
        yield file_identity(file.url, folders).encode("utf-8", "surrogateescape"), file


class _OnePath(beam.DoFn):
    """(a file's identity, its paths) -> its preferred path; the paths left out are counted, and said once a
    bundle."""

    def start_bundle(self) -> None:
        self._again = 0

    def process(self, element: tuple[bytes, Iterable[InputFile]]) -> Iterator[InputFile]:
        files = list(element[1])
        self._again += len(files) - 1
        yield min(files, key=preferred)

    def finish_bundle(self) -> None:
        say_listed_again(self._again)


class JudgedInputs(NamedTuple):
    """What :class:`JudgeInputs` gives: the files to read, and the previous reports of those not read."""

    to_read: beam.PCollection
    unchanged: beam.PCollection | None


class JudgeInputs(beam.PTransform):
    """Matched InputFiles -> :class:`JudgedInputs`. With the previous reports (``reports``, a PCollection of
    FileReports of the files the previous run read whole and stamped, or None when no rows are carried), a file
    is not read when its stamp is the one its source's report holds; files and reports meet by source in a
    shuffle of names and stamps. Rows are carried by source, so a file whose source another file shares
    (redaction can make two paths one: ``Signature=v1.jsonl``, ``Signature=v2.jsonl``) is always read."""

    def __init__(self, reports: beam.PCollection | None) -> None:
        super().__init__()
        self._reports = reports

    @no_annotations  # Beam 2.78 would type-check the NamedTuple it returns as the output of one PCollection
    def expand(self, files: beam.PCollection) -> JudgedInputs:
        if self._reports is None:
            return JudgedInputs(files, None)
        judged = (
            {"file": files | "FileBySource" >> beam.Map(lambda f: (f.source, f)), "report": self._reports}
            | "FileAndReport" >> beam.CoGroupByKey()
            | "Judge" >> beam.FlatMap(_judged).with_outputs(UNCHANGED, main="read")
        )
        return JudgedInputs(judged.read, judged[UNCHANGED])


def _judged(element: tuple[str, Mapping[str, Iterable[Any]]]) -> Iterator[Any]:
    _, grouped = element
    files, reports = list(grouped["file"]), list(grouped["report"])
    if len(files) == 1 and reports and files[0].stamp is not None and files[0].stamp == reports[0].stamp:
        yield TaggedOutput(UNCHANGED, reports[0])
    else:
        yield from files
