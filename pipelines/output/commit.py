"""The commit of a run into a directory OUTPUT: its staged files replace the previous dataset, then the
manifest and ``_SUCCESS`` are written. Three steps, so that the copies run on every worker, not on one:

1. :class:`_BeginCommit`, once: checks what the run would publish (``check_publishable``) and the lease,
   finds which staged files still wait in ``_staging`` (an earlier attempt of this commit may have moved
   some: one listing), retracts ``_SUCCESS`` and the manifest, clears the previous
   dataset; yields each file to move.
2. :class:`_MoveStaged`, 256 files a task, the tasks spread across workers: a rename on a local disk, one
   server-side copy on an object store (the staged originals go with the staging folder), 16 at once.
3. :class:`_FinishCommit`, once, after every move (their results are its side input): one listing checks
   each committed file is there with the size it was written with; no file is read again (rows were
   counted and sizes taken as each file was written); this run's staged files are deleted; the table of
   committed files, ``_manifest.json``, then ``_SUCCESS`` are written; last, the run's listings (a runner
   that restarts the steps before a failed commit reads them again).

A stop reaching the launcher (``pipelines.output.write.stop_commit``) is decided between the steps that
change what OUTPUT is: before the retraction or after it, before each move, before the manifest.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import apache_beam as beam
from apache_beam.typehints.decorators import no_annotations
from fsspec import AbstractFileSystem

from pipelines.errors import CommitError
from pipelines.output.build_manifest import finish_manifest
from pipelines.output.layout import INDEX_ROWS_DIR, LEAVING_DIR, LISTING_DIR, MANIFEST_FILE, STAGING_DIR, SUCCESS_FILE
from pipelines.output.lease import check_held
from pipelines.output.manifest import FOOTER_THREADS, Manifest, write_files_table
from pipelines.output.ownership import dataset_files, staged_as
from pipelines.output.write import (
    _MOVE_THREADS,
    CommitStopped,
    StagedFile,
    _check_running,
    _filesystem,
    _remove,
    _remove_if_empty,
    _unless_stopped,
    absolute_url,
    check_publishable,
    move_file,
    staged_views,
)

Plan = list[tuple[StagedFile, str]]  # each staged file with its final path, both relative to OUTPUT
Move = tuple[str, str]  # (staged path, final path), relative to OUTPUT
_MOVES_PER_TASK = 256  # files a worker's task moves, 16 at once: 400,000 files make ~1,600 tasks


class CommitOutput(beam.PTransform):
    """``{"chunks", "rejects": StagedFile PCollections, "manifest": one dict, any other key: StagedFiles}`` ->
    the final manifest, once every staged write is done: the commit into a directory, its copies spread
    across the workers. The ``_index``, ``_ids``, ``_changes`` and inputs files are committed as the chunks
    are."""

    def __init__(self, output: str, run_id: str | None = None) -> None:
        super().__init__()
        self._output = absolute_url(output)
        self._run_id = run_id

    @no_annotations
    def expand(self, pcolls: Mapping[str, beam.PCollection]) -> beam.PCollection:
        pipeline, staged = pcolls["manifest"].pipeline, staged_views(pcolls)
        moves = pipeline | "Once" >> beam.Create([None]) | "Begin" >> beam.ParDo(_BeginCommit(*self._where), *staged)
        moved = moves | "Spread" >> beam.GroupByKey() | "Move" >> beam.ParDo(_MoveStaged(*self._where))
        finish = beam.ParDo(_FinishCommit(*self._where), *staged, beam.pvalue.AsList(moved))
        return pipeline | "AfterMoves" >> beam.Create([None]) | "Commit" >> finish

    @property
    def _where(self) -> tuple[str, str | None]:
        return self._output, self._run_id


class _CommitStep(beam.DoFn):
    """A step of the commit of ``output`` (an absolute URL) by run ``run_id`` (None: no lease, in tests)."""

    def __init__(self, output: str, run_id: str | None = None) -> None:
        self._output = output
        self._run_id = run_id


class _BeginCommit(_CommitStep):
    """Checks, then retracts the previous output and clears its dataset; yields each staged file to move."""

    def process(
        self,
        _: None,
        chunk_files: list[StagedFile],
        reject_files: list[StagedFile],
        manifest: dict,
        other_files: list[StagedFile],
    ) -> Iterator[tuple[int, Move]]:
        check_publishable(manifest, [*chunk_files, *reject_files], other_files)  # before anything in OUTPUT changes
        fs, root = _filesystem(self._output)
        run_id = self._run_id
        with said_of_output("could not begin", "OUTPUT is as it was"):
            fs.invalidate_cache()  # object-store listings cached in this process may predate the workers' writes
            if run_id is not None:
                check_held(fs, root, run_id)
            to_move, moved = _pending_moves(fs, root, _final_names([*chunk_files, *reject_files, *other_files]))
            previous = _previous_files(fs, root)
        with said_of_output("failed midway", INCOMPLETE):
            _unless_stopped(run_id, lambda: _retract(fs, root))  # the first change: a stop is decided before or after
            _clear_previous(fs, previous - moved)
            _check_running(run_id)
            for folder in sorted({posixpath.dirname(f"{root}/{final}") for _, final in to_move}):
                fs.makedirs(folder, exist_ok=True)
        for n, move in enumerate(to_move):
            yield n // _MOVES_PER_TASK, move


class _MoveStaged(_CommitStep):
    """A task's staged files to their final paths (:func:`move_file`), 16 at once -> each final path."""

    def setup(self) -> None:
        self._fs, self._root = _filesystem(self._output)

    def process(self, task: tuple[int, Iterable[Move]]) -> Iterator[str]:
        moves = list(task[1])
        with said_of_output("failed midway", INCOMPLETE), ThreadPoolExecutor(_MOVE_THREADS) as pool:
            list(pool.map(self._move, moves))
        for _, final in moves:
            yield final

    def _move(self, move: Move) -> None:
        _check_running(self._run_id)
        source, target = f"{self._root}/{move[0]}", f"{self._root}/{move[1]}"
        try:
            move_file(self._fs, source, target)
        except FileNotFoundError:  # a retried task whose rename was done (the finish checks its size)
            if not self._fs.exists(target):
                raise


class _FinishCommit(_CommitStep):
    """After every move: checks the committed files, deletes the staging, writes the manifest and ``_SUCCESS``."""

    def process(
        self,
        _: None,
        chunk_files: list[StagedFile],
        reject_files: list[StagedFile],
        manifest: dict,
        other_files: list[StagedFile],
        moved: list[str],  # every move done: the side input that orders this step after them
    ) -> Iterator[dict[str, Any]]:
        fs, root = _filesystem(self._output)
        with said_of_output("failed midway", INCOMPLETE):
            fs.invalidate_cache()
            plan = _final_names([*chunk_files, *reject_files, *other_files])
            committed = _committed_entries(fs, root, plan)
            runs = _staging_folders(root, plan)
            _remove(fs, [path for run in runs for path in _staged_files(fs, run)], recursive=True)
            final = _unless_stopped(self._run_id, lambda: _publish(fs, root, committed, manifest))  # the last change
        _remove(fs, runs, recursive=True)  # what its workers read, should a runner restart earlier steps
        _remove_if_empty(fs, f"{root}/{STAGING_DIR}")
        yield final


INCOMPLETE = (
    f"OUTPUT is incomplete (no {SUCCESS_FILE}: do not read it); the next run replaces it whole (an --incremental"
    " one runs in full)"
)


@contextlib.contextmanager
def said_of_output(what: str, state: str) -> Iterator[None]:
    """A storage error in the commit's steps (a full disk, a store that stays down) as a :class:`CommitError`: one
    line naming the error and what OUTPUT holds, ``state``, rather than the traceback around it. A commit's own
    refusal (a file it did not stage, one cut short once moved) says what OUTPUT holds too."""
    try:
        yield
    except CommitStopped:
        raise
    except CommitError as err:
        raise CommitError(f"{err}: {state}") from err
    except OSError as err:
        raise CommitError(f"the commit {what} ({type(err).__name__}: {err}): {state}") from err


def _final_names(staged: list[StagedFile]) -> Plan:
    """Each staged file with its committed path (:attr:`StagedFile.committed_path`): known when the file is
    written, so an index can point at it; unique, as staged names are."""
    return [(item, item.committed_path) for item in sorted(staged, key=lambda s: (s.directory, s.path))]


def _pending_moves(fs: AbstractFileSystem, root: str, plan: Plan) -> tuple[list[Move], set[str]]:
    """The files still in staging (one listing), and the final paths already filled: the
    files a previous run committed that this one keeps where they are, and those an earlier attempt of this
    commit moved.

    Checked before deleting anything, while the previous dataset is still whole. A staged file that is
    gone counts as moved only if its final path holds the very file (its footer names the staged path):
    never a file of another run. A kept file is not read: the launch checked it against its manifest entry.
    """
    waiting = set(fs.find(f"{root}/{STAGING_DIR}"))
    to_move = [(staged.path, final) for staged, final in plan if f"{root}/{staged.path}" in waiting]
    done = [(staged, final) for staged, final in plan if f"{root}/{staged.path}" not in waiting]
    moved = [(staged, final) for staged, final in done if not staged.kept]
    with ThreadPoolExecutor(FOOTER_THREADS) as pool:  # an object store's footer reads, 16 at a time
        footers = list(pool.map(lambda item: staged_as(fs, f"{root}/{item[1]}"), moved))
    foreign = [staged.path for (staged, _), footer in zip(moved, footers, strict=True) if footer != staged.footer_path]
    if foreign:
        raise CommitError(
            f"staged files missing, not committing (another run writing into OUTPUT?): {sorted(foreign)[:5]}"
        )
    return to_move, {f"{root}/{final}" for _, final in done}


def _retract(fs: AbstractFileSystem, root: str) -> None:
    """First change to the dataset: OUTPUT stops being a finished output."""
    _remove(fs, f"{root}/{SUCCESS_FILE}")
    _remove(fs, f"{root}/{MANIFEST_FILE}")


def _previous_files(fs: AbstractFileSystem, root: str) -> frozenset[str]:
    """The files of the previous dataset, which the commit replaces, checked before anything changes: a file
    zerda did not write that appeared in a dataset folder since the launch fails the commit (it is never
    deleted, and left there it would be read with this run's files)."""
    files = dataset_files(fs, root)
    if files.foreign:
        raise CommitError(f"{files.describe_foreign(root)}, put there while the run ran: not committing")
    return files.ours


def _clear_previous(fs: AbstractFileSystem, previous: Iterable[str]) -> None:
    """Delete the previous dataset's files, then the folders they leave empty (a file zerda did not write
    is never deleted: a hidden one keeps its folder)."""
    paths = sorted(previous)
    _remove(fs, paths)
    for folder in sorted({posixpath.dirname(path) for path in paths}):
        _remove_if_empty(fs, folder)


def _committed_entries(fs: AbstractFileSystem, root: str, plan: Plan) -> list[dict[str, Any]]:
    """Each committed file's manifest entry (path, the rows counted as it was written, its listed bytes, the digest
    of its footer as it was written or as the launch found it recorded, for a kept file), after
    one listing of OUTPUT finds it there with the size it was written with (not a file cut short in staging
    or by its copy): no file is read again."""
    listed = {posixpath.relpath(path, root): info.get("size") for path, info in fs.find(root, detail=True).items()}
    entries = []
    for staged, final in plan:
        size = listed.get(final)
        if size is None or (staged.bytes and size != staged.bytes):
            found = "is missing" if size is None else f"holds {size:,} bytes, not the {staged.bytes:,} written"
            raise CommitError(f"committed file {final} {found}; no {SUCCESS_FILE} written")
        entries.append(
            {"path": final, "rows": staged.rows, "bytes": size, **({"footer": staged.footer} if staged.footer else {})}
        )
    return entries


def _staging_folders(root: str, plan: Plan) -> list[str]:
    """This run's staging folders (``_staging/<run_id>``, retried bundles' files in it), never another run's."""
    return sorted({f"{root}/{'/'.join(staged.path.split('/')[:2])}" for staged, _ in plan if not staged.kept})


def _staged_files(fs: AbstractFileSystem, run: str) -> list[str]:
    """What a run's staging folder holds but what the workers read: its listings (the lists of files) and its
    staged index rows (read by the comparison) and leaving rows (read by the carry)."""
    try:
        entries = [entry.rstrip("/") for entry in fs.ls(run, detail=False)]
    except FileNotFoundError:
        return []
    return [entry for entry in entries if posixpath.basename(entry) not in (LISTING_DIR, INDEX_ROWS_DIR, LEAVING_DIR)]


def _publish(
    fs: AbstractFileSystem, root: str, files: list[dict[str, Any]], manifest: Mapping[str, Any]
) -> dict[str, Any]:
    """Write the table of the committed files, the manifest naming it (its rows and bytes), then ``_SUCCESS``: the
    last step, the one that makes OUTPUT a finished output."""
    listed = write_files_table(fs, root, files)
    final_manifest = finish_manifest(manifest, finished=datetime.now(timezone.utc))
    final_manifest["output"] = {**final_manifest["output"], "files_table": listed}
    fs.pipe_file(f"{root}/{MANIFEST_FILE}", Manifest(final_manifest).dumps().encode())
    fs.pipe_file(f"{root}/{SUCCESS_FILE}", b"")
    return final_manifest
