"""Atomic, retry-safe, Hive-partitioned Parquet output: Beam's file-sink protocol, done by hand.

Wiring (the rechunk entry point)::

    prepare_output(output)            # last check before the run: OutputError -> exit code 2
    run_id = new_run_id()
    staged_chunks = chunk_rows | "WriteChunks" >> WriteChunks(output, run_id, compression, max_rows_per_file)
    staged_rejects = rejects | "WriteRejects" >> WriteRejects(output, run_id, compression, max_rows_per_file)
    staged_inputs = reports | "WriteInputs" >> WriteInputs(output, run_id, compression, max_rows_per_file)
    manifest = ... | pipelines.output.build_manifest.BuildManifest(...)
    staged = {"chunks": staged_chunks, "rejects": staged_rejects, "inputs": staged_inputs}
    {**staged, "manifest": manifest} | "Commit" >> pipelines.output.commit.CommitOutput(output)

1. Stage. Each bundle streams its rows to new files ``OUTPUT/_staging/<run_id>/<dir>/part-<uuid4><ext>``
   (a file per ``max_rows_per_file`` rows and directory, written a row group at a time, so memory stays
   bounded however large the bundle) and emits one ``StagedFile`` per file. A failed
   or retried bundle attempt may leave files behind, but the runner discards its outputs, so no
   committed element ever names them.
2. Commit, after every write (``pipelines.output.commit``): check the counts, remove ``_SUCCESS`` and the
   previous run's files (only files a zerda run wrote: ``pipelines.output.ownership``; a foreign file in a
   dataset folder refuses the run), move the staged files, spread across the workers, to
   ``OUTPUT/density_bucket=K/part-<uuid4>.parquet``, ``OUTPUT/_rejects/part-<uuid4>.pq`` (and ``_index/``,
   ``_changes/``; each keeps its staged name, so where a row lies is known when it is written), check them
   with one listing, delete this run's ``_staging/<run_id>`` (retried bundles' leftovers included; never
   another run's), write the table of the committed files (``_manifest/files.pq``), ``_manifest.json``, then
   ``_SUCCESS``. A rerun replaces OUTPUT whole, whatever the number of files before; a commit retried after a
   crash halfway finishes the job instead of losing files.

Why not Beam's own sinks: ``fileio.WriteToFiles`` loses data in Beam 2.77 when writing into new local
sub-folders, and ``WriteToParquet`` leaves old ``-of-N`` shards behind when N changes.

Reject files end in ``.pq``: with ``.parquet`` the documented read of the dataset,
``read_parquet('OUTPUT/**/*.parquet', hive_partitioning=true)``, would pick them up beside the chunks
and fail on their partition-less path. Read them with ``read_parquet('OUTPUT/_rejects/*')``.

Paths are fsspec URLs (local, ``s3://``, ``gs://``, ``memory://`` in tests); credentials come from the
environment. Directory names are built only from our own bucket numbers, never from input text. One run
at a time holds OUTPUT (``pipelines.output.lease``); the commit checks that lease and takes only files whose
footer names the path this run staged them as. Batch (global window) only.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import posixpath
import re
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, TypeVar

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows
from apache_beam.typehints.decorators import no_annotations
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from pipelines.errors import CommitError, OutputError, RunStopped, StagingFault
from pipelines.input.source import fault_kind
from pipelines.output.build_manifest import check_accounting, input_rows
from pipelines.output.identity import refuse_nested_output
from pipelines.output.layout import (
    CHUNK_SUFFIX,
    INPUTS_DIR,
    MANIFEST_FILE,
    PARTITION_COLUMN,
    REJECT_SUFFIX,
    REJECTS_DIR,
    STAGING_DIR,
    SUCCESS_FILE,
)
from pipelines.output.lease import LEASE_FILE, Lease, best_effort, dead_staging
from pipelines.output.manifest import Manifest, folder_rows, written_footer_digest
from pipelines.output.ownership import STAGED_KEY, dataset_files, is_dataset_entry
from pipelines.output.schema import CHUNK_SCHEMA, INPUTS_SCHEMA, REJECT_SCHEMA, REPEATED_COLUMNS
from pipelines.records import Reject
from pipelines.redact import redact_url

log = logging.getLogger("zerda")

DEFAULT_MAX_ROWS_PER_FILE = 100_000
_MOVE_THREADS = 16  # object stores move by copy + delete: do many at once
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
DOCUMENTS = "documents"  # WriteDescribedChunks: what each document's rows are described as
Describe = Callable[[list[Mapping[str, Any]], str], Any]  # (a document's rows, the path of their file) -> anything


@dataclass(frozen=True)
class StagedFile:
    """A file written by a bundle: ``directory`` (its final folder) and ``path`` are relative to OUTPUT."""

    directory: str
    path: str
    rows: int
    bytes: int = 0  # the size it was written with (0 for a kept file: its manifest entry has it)
    written_as: str = ""  # the staged path in the file's footer when it is not ``path`` (a file kept whole)
    footer: str = ""  # the digest of its footer (``manifest.footer_digest``), recorded in the table of files
    kept: bool = False  # a previous run's committed file that stays where it is (``path``): never moved or deleted
    final: str = ""  # the committed path when it is not the staged name (a rewritten previous file keeps its own)

    @property
    def committed_path(self) -> str:
        """Where the commit puts the file: its own path if kept, else ``final`` or its staged name in ``directory``."""
        if self.kept:
            return self.path
        return self.final or f"{self.directory}/{posixpath.basename(self.path)}"

    @property
    def footer_path(self) -> str:
        """The staged path the file's footer must name for the commit to take it as this run's."""
        return self.written_as or self.path


def new_run_id() -> str:
    """A fresh id for a run's staging folder; it sorts by start time."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def _filesystem(output: str) -> tuple[AbstractFileSystem, str]:
    """The filesystem of OUTPUT and its normalised path on it (absolute for local paths)."""
    fs, path = url_to_fs(output)
    return fs, posixpath.normpath(path)


def absolute_url(output: str) -> str:
    """OUTPUT as an absolute URL, resolved at construction: workers may not share the launcher's cwd."""
    fs, root = _filesystem(output)
    return fs.unstrip_protocol(root)


def _remove(fs: AbstractFileSystem, path: str | list[str], recursive: bool = False) -> None:
    """Delete what exists of ``path``; an empty list is nothing to do."""
    if not path:
        return
    with contextlib.suppress(FileNotFoundError):
        fs.rm(path, recursive=recursive)


def prepare_output(output: str) -> None:
    """Check, before the run, that OUTPUT is a directory we can write (it is created if missing).

    Nothing of a previous output changes here: it stays finished, ``_SUCCESS`` included, until this
    run's commit replaces it.
    """
    try:
        fs, root = _filesystem(output)
        if fs.exists(root) and not fs.isdir(root):  # a file, or a device such as /dev/null
            raise OutputError(f"output {output!r} is a file, not a directory")
        _refuse_a_foreign_folder(fs, root, output)
        refuse_nested_output(fs, root, output)
        _refuse_foreign_files(fs, root, output)
        fs.makedirs(root, exist_ok=True)
        probe = f"{root}/.zerda-probe-{uuid.uuid4().hex}"
        fs.pipe_file(probe, b"")
        fs.rm(probe)
    except OutputError:
        raise
    except (OSError, ValueError, ImportError) as err:  # what fsspec raises for denied, bad or unknown paths
        raise OutputError(f"output {output!r} is not writable: {err}") from err
    except Exception as err:  # a storage library's own errors: botocore's NoCredentialsError is no OSError
        raise OutputError(f"output {output!r} is not writable: {type(err).__name__}: {err}") from err


def _refuse_a_foreign_folder(fs: AbstractFileSystem, root: str, output: str) -> None:
    """OUTPUT must be new, empty or hold something of zerda's: ``--output .`` in a project folder (or a home
    folder) is a mistake, not a place to write ``density_bucket=*`` folders into."""
    try:
        names = [posixpath.basename(entry.rstrip("/")) for entry in fs.ls(root, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return
    ours = (MANIFEST_FILE, SUCCESS_FILE, STAGING_DIR, LEASE_FILE)
    names = [name for name in names if not name.startswith(".")]  # .DS_Store, a probe: no one's files
    if names and not any(is_dataset_entry(name) or name in ours for name in names):
        shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        raise OutputError(
            f"output {output!r} is a folder of other files ({shown}) with no zerda output in it: "
            "give a new or empty folder"
        )


def _refuse_foreign_files(fs: AbstractFileSystem, root: str, output: str) -> None:
    """Files zerda did not write in OUTPUT's dataset folders (``pipelines.output.ownership``): the commit would
    leave them beside the new output, where the dataset's readers would read them as its files."""
    files = dataset_files(fs, root)
    if files.foreign:
        raise OutputError(
            f"output {output!r} holds {files.describe_foreign(root)}: move them out of OUTPUT, where readers of "
            "the dataset would take them for zerda's files (names starting with '.' or '_' may stay)"
        )


@contextlib.contextmanager
def hold_output(output: str, run_id: str) -> Iterator[None]:
    """Hold OUTPUT's lease for the run (OutputError naming the holder if a live run has it).

    Once it is held, the staging dead runs left is deleted (a disk filled by a killed run's files
    frees up); a run that fails or is interrupted deletes its own, which nothing will commit.
    """
    fs, root = _filesystem(output)
    staging = f"{root}/{STAGING_DIR}"
    with Lease(fs, root, run_id) as lease:
        _remove(fs, dead_staging(fs, staging, lease), recursive=True)
        try:
            yield
        except BaseException:
            best_effort(lambda: discard_staging(output, run_id), "delete this run's staging")
            raise


def discard_staging(output: str, run_id: str) -> None:
    """Delete what ``run_id`` staged: nothing will commit it (the run failed, or runs again from the start)."""
    fs, root = _filesystem(output)
    _remove(fs, f"{root}/{STAGING_DIR}/{run_id}", recursive=True)


def _bucket_directory(row: Mapping[str, Any]) -> str:
    return f"{PARTITION_COLUMN}={int(row[PARTITION_COLUMN])}"  # int(): a name only from our bucket numbers


def _rejects_directory(row: Mapping[str, Any]) -> str:
    return REJECTS_DIR


class _StageParquet(beam.DoFn):
    """Buffers a bundle's rows per directory and writes each buffer as a new Parquet file in staging.

    Elements are lists of rows (a document's chunks, or one reject), so Beam's per-element cost is paid
    per document, not per row; an element's rows in one directory stay in one file, and with ``describe``
    each element gives ``describe(rows, committed path of its file)`` on the ``DOCUMENTS`` output. With
    ``group_by`` (chunks: their source), a file of half ``max_rows_per_file`` rows or more is closed where the
    key changes: a file then holds the rows of few sources, so an incremental run after one source changed
    rewrites few files (it keeps the others where they are), and there are at most about twice as many files.
    """

    def __init__(
        self,
        output: str,
        run_id: str,
        schema: pa.Schema,
        directory_of: Callable[[Mapping[str, Any]], str],
        suffix: str,
        compression: str,
        max_rows_per_file: int,
        group_by: str | None = None,
        describe: Describe | None = None,
        folder: str | None = None,
    ) -> None:
        self._output = output
        self._run_id = run_id
        self._folder = folder or f"{STAGING_DIR}/{run_id}"  # where in OUTPUT the files go
        self._schema = schema
        self._directory_of = directory_of
        self._group_by = group_by
        self._describe = describe
        self._suffix = suffix
        self._compression = compression
        self._max_rows = max_rows_per_file
        self._required = [field.name for field in schema if not field.nullable]
        self._dictionary = [name for name in schema.names if name in REPEATED_COLUMNS]

    def setup(self) -> None:
        self._fs, self._root = _filesystem(self._output)
        self._made_dirs: set[str] = set()

    def start_bundle(self) -> None:
        self._open: dict[str, _OpenPart] = {}

    def process(self, rows: list[Mapping[str, Any]]):
        with staging_writes(self._output):
            yield from self._stage(rows)

    def _stage(self, rows: list[Mapping[str, Any]]):
        for directory, in_directory in itertools.groupby(rows, key=self._directory_of):
            element = list(in_directory)
            part = self._open.get(directory)
            key = element[0][self._group_by] if self._group_by else None
            if part is not None and self._full(part, key, len(element)):
                yield self._close(directory)
                part = None
            if part is None:
                part = self._open[directory] = _OpenPart(self._new_path(directory))
            part.key = key
            part.buffer.extend(element)
            if len(part.buffer) >= _ROW_GROUP_ROWS:
                self._flush(directory, part)
            if self._describe is not None:
                committed = f"{directory}/{posixpath.basename(part.relative)}"
                yield TaggedOutput(DOCUMENTS, self._describe(element, committed))
            if part.size >= self._max_rows:
                yield self._close(directory)

    def _full(self, part: _OpenPart, key: Any, rows: int) -> bool:
        """Whether ``rows`` more rows of group ``key`` start a new file: an element's rows never span two files
        (a file exceeds ``max_rows`` only by holding one element that alone does), and with ``group_by`` a file
        of half ``max_rows`` or more is closed where the group changes."""
        if not part.size:
            return False
        return part.size + rows > self._max_rows or (key != part.key and part.size >= self._max_rows // 2)

    def finish_bundle(self):
        with staging_writes(self._output):
            for directory in list(self._open):
                yield GlobalWindows.windowed_value_at_end_of_window(self._close(directory))

    def teardown(self) -> None:
        for part in getattr(self, "_open", {}).values():  # a failed bundle: its files are never committed
            part.abandon()

    def _new_path(self, directory: str) -> str:
        begin_file(self._run_id)
        relative = f"{self._folder}/{directory}/part-{uuid.uuid4().hex}{self._suffix}"
        folder = posixpath.dirname(f"{self._root}/{relative}")
        if folder not in self._made_dirs:
            self._fs.makedirs(folder, exist_ok=True)
            self._made_dirs.add(folder)
        return relative

    def _flush(self, directory: str, part: _OpenPart) -> None:
        """Write the buffered rows as one row group; the file is opened on the first one."""
        table = pa.Table.from_pylist(part.buffer, schema=self._schema)
        part.buffer = []
        missing = [name for name in self._required if table.column(name).null_count]
        if missing:  # from_pylist turns a missing key into a null, even in a required column
            raise ValueError(f"rows without a value for required column(s) {missing} in {directory}")
        if part.writer is None:
            begin_file(self._run_id)
            part.handle = self._fs.open(f"{self._root}/{part.relative}", "wb")
            schema = self._schema.with_metadata({**(self._schema.metadata or {}), STAGED_KEY: part.relative.encode()})
            # a CRC per page: `zerda-report --verify` finds the damage an incremental run, reading footers, keeps
            part.writer = pq.ParquetWriter(
                part.handle,
                schema,
                compression=self._compression,
                use_dictionary=self._dictionary,
                write_page_checksum=True,
            )
        part.writer.write_table(table, row_group_size=len(table))
        part.rows += table.num_rows

    def _close(self, directory: str) -> StagedFile:
        part = self._open.pop(directory)
        if part.buffer or part.writer is None:
            self._flush(directory, part)
        size = part.close()
        footer = written_footer_digest(part.writer.writer.metadata) if part.writer is not None else ""
        return StagedFile(directory, part.relative, part.rows, size, footer=footer)


_ROW_GROUP_ROWS = 5_000  # rows held per open file before they are written out: bounds memory


class _OpenPart:
    """A staged Parquet file being written: rows wait in ``buffer`` until a row group is full."""

    def __init__(self, relative: str) -> None:
        self.relative = relative
        self.buffer: list[Mapping[str, Any]] = []
        self.rows = 0
        self.key: Any = None  # the group (source) of the last row
        self.writer: pq.ParquetWriter | None = None
        self.handle: Any = None

    @property
    def size(self) -> int:
        """Rows written and buffered."""
        return self.rows + len(self.buffer)

    def close(self) -> int:
        """Close the file; returns its size."""
        if self.writer is not None:
            self.writer.close()
        size = 0
        if self.handle is not None:
            size = self.handle.tell()
            self.handle.close()
        return size

    def abandon(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class _WriteParquet(beam.PTransform):
    """Shared settings of WriteChunks and WriteRejects; the output is a PCollection of ``StagedFile``."""

    def __init__(
        self,
        output: str,
        run_id: str,
        compression: str = "zstd",
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        folder: str | None = None,
    ) -> None:
        """``folder``: where in ``output`` the files are written (default: the run's staging folder)."""
        super().__init__()
        if not _RUN_ID.match(run_id):
            raise ValueError(f"run_id must be letters, digits, '.', '_' or '-', got {run_id!r}")
        if max_rows_per_file < 1:
            raise ValueError(f"max_rows_per_file must be positive, got {max_rows_per_file}")
        self._output = absolute_url(output)
        self._run_id = run_id
        self._compression = compression
        self._max_rows = max_rows_per_file
        self._folder = folder

    def _stage(
        self,
        schema: pa.Schema,
        directory_of: Callable[[Mapping[str, Any]], str],
        suffix: str,
        group_by: str | None = None,
        describe: Describe | None = None,
    ) -> beam.ParDo:
        return beam.ParDo(
            _StageParquet(
                self._output,
                self._run_id,
                schema,
                directory_of,
                suffix,
                self._compression,
                self._max_rows,
                group_by,
                describe,
                self._folder,
            )
        )


class WriteChunks(_WriteParquet):
    """Lists of chunk row dicts (``CHUNK_SCHEMA`` names + ``density_bucket``), as ``ChunkDocuments`` emits one per
    document -> staged files, one folder per bucket; a document's rows are in one file."""

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        return rows | "StageChunks" >> self._stage(CHUNK_SCHEMA, _bucket_directory, CHUNK_SUFFIX, group_by="source")


class WriteDescribedChunks(_WriteParquet):
    """As :class:`WriteChunks`, and each document described with the file that holds its rows: the output has
    the staged files (``files``) and one ``describe(rows, committed path)`` per document (``documents``), so an
    index can say where a document's rows are (``pipelines.incremental``)."""

    def __init__(self, output: str, run_id: str, compression: str, max_rows: int, describe: Describe) -> None:
        super().__init__(output, run_id, compression, max_rows)
        self._describe = describe

    @no_annotations
    def expand(self, rows: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        stage = self._stage(CHUNK_SCHEMA, _bucket_directory, CHUNK_SUFFIX, "source", self._describe)
        return rows | "StageChunks" >> stage.with_outputs(DOCUMENTS, main="files")


class WriteRejects(_WriteParquet):
    """``Reject`` records -> staged files for ``OUTPUT/_rejects/`` (one empty file when there is no reject)."""

    def expand(self, rejects: beam.PCollection) -> beam.PCollection:
        return (
            rejects
            | "RejectRow" >> beam.Map(_as_rows)
            | "StageRejects" >> self._stage(REJECT_SCHEMA, _rejects_directory, REJECT_SUFFIX)
            | "NoRejects" >> EmptyFileIfNone(self._output, self._run_id, REJECT_SCHEMA, REJECTS_DIR, self._compression)
        )


class WriteRows(_WriteParquet):
    """Lists of rows of ``schema`` -> staged ``.pq`` files for one OUTPUT folder (``_index``, ``_changes``)."""

    def __init__(
        self,
        output: str,
        run_id: str,
        schema: pa.Schema,
        directory: str,
        compression: str,
        max_rows: int,
        folder: str | None = None,
    ):
        super().__init__(output, run_id, compression, max_rows, folder)
        self._schema, self._directory = schema, directory

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        directory = self._directory
        return rows | "StageRows" >> self._stage(self._schema, lambda _: directory, REJECT_SUFFIX)


class WriteInputs(WriteRows):
    """``FileReport``s -> staged parts of the manifest's table of the input files read (``_manifest/inputs/``),
    written by bundle like any output file, so that no worker gathers the list; the commit checks their rows
    against the files the manifest counts read."""

    def __init__(self, output: str, run_id: str, compression: str, max_rows: int):
        super().__init__(output, run_id, INPUTS_SCHEMA, INPUTS_DIR, compression, max_rows)

    def expand(self, reports: beam.PCollection) -> beam.PCollection:
        return super().expand(reports | "InputRows" >> beam.Map(input_rows))


def staging_path(
    output: str, run_id: str, directory: str, suffix: str, folder: str | None = None
) -> tuple[Any, str, str]:
    """(filesystem, absolute path, path relative to OUTPUT) of a new file in the run's staging folder (or in
    ``folder``, a path in OUTPUT)."""
    begin_file(run_id)
    fs, root = url_to_fs(output)
    relative = f"{folder or f'{STAGING_DIR}/{run_id}'}/{directory}/part-{uuid.uuid4().hex}{suffix}"
    path = f"{posixpath.normpath(root)}/{relative}"
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    return fs, path, relative


def stage_table(
    output: str,
    run_id: str,
    directory: str,
    table: pa.Table,
    suffix: str,
    compression: str,
    row_group_size: int | None = None,
    folder: str | None = None,
) -> StagedFile:
    """Write ``table`` as one new file in the run's staging folder, as the row writer would name it."""
    with staging_writes(output):
        fs, path, relative = staging_path(output, run_id, directory, suffix, folder)
        metadata, size = write_parquet(fs, path, relative, table, compression, row_group_size)
    return StagedFile(directory, relative, table.num_rows, size, footer=written_footer_digest(metadata))


@contextlib.contextmanager
def staging_writes(output: str) -> Iterator[None]:
    """A write into the run's staging that fails for the storage's reason, not a passing one (a full disk, a
    quota, a read-only or denied folder: :func:`~pipelines.input.source.fault_kind`), as one line saying OUTPUT
    is as it was (nothing of it changes before the commit), not the traceback around it. A passing error (a lost
    connection) is raised as it is, for the runner to retry."""
    try:
        yield
    except StagingFault:
        raise
    except OSError as err:
        if fault_kind(err) != "environment":
            raise
        where = redact_url(output.removeprefix("file://"))
        raise StagingFault(
            f"writing this run's files into {where} failed ({type(err).__name__}: {err}): OUTPUT is as it was"
        ) from err


def write_parquet(
    fs: AbstractFileSystem,
    path: str,
    relative: str,
    table: pa.Table,
    compression: str,
    row_group_size: int | None = None,
) -> tuple[Any, int]:
    """Write ``table`` as one Parquet file at ``path`` as the row writer writes its files (its footer naming
    ``relative``, a CRC per page); the file's footer (``pyarrow.parquet.FileMetaData``) and its size."""
    dictionary = [name for name in table.schema.names if name in REPEATED_COLUMNS]
    marked = table.replace_schema_metadata({**(table.schema.metadata or {}), STAGED_KEY: relative.encode()})
    with fs.open(path, "wb") as f:
        writer = pq.ParquetWriter(
            f, marked.schema, compression=compression, use_dictionary=dictionary, write_page_checksum=True
        )
        writer.write_table(marked, row_group_size=row_group_size)
        writer.close()
        size = f.tell()
    return writer.writer.metadata, size


class EmptyFileIfNone(beam.PTransform):
    """The staged files of one folder, plus an empty file of ``schema`` when there are none: the folder
    always exists, so a documented query such as ``read_parquet('OUTPUT/_rejects/*')`` never fails."""

    def __init__(
        self,
        output: str,
        run_id: str,
        schema: pa.Schema,
        directory: str,
        compression: str,
        folder: str | None = None,
    ) -> None:
        super().__init__()
        self._empty = _StageEmptyIfNone(output, run_id, schema, directory, compression, folder)

    def expand(self, staged: beam.PCollection) -> beam.PCollection:
        # One DoFn re-emits the staged files (a side input) and adds the empty one, rather than a Flatten of the
        # two: Beam 2.62's Flink job server failed on that Flatten feeding the commit's ("A PCollectionNode
        # should have exactly one producing PTransformNode").
        return (
            staged.pipeline
            | "Once" >> beam.Create([None])
            | "AllFiles" >> beam.ParDo(self._empty, beam.pvalue.AsList(staged))
        )


class _StageEmptyIfNone(beam.DoFn):
    def __init__(
        self, output: str, run_id: str, schema: pa.Schema, directory: str, compression: str, folder: str | None
    ) -> None:
        self._output, self._run_id, self._schema = output, run_id, schema
        self._directory, self._compression, self._folder = directory, compression, folder

    def process(self, _: None, staged: list[StagedFile]) -> Iterator[StagedFile]:
        yield from staged
        if not staged:
            empty = self._schema.empty_table()
            directory, compression = self._directory, self._compression
            yield stage_table(
                self._output, self._run_id, directory, empty, REJECT_SUFFIX, compression, None, self._folder
            )


def _as_rows(reject: Reject) -> list[dict[str, Any]]:
    """A reject as the one-row list the staging step takes."""
    return [asdict(reject)]


class CommitStopped(CommitError):
    """A stop signal reached the launcher: this process's commit of the run takes no further step."""


_T = TypeVar("_T")
_STOPPED: set[str] = set()  # runs whose commit, in this process, must take no further step
_GATE = threading.Lock()  # a stop is decided between the commit's steps that change what OUTPUT is


def stop_commit(run_id: str) -> None:
    """Stop the commit of ``run_id`` running in this process (the DirectRunner's in-memory mode), and its
    writers (:func:`begin_file`): it takes no further step, and once this returns, whether it began replacing
    OUTPUT or finished can no longer change (a commit in a worker process is stopped by ending that process)."""
    with _GATE:
        _STOPPED.add(run_id)


def _unless_stopped(run_id: str | None, step: Callable[[], _T]) -> _T:
    with _GATE:
        _check_running(run_id)
        return step()


def begin_file(run_id: str) -> None:
    """Called before a writer of ``run_id`` makes a folder or opens a new file: a stopped run
    (:func:`stop_commit`) begins none. A stopped in-memory run's pipeline thread cannot be killed, and a file it
    began after the launcher deleted the run's files would be left behind."""
    with _GATE:
        if run_id in _STOPPED:
            raise RunStopped(f"run {run_id} was stopped: it begins no new file")


def _check_running(run_id: str | None) -> None:
    if run_id in _STOPPED:
        raise CommitStopped(f"run {run_id} was stopped: its commit goes no further")


def has_finished_output(output: str) -> bool:
    """Whether OUTPUT holds a finished output (its ``_SUCCESS``)."""
    fs, root = _filesystem(output)
    return bool(fs.exists(f"{root}/{SUCCESS_FILE}"))


def output_after_stop(output: str, started: datetime, had_finished_output: bool) -> str:
    """What OUTPUT holds once a run started at ``started`` was stopped (its commit stopped too), in words.

    The commit's first change is removing ``_SUCCESS`` and its last is writing it, after this run's manifest:
    ``_SUCCESS`` and a manifest of this run mean committed; ``_SUCCESS`` and another manifest, untouched."""
    try:
        fs, root = _filesystem(output)
        fs.invalidate_cache()
        if fs.exists(f"{root}/{SUCCESS_FILE}"):
            if Manifest.load(fs, root).started == started.isoformat():
                return "after the commit: OUTPUT holds this run's complete output"
            return "OUTPUT keeps its previous output"
    except Exception as err:  # storage that cannot say: say that
        return f"OUTPUT's state is unknown ({type(err).__name__}); the next run replaces it whole"
    if had_finished_output:
        return (
            f"during the commit: OUTPUT is incomplete (its previous output partly replaced, no {SUCCESS_FILE}: "
            "do not read it); the next run replaces it whole (an --incremental one runs in full)"
        )
    return f"OUTPUT has no finished output (no {SUCCESS_FILE}); the next run writes it whole"


def _remove_if_empty(fs: AbstractFileSystem, folder: str) -> None:
    """Remove ``folder`` if nothing is left in it (on an object store, where folders are only prefixes,
    listing an emptied one fails: nothing to do)."""
    with contextlib.suppress(OSError):
        if not fs.ls(folder, detail=False):
            fs.rmdir(folder)


def move_file(fs: AbstractFileSystem, source: str, target: str) -> None:
    """Move a staged file to its final path. Local files are renamed. On an object store a move is a copy and
    a delete anyway: one server-side copy here, and the staged originals go with the staging folder in
    batched deletes, about half the requests of ``mv`` (which also checks and lists each file)."""
    (fs.mv if isinstance(fs, LocalFileSystem) else fs.cp_file)(source, target)


def _move(fs: AbstractFileSystem, root: str, to_move: list[tuple[StagedFile, str]]) -> None:
    """Move each staged file to its path relative to ``root``, 16 at once (:func:`move_file`)."""
    for folder in {posixpath.dirname(f"{root}/{final}") for _, final in to_move}:
        fs.makedirs(folder, exist_ok=True)
    with ThreadPoolExecutor(_MOVE_THREADS) as pool:
        list(pool.map(lambda item: move_file(fs, f"{root}/{item[0].path}", f"{root}/{item[1]}"), to_move))


def check_publishable(manifest: Mapping[str, Any], data_files: list[StagedFile], other_files: list[StagedFile]) -> None:
    """What a commit checks before it changes anything, into a directory or a table: the counts it would
    publish add up (:func:`check_accounting`), the staged chunk and reject rows are those counted, and the
    inputs table has one row per file read. Raises CommitError (or AccountingError) naming the numbers."""
    check_accounting(manifest)
    _check_rows(data_files, manifest)
    _check_inputs(other_files, manifest)


def _check_rows(files: list[StagedFile], manifest: Mapping[str, Any]) -> None:
    """Raise CommitError unless the staged rows per folder are the manifest's chunk and reject counts."""
    rows: dict[str, int] = defaultdict(int)
    for staged in files:
        rows[staged.directory] += staged.rows
    expected = folder_rows(manifest["counts"])
    found = {directory: n for directory, n in rows.items() if n and _is_counted(directory)}
    if found != expected:
        differ = sorted(d for d in {*found, *expected} if found.get(d, 0) != expected.get(d, 0))
        detail = ", ".join(f"{d}: {found.get(d, 0):,} rows, manifest {expected.get(d, 0):,}" for d in differ[:5])
        raise CommitError(f"staged rows differ from the manifest ({detail}); no {SUCCESS_FILE} written")


def _check_inputs(files: list[StagedFile], manifest: Mapping[str, Any]) -> None:
    """Raise CommitError unless the staged rows of the inputs table are the files the manifest counts read."""
    rows = sum(staged.rows for staged in files if staged.directory == INPUTS_DIR)
    if rows != manifest["counts"]["files_read"]:
        raise CommitError(
            f"staged rows differ from the manifest ({INPUTS_DIR}: {rows:,} rows, manifest"
            f" {manifest['counts']['files_read']:,} files read); no {SUCCESS_FILE} written"
        )


def _is_counted(directory: str) -> bool:
    """A folder whose rows the manifest counts: a bucket's chunks or the rejects (not ``_index``, ``_changes``)."""
    return directory.startswith(f"{PARTITION_COLUMN}=") or directory == REJECTS_DIR


class CommitOnce(beam.PTransform):
    """``{"chunks", "rejects": StagedFile PCollections, "manifest": one dict}`` -> what the DoFn ``commit`` yields:
    it runs once, after every staged write and the manifest are complete (they are its side inputs: the chunk
    files, the reject files, the manifest, and the files of any other key, such as ``_index`` and ``_changes``)."""

    def __init__(self, commit: beam.DoFn) -> None:
        super().__init__()
        self._commit = commit

    @no_annotations
    def expand(self, pcolls: Mapping[str, beam.PCollection]) -> beam.PCollection:
        pipeline = pcolls["manifest"].pipeline
        return pipeline | "Once" >> beam.Create([None]) | "Commit" >> beam.ParDo(self._commit, *staged_views(pcolls))


def staged_views(pcolls: Mapping[str, beam.PCollection]) -> tuple[beam.pvalue.AsSideInput, ...]:
    """A commit's side inputs: the chunk files, the reject files, the manifest, and the files of every other
    key (``_index``, ``_ids``, ``_changes``, the inputs table), as one list."""
    pipeline = pcolls["manifest"].pipeline
    others = [pcolls[key] for key in sorted(pcolls) if key not in ("chunks", "rejects", "manifest")]
    other_files = (others or [pipeline | "NoOtherFiles" >> beam.Create([])]) | "OtherFiles" >> beam.Flatten()
    return (
        beam.pvalue.AsList(pcolls["chunks"]),
        beam.pvalue.AsList(pcolls["rejects"]),
        beam.pvalue.AsSingleton(pcolls["manifest"]),
        beam.pvalue.AsList(other_files),
    )
