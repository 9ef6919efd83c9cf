"""Incremental runs into an Iceberg table: the directory output's incremental machinery
(``pipelines.incremental``) with the table's files.

Every table run keeps its document index and its changes in its side folder,
``<chunk table location>__zerda/<run_id>/`` (``_index/``, ``_ids/``, ``_changes/``, and ``_manifest.json`` with
its tables in ``_manifest/``, input files' stamps included); the snapshot it commits names the
run (``zerda.run-id``), so the index of the table's current snapshot is found from the snapshot alone.

An incremental run (:func:`read_previous_table`) starts from the current snapshot, which must be a zerda run's:
its index says which data file holds each document's rows, by the file's name in its bucket folder
(``density_bucket=K/part-<uuid>.parquet``). A data file holding a changed or removed document is written again
without its rows into this run's folder under the same name (``data/<run_id>/density_bucket=K/part-<uuid>.parquet``),
so the index rows of the documents that stay in it stay right; every other data file is kept where it is and
is named again by the new snapshot (:class:`TableIncrementally`). The commit's one snapshot deletes the
rewritten and emptied files and adds the new ones (``pipelines.output.iceberg``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
from fsspec.core import url_to_fs

from pipelines.errors import ManifestError, OutputError, PreviousUnreadable
from pipelines.incremental.carry import rows_staying
from pipelines.incremental.previous import (
    _AGAINST_NOTHING,
    UNREADABLE_INDEX,
    Previous,
    _read_bytes,
    _resized,
    judge_previous,
)
from pipelines.incremental.rows import read_leaving
from pipelines.incremental.transform import ChunkIncrementally
from pipelines.input.listing import Listed
from pipelines.output.iceberg import (
    DATA_DIR,
    REJECTS_SNAPSHOT_KEY,
    RUN_ID_KEY,
    TABLE_CHUNK_SCHEMA,
    TableTarget,
    WriteDescribedTableChunks,
    write_data_file,
)
from pipelines.output.iceberg_files import TableFiles
from pipelines.output.layout import INDEX_DIR, MANIFEST_FILE
from pipelines.output.manifest import Manifest
from pipelines.output.write import Describe, StagedFile


def read_previous_table(target: TableTarget, fingerprint: str, incremental: bool) -> tuple[Previous, int | None]:
    """The previous output of the table (its current snapshot and that run's side folder), whether its rows can
    be reused, and the snapshot's id (the commit refuses to replace any other).

    With ``incremental``, a current snapshot that is not a zerda run's (another program wrote the table) is an
    OutputError (exit code 2): no index describes its rows, and a full run would replace them unasked."""
    catalog = target.catalog()
    table = catalog.load_table(target.name)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return Previous(reason="no previous snapshot"), None
    run_id = snapshot.summary.additional_properties.get(RUN_ID_KEY) if snapshot.summary else None
    if run_id is None:
        if incremental:
            operation = snapshot.summary.operation.value if snapshot.summary else "a change"
            raise OutputError(
                f"Iceberg table {target.name!r}: its current snapshot {snapshot.snapshot_id} ({operation}) is not a "
                "zerda run's (another program wrote the table): no zerda index describes its rows. Run once without "
                "--incremental to replace them with a full run; later incremental runs carry from it"
            )
        return Previous(reason=f"the current snapshot is not a zerda run's{_AGAINST_NOTHING}"), snapshot.snapshot_id
    fs, root = url_to_fs(target.side_folder(run_id))
    root = posixpath.normpath(root)
    where = f"{target.name}'s snapshot {snapshot.snapshot_id}"
    try:
        manifest = Manifest.loads(_read_bytes(fs, f"{root}/{MANIFEST_FILE}"), f"{root}/{MANIFEST_FILE}", fs, root)
        committed = manifest.files  # format 2: its table, read and checked here (the inputs table: on the workers)
    except (FileNotFoundError, IsADirectoryError):
        reason = f"full run: the side folder of {where} has no {MANIFEST_FILE}{_AGAINST_NOTHING}"
        return Previous(reason=reason), snapshot.snapshot_id
    except ManifestError as err:
        reason = f"full run: the {MANIFEST_FILE} of {where} is unreadable ({err.why}){_AGAINST_NOTHING}"
        return Previous(reason=reason), snapshot.snapshot_id
    entries = {entry["path"]: entry.get("bytes") for entry in committed or []}
    index = [path for path in entries if path.startswith(f"{INDEX_DIR}/")]
    try:
        listed = fs.find(f"{root}/{INDEX_DIR}", detail=True)
    except FileNotFoundError:
        listed = {}
    present = {posixpath.relpath(path, root): info.get("size") for path, info in listed.items()}
    missing = [path for path in index if path not in present or _resized(entries[path], present[path])]
    sizes = _snapshot_files(table, snapshot.snapshot_id, target.chunks_location)
    chunk_files = tuple((path, rows, "") for path, (rows, _) in sizes.items())  # its data files: no footer digest
    if incremental:  # a data file gone or changed by hand: carrying would name it again
        missing += _changed_data_files(target.chunks_location, sizes)
    rejects = _rejects_files(catalog.load_table(target.rejects_name), snapshot.summary)
    previous = judge_previous(
        manifest, fs.unstrip_protocol(root), index, missing, chunk_files, rejects, fingerprint, incremental
    )
    return previous, snapshot.snapshot_id


def _snapshot_files(table: Any, snapshot_id: int, location: str) -> dict[str, tuple[int, int]]:
    """Each data file of the snapshot, by its path in ``location``: its rows and bytes."""
    files = sorted(table.scan(snapshot_id=snapshot_id).plan_files(), key=lambda task: task.file.file_path)
    return {
        task.file.file_path.removeprefix(f"{location}/"): (task.file.record_count, task.file.file_size_in_bytes)
        for task in files
    }


def _changed_data_files(location: str, files: Mapping[str, tuple[int, int]]) -> list[str]:
    """The data ``files`` (rows and bytes by path in ``location``) gone from it or of another size: one listing
    of its data folder."""
    fs, root = url_to_fs(location)
    root = posixpath.normpath(root)
    try:
        listed = fs.find(f"{root}/{DATA_DIR}", detail=True)
    except FileNotFoundError:
        listed = {}
    present = {posixpath.relpath(path, root): info.get("size") for path, info in listed.items()}
    return [path for path, (_, size) in files.items() if path not in present or _resized(size, present[path])]


def _rejects_files(rejects: Any, summary: Any) -> tuple[str, ...]:
    """The URLs of the data files of the rejects snapshot the chunk snapshot's summary names."""
    snapshot_id = summary.additional_properties.get(REJECTS_SNAPSHOT_KEY) if summary else None
    if snapshot_id is None or rejects.snapshot_by_id(int(snapshot_id)) is None:
        return ()
    return tuple(sorted(task.file.file_path for task in rejects.scan(snapshot_id=int(snapshot_id)).plan_files()))


def _bucket_name(path: str) -> str:
    """A data file's name in its bucket folder, ``density_bucket=K/part-<uuid>.parquet``, from its path in the
    table's location (``data/<run_id>/density_bucket=K/part-<uuid>.parquet``): what an index names it by."""
    return "/".join(path.split("/")[-2:])


class TableIncrementally(ChunkIncrementally):
    """:class:`~pipelines.incremental.transform.ChunkIncrementally` into a table: chunks are written as the table's data
    files; index, change and listing files are staged in the side folder (``output`` is
    :attr:`TableTarget.side_location`); a carry keeps or rewrites the snapshot's data files
    (:class:`_CarryDataFile`)."""

    def __init__(self, target: TableTarget, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._target = target

    def _write_chunks(self, describe: Describe) -> beam.PTransform:
        settings, run_id = self._settings, self._run_id
        return WriteDescribedTableChunks(
            self._target.chunk_files,
            run_id,
            settings.compression,
            settings.max_rows_per_file,
            f"{DATA_DIR}/{run_id}",
            describe,
        )

    def _changes_folder(self) -> str:
        """The run's side folder itself: the change files are written where they stay (a file a change row, at
        worst: moving them would cost the commit a copy each on an object store)."""
        return self._run_id

    def _carry(self, dropped: beam.PCollection, written: beam.PCollection, output: str) -> beam.PCollection:
        """The data files of the run: ``written``, and each data file of the previous snapshot kept, or rewritten
        without the rows of the changed and removed documents in it (one task per file: a file and the
        documents leaving it meet by the file's name)."""
        files = (
            written.pipeline
            | "PreviousDataFiles" >> Listed(self._previous.chunk_files, self._listing("previous"), list, tuple)
            | "ByName" >> beam.Map(lambda entry: (_bucket_name(entry[0]), tuple(entry)))
        )
        carried = {"leaving": dropped, "file": files} | "DataFileAndLeaving" >> beam.CoGroupByKey()
        target = self._target
        carry = _CarryDataFile(target.chunk_files, output, self._run_id, self._settings.compression)
        return (written, carried | "CarryDataFiles" >> beam.ParDo(carry)) | "AllDataFiles" >> beam.Flatten()


class _CarryDataFile(beam.DoFn):
    """(a data file's name, its path and rows in the previous snapshot, the staged files naming the documents whose
    rows leave it) -> the
    file kept as it is when none leave; else written again without their rows, under its name in this run's
    folder (nothing when no row is left). Only the files that lose rows are read."""

    def __init__(self, files: TableFiles, side: str, run_id: str, compression: str) -> None:
        self._files = files
        self._side = side  # the side folder, whose staging holds the files naming the documents leaving
        self._run_id = run_id
        self._compression = compression

    def process(self, element: tuple[str, Mapping[str, Iterable[Any]]]) -> Iterator[StagedFile]:
        name, grouped = element
        staged, files = list(grouped["leaving"]), list(grouped["file"])
        if not files:  # the index names a file the snapshot does not hold: it is not this snapshot's index
            raise PreviousUnreadable(
                f"{UNREADABLE_INDEX}: it names data file {name}, which the table's snapshot does not hold"
            )
        ((path, rows, _),) = files
        if not staged:
            yield StagedFile(posixpath.dirname(name), path, rows, kept=True)
            return
        leaving = read_leaving(self._side, staged, name)
        table = rows_staying(f"{self._files.location}/{path}", path, leaving, TABLE_CHUNK_SCHEMA)
        if table.num_rows:
            yield write_data_file(
                self._files, self._run_id, f"{DATA_DIR}/{self._run_id}/{name}", table, self._compression
            )
