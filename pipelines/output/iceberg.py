"""Output as an Apache Iceberg table, through pyiceberg: ``--output iceberg://NAMESPACE.TABLE`` or ``output.table``.

1. Launch (:func:`open_table`): load the catalog (``output.catalog``: pyiceberg's catalog properties; none
   given, an SQLite catalog in ``out/warehouse``), then create the namespace and the two tables if missing:
   ``NAMESPACE.TABLE`` (the chunk columns and ``density_bucket``, partitioned by it, identity) and
   ``NAMESPACE.TABLE__rejects``. A malformed name, a catalog that cannot be loaded or reached, or a table whose
   schema is not zerda's is an ``OutputError`` (exit code 2) before any data file is written.
2. Write: workers write the Parquet data files straight into each table's location,
   ``<location>/data/<run_id>/density_bucket=K/part-<uuid>.parquet`` (rejects in ``.../rejects/``), and describe
   each file as the table's, statistics included, from the footer they wrote (:class:`WrittenDataFile`,
   ``pipelines.output.iceberg_files``); the run's index and change files are staged in the side folder beside
   the chunk table's location (:attr:`TableTarget.side_location`), as an incremental run into a directory stages
   them (``pipelines.output.iceberg_incremental``).
3. Commit (:class:`_CommitTable`, once, after every write): the accounting and the written rows are checked
   against the manifest's counts, the table's current snapshot against the one read at launch, and one listing
   of the run's folders finds every file at its size; the index and change files are moved into the run's side
   folder with its whole manifest; then the rejects table, then the chunk table, get one snapshot each that
   replaces their data files with this run's, but the files an incremental run keeps (an ``overwrite``; the
   first run's is an ``append``). No byte of chunk data is copied or read again, no statistic computed: the
   snapshot names the files where the workers wrote them, as the workers described them. The chunk table's
   snapshot carries the run's manifest in its summary properties (``zerda.manifest`` and a few flat
   ``zerda.*`` keys, ``zerda.rejects-snapshot-id`` naming the rejects table's snapshot of the same run). The
   launcher deletes the run's staging once the job is over (:func:`remove_staging`); a commit the runner runs
   again after it committed commits nothing more (``pipelines.output.iceberg_again``).

A run that fails or is stopped before its commit leaves both tables at their previous snapshot, and what it
wrote is deleted (:func:`discard_run`). Two runs committing at once: the catalog takes one; the other fails
with a :class:`~pipelines.errors.TableConflict` naming the conflict (exit code 2), its files deleted. A killed
run's files, and those only expired snapshots named, are orphans (:func:`orphan_files`).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.typehints.decorators import no_annotations
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from pipelines.errors import CommitError, Explained, OutputError, TableConflict, UsageError, chain, without_beam_steps
from pipelines.output.build_manifest import finish_manifest
from pipelines.output.iceberg_again import remove_unnamed_changes, remove_unnamed_data
from pipelines.output.iceberg_files import TableFiles
from pipelines.output.layout import (
    CHUNK_SUFFIX,
    MANIFEST_FILE,
    ORPHAN_HOURS,
    PARTITION_COLUMN,
    REJECTS_DIR,
    STAGING_DIR,
    TABLE_SCHEME,
)
from pipelines.output.lease import best_effort
from pipelines.output.manifest import Manifest, write_files_table
from pipelines.output.ownership import STAGED_KEY
from pipelines.output.schema import CHUNK_SCHEMA, REJECT_SCHEMA
from pipelines.output.write import (
    DOCUMENTS,
    CommitOnce,
    Describe,
    StagedFile,
    _as_rows,
    _bucket_directory,
    _move,
    _remove,
    _remove_if_empty,
    _StageParquet,
    _unless_stopped,
    _WriteParquet,
    begin_file,
    check_publishable,
    write_parquet,
)
from pipelines.redact import redact_url

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger("zerda")

SCHEME = TABLE_SCHEME
REJECTS_TABLE_SUFFIX = "__rejects"
DATA_DIR = "data"  # in a table's location: data/<run_id>/...
# beside the chunk table's location: <location>__zerda/<run_id>/_index, _changes, _manifest.json
SIDE_SUFFIX = "__zerda"
REJECT_FILES_DIR = "rejects"
DEFAULT_CATALOG_NAME = "zerda"
DEFAULT_WAREHOUSE = "out/warehouse"
CATALOG_FILE = "catalog.db"
FSSPEC_FILE_IO = "pyiceberg.io.fsspec.FsspecFileIO"
RUN_ID_KEY = "zerda.run-id"
MANIFEST_KEY = "zerda.manifest"
REJECTS_SNAPSHOT_KEY = "zerda.rejects-snapshot-id"
_NAME_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME_MAPPING = "schema.name-mapping.default"

# The chunk table's columns: the dataset's, and the partition column stored in each file (a Hive directory
# keeps it in the path; an Iceberg data file holds it, and pyiceberg reads its value from the file's statistics)
TABLE_CHUNK_SCHEMA = CHUNK_SCHEMA.append(pa.field(PARTITION_COLUMN, pa.int32(), nullable=False))


def table_name(output: str | None, setting: str | None) -> str | None:
    """The table a run writes, ``NAMESPACE.TABLE``, from ``--output iceberg://...`` (None: not given) or
    ``output.table``; None for a Parquet directory. A malformed name, or two names, is a ``UsageError``."""
    given = output[len(SCHEME) :] if output is not None and output.startswith(SCHEME) else None
    if output is not None and given is None and setting is not None:
        raise UsageError(f"--output {output!r} is a directory but output.table is {setting!r}: give one of them")
    if given is not None and setting is not None and given != setting:
        raise UsageError(f"--output names table {given!r} but output.table is {setting!r}: give one of them")
    name = given if given is not None else setting
    if name is None:
        return None
    parts = name.split(".")
    if len(parts) < 2 or not all(_NAME_PART.match(part) for part in parts):
        raise UsageError(
            f"Iceberg table {name!r} is not NAMESPACE.TABLE (parts of letters, digits and '_', each starting "
            "with a letter or '_', joined by '.')"
        )
    return name


def catalog_config(configured: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The catalog's name and the properties given to pyiceberg's ``load_catalog`` (which adds those of the
    environment, ``PYICEBERG_CATALOG__<NAME>__<KEY>``, and of ``~/.pyiceberg.yaml``). With no ``uri`` or
    ``type`` anywhere: an SQLite catalog, its file ``catalog.db`` in the warehouse folder (local disk). The
    file IO is fsspec's unless one is named (``py-io-impl``), so that endpoints and credentials come from the
    ordinary environment (``AWS_ENDPOINT_URL``, ...) for the commit as for the workers' writes."""
    from pyiceberg.utils.config import Config

    properties = {key: _text(value) for key, value in configured.items()}
    name = properties.pop("name", DEFAULT_CATALOG_NAME)
    if "warehouse" in properties and "://" not in properties["warehouse"]:  # workers may not share our cwd
        properties["warehouse"] = f"file://{os.path.abspath(properties['warehouse'])}"
    known = {**(Config().get_catalog_config(name) or {}), **properties}
    if "py-io-impl" not in known:  # fsspec, as zerda's own reads and writes: the environment's endpoints apply
        properties["py-io-impl"] = FSSPEC_FILE_IO
    if not {"uri", "type", "py-catalog-impl"} & set(known):
        fs, path = url_to_fs(str(known.get("warehouse", DEFAULT_WAREHOUSE)))
        if not isinstance(fs, LocalFileSystem):
            raise UsageError(
                f"the warehouse {redact_url(str(known['warehouse']))} is not on local disk: give the catalog's uri "
                f"too (output.catalog.uri, e.g. sqlite:////path/{CATALOG_FILE}): an SQLite catalog file is local"
            )
        fs.makedirs(path, exist_ok=True)
        properties |= {"type": "sql", "uri": f"sqlite:///{path}/{CATALOG_FILE}", "warehouse": f"file://{path}"}
    return name, properties


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class TableTarget:
    """An Iceberg output as the workers and the commit need it: the catalog, the tables and their locations."""

    name: str  # NAMESPACE.TABLE
    catalog_name: str
    properties: Mapping[str, str]
    chunk_files: TableFiles  # how the workers describe each table's data files (its location, schema, ...)
    reject_files: TableFiles
    snapshot_id: int | None = None  # the chunk table's current snapshot at launch: the one the commit replaces

    @property
    def chunks_location(self) -> str:
        return self.chunk_files.location

    @property
    def rejects_location(self) -> str:
        return self.reject_files.location

    @property
    def rejects_name(self) -> str:
        return f"{self.name}{REJECTS_TABLE_SUFFIX}"

    @property
    def side_location(self) -> str:
        """Where runs keep their index and change files, a folder per run (``<run_id>/_index/``, ``_changes/``,
        ``_manifest.json``), and stage them: beside the table's location, not in it, so that a maintenance job
        deleting the files in the location no snapshot names (Iceberg's orphan-file removal) leaves them."""
        return f"{self.chunks_location}{SIDE_SUFFIX}"

    def side_folder(self, run_id: str) -> str:
        return f"{self.side_location}/{run_id}"

    @property
    def url(self) -> str:
        return f"{SCHEME}{self.name}"

    def catalog(self) -> Catalog:
        return _load_catalog(self.catalog_name, self.properties)

    def __str__(self) -> str:
        return self.url


def _load_catalog(name: str, properties: Mapping[str, str]) -> Catalog:
    """pyiceberg's catalog ``name``: ``properties`` over those of the environment and ``~/.pyiceberg.yaml`` as
    they are now (pyiceberg's ``load_catalog`` reads the environment once, when it is imported). The
    environment's properties, a password among them, stay out of the job's graph: each process reads its own."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.utils.config import Config

    known = {key: value for key, value in (Config().get_catalog_config(name) or {}).items() if isinstance(value, str)}
    return load_catalog(name, **{**known, **properties})


def open_table(name: str, configured: Mapping[str, Any], *, create: bool = True) -> TableTarget:
    """Load the catalog and the tables of ``name`` (created when missing, if ``create``): OutputError if it
    cannot be done."""
    try:
        import pyiceberg  # noqa: F401
    except ImportError as err:
        raise OutputError(f"an Iceberg output needs pyiceberg: pip install 'zerda[iceberg]' ({err})") from err
    catalog_name, properties = catalog_config(configured)
    where = f"catalog {catalog_name!r}"
    try:
        catalog = _load_catalog(catalog_name, properties)
    except Exception as err:  # an unknown type, a missing driver, a server that does not answer
        raise OutputError(f"{where} cannot be opened: {_why(err)}") from err
    try:
        if not create:
            chunks, rejects = catalog.load_table(name), catalog.load_table(f"{name}{REJECTS_TABLE_SUFFIX}")
        else:
            catalog.create_namespace_if_not_exists(name.rsplit(".", 1)[0])
            chunks = _load_or_create(catalog, name, TABLE_CHUNK_SCHEMA, partitioned=True)
            rejects = _load_or_create(catalog, f"{name}{REJECTS_TABLE_SUFFIX}", REJECT_SCHEMA, partitioned=False)
    except OutputError:
        raise
    except Exception as err:
        raise OutputError(f"Iceberg table {name!r} in {where}: {_why(err)}") from err
    return TableTarget(name, catalog_name, properties, TableFiles.of(chunks), TableFiles.of(rejects))


def _why(err: BaseException) -> str:
    """An error in one line, credentials in URLs hidden (a catalog uri may hold a password)."""
    return redact_url(f"{type(err).__name__}: {err}".splitlines()[0])


def _load_or_create(catalog: Catalog, identifier: str, schema: pa.Schema, *, partitioned: bool) -> Table:
    """The table, checked to have zerda's columns and partitioning; created when missing (in one commit:
    the schema, the identity partition on ``density_bucket`` and the name mapping readers of files without
    field ids need)."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        transaction = catalog.create_table_transaction(identifier, schema=schema)
        if partitioned:
            with transaction.update_spec() as spec:
                spec.add_identity(PARTITION_COLUMN)
        mapping = transaction.table_metadata.schema().name_mapping.model_dump_json()
        transaction.set_properties({_NAME_MAPPING: mapping})
        try:
            return transaction.commit_transaction()
        except TableAlreadyExistsError:  # another launch created it meanwhile
            table = catalog.load_table(identifier)
    _check_table(table, identifier, schema, partitioned)
    return table


def _columns(schema: Any) -> list[tuple[str, str, bool]]:
    """An Iceberg schema's top-level columns as (name, type without ids, required)."""
    return [(f.name, re.sub(r"-?\d+: ", "", str(f.field_type)), f.required) for f in schema.fields]


def _check_table(table: Table, identifier: str, schema: pa.Schema, partitioned: bool) -> None:
    """OutputError unless the table has zerda's columns (names, types, nullability) and partitioning."""
    from pyiceberg.catalog import Catalog

    expected = _columns(Catalog._convert_schema_if_needed(schema))
    found = _columns(table.schema())
    if found != expected:
        differ = ", ".join(f"{c[0]} {c[1]}{'' if c[2] else ' (optional)'}" for c in found if c not in expected)
        missing = ", ".join(c[0] for c in expected if c not in found)
        raise OutputError(
            f"Iceberg table {identifier!r} has columns zerda does not write (not zerda's: {differ or 'none'}; "
            f"missing or different: {missing or 'none'}): give another table"
        )
    spec = [(f.name, str(f.transform)) for f in table.spec().fields]
    if spec != ([(PARTITION_COLUMN, "identity")] if partitioned else []):
        raise OutputError(f"Iceberg table {identifier!r} is partitioned {spec or 'not at all'}, not as zerda writes")


@dataclass(frozen=True)
class WrittenDataFile(StagedFile):
    """A data file as its worker closed it (``bytes``: its size), with its Iceberg ``DataFile``, which the worker
    built from the footer it wrote (:class:`~pipelines.output.iceberg_files.TableFiles`): all the commit needs to
    add it to the table without reading it again."""

    data_file: Any = None


class _WriteDataFiles(_StageParquet):
    """The directory output's row writer, each closed file given with its ``DataFile`` and size (its ``_close``
    closes the Parquet writer, then reads the bytes written from the still open file, then closes it)."""

    def __init__(self, files: TableFiles, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._files = files

    def _close(self, directory: str) -> WrittenDataFile:
        part = self._open.pop(directory)
        if part.buffer or part.writer is None:
            self._flush(directory, part)
        assert part.writer is not None
        part.writer.close()
        size = part.handle.tell()  # the bytes written, footer included: what a reader seeks the footer from
        part.handle.close()
        data_file = self._files.data_file(part.relative, part.writer.writer.metadata, size)
        return WrittenDataFile(directory, part.relative, part.rows, size, data_file=data_file)


class _WriteTable(_WriteParquet):
    """The directory output's writers' settings; files end in ``.parquet`` and come with their ``DataFile``."""

    def __init__(self, files: TableFiles, run_id: str, compression: str, max_rows: int, folder: str) -> None:
        super().__init__(files.location, run_id, compression, max_rows, folder)
        self._files = files

    def _write(
        self, schema: pa.Schema, directory_of: Any, group_by: str | None = None, describe: Describe | None = None
    ) -> beam.ParDo:
        return beam.ParDo(
            _WriteDataFiles(
                self._files,
                self._output,
                self._run_id,
                schema,
                directory_of,
                CHUNK_SUFFIX,
                self._compression,
                self._max_rows,
                group_by,
                describe,
                folder=self._folder,
            )
        )


class WriteDescribedTableChunks(_WriteTable):
    """Chunk row lists -> Parquet data files in the chunk table's location, a folder per bucket (``files``), and
    each document described with the file that holds its rows (``documents``), by the file's path in the
    bucket folders, ``density_bucket=K/part-<uuid>.parquet``: the name an index gives it
    (``pipelines.incremental``), which a rewrite of the file in a later run keeps."""

    def __init__(
        self, files: TableFiles, run_id: str, compression: str, max_rows: int, folder: str, describe: Describe
    ) -> None:
        super().__init__(files, run_id, compression, max_rows, folder)
        self._describe = describe

    @no_annotations
    def expand(self, rows: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        stage = self._write(TABLE_CHUNK_SCHEMA, _bucket_directory, "source", self._describe)
        return rows | "StageChunks" >> stage.with_outputs(DOCUMENTS, main="files")


class WriteTableRejects(_WriteTable):
    """``Reject`` records -> Parquet data files in the rejects table's location (none when there is none)."""

    def expand(self, rejects: beam.PCollection) -> beam.PCollection:
        return rejects | "RejectRow" >> beam.Map(_as_rows) | "StageRejects" >> self._write(REJECT_SCHEMA, _rejects)


def _rejects(_: Any) -> str:
    return REJECT_FILES_DIR


def write_data_file(files: TableFiles, run_id: str, path: str, table: pa.Table, compression: str) -> WrittenDataFile:
    """``table`` (chunk rows of one bucket) as a data file at ``path`` in the table's location (a path in the
    run's folder), with its ``DataFile`` and size, as the workers' writers give theirs. A whole file of as many
    rows already there is described as it is, not written again: an earlier attempt of the same step wrote it,
    with the same rows, and once the run is committed its snapshot names it (a step the runner runs again after
    the commit, ``pipelines.output.iceberg_again``, would have a reader see a partial file)."""
    fs, root = url_to_fs(files.location)
    full = posixpath.join(root, path)
    written = _whole_data_file(fs, full, path, table.num_rows)
    if written is None:
        begin_file(run_id)
        fs.makedirs(posixpath.dirname(full), exist_ok=True)
        written = write_parquet(fs, full, path, table, compression)
    footer, size = written
    directory = posixpath.basename(posixpath.dirname(path))
    return WrittenDataFile(directory, path, table.num_rows, size, data_file=files.data_file(path, footer, size))


def _whole_data_file(fs: Any, full: str, path: str, rows: int) -> tuple[Any, int] | None:
    """The footer and size of the data file at ``full`` if it is a whole one that zerda wrote at ``path`` with
    ``rows`` rows; None if there is none (or only the start of one: an attempt that failed while writing)."""
    try:
        with fs.open(full, "rb") as f:
            footer = pq.ParquetFile(f).metadata
            size = f.seek(0, 2)
    except (FileNotFoundError, pa.ArrowInvalid, OSError):
        return None
    staged = (footer.metadata or {}).get(STAGED_KEY)
    return (footer, size) if footer.num_rows == rows and staged == path.encode() else None


class CommitTable(CommitOnce):
    """:class:`~pipelines.output.write.CommitOnce` into the tables (:class:`_CommitTable`) -> the committed
    manifest; the run's index and change files go to its side folder."""

    def __init__(self, target: TableTarget, run_id: str) -> None:
        super().__init__(_CommitTable(target, run_id))


class _CommitTable(beam.DoFn):
    """Checks the counts, publishes the run's index and change files in its side folder, then commits the
    rejects table and the chunk table: one snapshot each. The chunk snapshot keeps the previous data files the
    run kept (an incremental run's unchanged documents) and replaces every other."""

    def __init__(self, target: TableTarget, run_id: str) -> None:
        self._target = target
        self._run_id = run_id

    def process(
        self,
        _: None,
        chunk_files: list[StagedFile],
        reject_files: list[StagedFile],
        manifest: dict,
        side_files: list[StagedFile],
    ):
        check_publishable(
            manifest, [*chunk_files, *(replace(f, directory=REJECTS_DIR) for f in reject_files)], side_files
        )
        try:
            yield self._commit(chunk_files, reject_files, manifest, side_files)
        except Explained:  # a CommitError, a TableConflict, a stop: they say what happened
            raise
        except Exception as err:  # the catalog or the storage failed (down, locked, denied)
            name = self._target.name
            raise CommitError(
                f"the commit to Iceberg table {name!r} failed ({_why(err)}); it keeps its previous snapshot"
            ) from err

    def _commit(
        self,
        chunk_files: list[StagedFile],
        reject_files: list[StagedFile],
        manifest: dict,
        side_files: list[StagedFile],
    ) -> dict:
        target, run_id = self._target, self._run_id
        catalog = target.catalog()
        chunks, rejects = catalog.load_table(target.name), catalog.load_table(target.rejects_name)
        if _is_current(chunks, run_id):  # committed already: the runner ran the steps again after the commit
            return self._committed_again(chunks, rejects)
        _check_base(chunks, target.snapshot_id)
        kept = {f"{target.chunks_location}/{f.path}" for f in chunk_files if f.kept}
        new_files = [f for f in chunk_files if not f.kept]
        chunk_data = _data_files(chunks, target.chunk_files, run_id, new_files)
        reject_data = _data_files(rejects, target.reject_files, run_id, reject_files)
        final = without_credentials(finish_manifest(manifest, finished=datetime.now(timezone.utc)))
        final["output"] |= {"root": target.url, "table": target.name, "rejects_table": target.rejects_name}
        _unless_stopped(run_id, lambda: publish_side_files(target, run_id, side_files, final))
        rejects_before = rejects.current_snapshot()
        rejects_snapshot = _unless_stopped(run_id, lambda: _replace_data(rejects, reject_data, {RUN_ID_KEY: run_id}))
        final["output"]["rejects_snapshot_id"] = rejects_snapshot
        properties = snapshot_properties(final, run_id)
        try:
            snapshot = _unless_stopped(run_id, lambda: _replace_data(chunks, chunk_data, properties, kept))
        except BaseException:
            before = None if rejects_before is None else rejects_before.snapshot_id
            best_effort(lambda: undo_snapshot(rejects, rejects_snapshot, before), "roll the rejects table back")
            raise
        final["output"]["snapshot_id"] = snapshot
        log.info(
            "committed snapshot %d of %s (%d data files added, %d kept)",
            snapshot,
            target.name,
            len(chunk_data),
            len(kept),
        )
        return final

    def _committed_again(self, chunks: Table, rejects: Table) -> dict:
        """The run's committed manifest, once the files the steps run again wrote under new names are deleted
        (``pipelines.output.iceberg_again``): nothing more is committed."""
        target, run_id = self._target, self._run_id
        for table, location in ((chunks, target.chunks_location), (rejects, target.rejects_location)):
            snapshot = run_snapshot(table, run_id)
            if snapshot is not None:
                remove_unnamed_data(table, snapshot, location, f"{DATA_DIR}/{run_id}")
        remove_unnamed_changes(target.side_folder(run_id))
        log.info("%s holds this run's snapshot already: its steps ran again after the commit", target.name)
        return committed_manifest(target, run_id)


def _is_current(table: Table, run_id: str) -> bool:
    """Whether the table's current snapshot is ``run_id``'s."""
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    return summary is not None and summary.additional_properties.get(RUN_ID_KEY) == run_id


def _check_base(table: Table, base: int | None) -> None:
    """TableConflict unless the table's current snapshot is the one the run read at launch: its index, its
    changes and the files it keeps were decided against that snapshot (another run, or another program,
    committed since)."""
    current = table.current_snapshot()
    found = None if current is None else current.snapshot_id
    if found != base:
        raise TableConflict(
            f"Iceberg table {'.'.join(table.name())!r} changed while this run wrote (another run committed?): "
            f"its current snapshot is {found}, not {base} as at launch; not committing"
        )


def publish_side_files(target: TableTarget, run_id: str, staged: list[StagedFile], manifest: Mapping[str, Any]) -> None:
    """Put the run's index, id-count, change and input-table files in its side folder and write its manifest
    beside them (``_manifest.json`` and its table of the files with their rows and sizes; the input files'
    stamps, in the inputs table, let the next incremental run skip unchanged files). The run's staging stays
    until the job is over (:func:`remove_staging`): a runner that retries the commit, or restarts the steps
    before it (Flink), reads the run's listings again.

    The change files were written there (``TableIncrementally``); the index files, one a partition, are moved
    from the staging to their names. One listing of the folder finds each file and its size (no file is read
    again), and deletes the change files no element names (a retried bundle's)."""
    fs, root = url_to_fs(target.side_location)
    root = posixpath.normpath(root)
    folder = f"{root}/{run_id}"
    waiting = set(fs.find(f"{root}/{STAGING_DIR}/{run_id}"))  # not yet moved (a retried commit moved some)
    _move(fs, root, [(f, f"{run_id}/{f.committed_path}") for f in staged if f"{root}/{f.path}" in waiting])
    sizes = {posixpath.relpath(path, folder): info.get("size") for path, info in fs.find(folder, detail=True).items()}
    named = {f.committed_path for f in staged}
    missing = sorted(named - sizes.keys())
    if missing:
        raise CommitError(f"the run's side file {missing[0]} is missing: not committing (another run writing?)")
    _remove(fs, [f"{folder}/{path}" for path in sizes.keys() - named])
    entries = [
        {"path": f.committed_path, "rows": f.rows, "bytes": sizes[f.committed_path], "footer": f.footer or None}
        for f in staged
    ]
    side_manifest = {
        **manifest,
        "output": {**manifest["output"], "files_table": write_files_table(fs, folder, entries)},
    }
    fs.pipe_file(f"{folder}/{MANIFEST_FILE}", Manifest(side_manifest).dumps().encode())


def remove_staging(target: TableTarget, run_id: str) -> None:
    """Delete the run's staging once its job is over, by the launcher: never inside the job, where a step the
    runner runs again (``pipelines.output.iceberg_again``) reads the run's listings in it."""
    fs, root = url_to_fs(target.side_location)
    _remove_staging(fs, posixpath.normpath(root), run_id)


def _remove_staging(fs: Any, root: str, run_id: str) -> None:
    """Delete the run's staging in the side folder, and the staging folder once no run's is left in it."""
    _remove(fs, f"{root}/{STAGING_DIR}/{run_id}", recursive=True)
    _remove_if_empty(fs, f"{root}/{STAGING_DIR}")


def _data_files(table: Table, files: TableFiles, run_id: str, written: list[StagedFile]) -> list[Any]:
    """The Iceberg ``DataFile`` of each file the workers wrote, as each worker built it from the footer it wrote:
    no file is read again, no statistic computed here. The table must still have the schema, partitioning and
    metrics settings the workers described the files with (TableConflict if not). One listing of the run's folder
    checks each file is there with its size (a listing call per thousand files on an object store, where a read
    per file would cost the commit a request each)."""
    written = [f for f in written if f.rows]
    if not written:
        return []
    if TableFiles.of(table) != files:
        raise TableConflict(
            f"Iceberg table {'.'.join(table.name())!r} changed while this run wrote (its columns, partitioning or "
            "metrics settings are not those the run's data files were described with): not committing"
        )
    fs, root = url_to_fs(files.location)
    listed = {
        path: info.get("size") for path, info in fs.find(posixpath.join(root, DATA_DIR, run_id), detail=True).items()
    }
    data_files = []
    for f in written:
        data_file = f.data_file if isinstance(f, WrittenDataFile) else None
        if data_file is None or data_file.record_count != f.rows or data_file.file_size_in_bytes != f.bytes:
            raise CommitError(f"data file {f.path} was not written as zerda writes a table's files: not committing")
        if listed.get(posixpath.join(root, f.path)) != f.bytes:
            raise CommitError(
                f"data file {files.location}/{f.path} is missing or not the size written ({f.bytes:,} bytes): "
                "not committing"
            )
        data_files.append(data_file)
    return data_files


def _replace_data(
    table: Table, data_files: list[Any], properties: Mapping[str, str], keep: Container[str] = frozenset()
) -> int:
    """One snapshot in which ``data_files`` replace every data file of the table but those in ``keep`` (paths);
    its id. A conflict (another commit since the table was loaded) is a CommitError and leaves the table as the
    other commit made it."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    try:
        with (
            table.transaction() as transaction,
            transaction.update_snapshot(snapshot_properties=dict(properties)).overwrite() as overwrite,
        ):
            for old in _current_data_files(transaction.table_metadata, table.io):
                if old.file_path not in keep:
                    overwrite.delete_data_file(old)
            for new in data_files:
                overwrite.append_data_file(new)
    except (CommitFailedException, ValidationException) as err:  # pyiceberg retries, then checks for conflicts
        raise TableConflict(
            f"Iceberg table {'.'.join(table.name())!r} changed while this run wrote (another run committed?): "
            f"not committing ({_why(err)})"
        ) from err
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def undo_snapshot(table: Table, ours: int, previous: int | None) -> bool:
    """Make ``previous`` the table's current snapshot again if ``ours`` still is (the rejects table, when the
    chunk table's commit failed after it: the rejects stay with the chunks they were counted with). Whether it
    did; a table that had no snapshot before keeps ``ours``, which the chunk table's snapshots name in none of
    their ``zerda.rejects-snapshot-id``."""
    table.refresh()
    current = table.current_snapshot()
    if previous is None or current is None or current.snapshot_id != ours:
        return False
    with table.manage_snapshots() as snapshots:
        snapshots.rollback_to_snapshot(previous)
    return True


def _current_data_files(metadata: Any, io: Any) -> Iterator[Any]:
    from pyiceberg.manifest import DataFileContent

    snapshot = metadata.current_snapshot()
    if snapshot is None:
        return
    for manifest_file in snapshot.manifests(io):
        for entry in manifest_file.fetch_manifest_entry(io, discard_deleted=True):
            if entry.data_file.content == DataFileContent.DATA:
                yield entry.data_file


def without_credentials(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest with its settings' catalog properties without credentials (a catalog uri may hold a
    password): as the snapshot's summary and the run's side folder keep it."""
    settings = json.loads(json.dumps(manifest.get("settings", {})))
    catalog = settings.get("output", {}).get("catalog")
    if isinstance(catalog, dict):
        settings["output"]["catalog"] = {key: redact_url(str(value)) for key, value in catalog.items()}
    return {**manifest, "settings": settings}


def snapshot_properties(manifest: Mapping[str, Any], run_id: str) -> dict[str, str]:
    """The run's manifest as snapshot summary properties (strings): the whole of it as JSON under
    ``zerda.manifest`` (not the list of input files: its size grows with the corpus), and the counts most
    asked for as flat keys."""
    counts = manifest["counts"]
    kept = {key: value for key, value in manifest.items() if key != "inputs"}
    properties = {
        RUN_ID_KEY: run_id,
        MANIFEST_KEY: json.dumps(kept, ensure_ascii=False, sort_keys=True, separators=(",", ":")),
        "zerda.fingerprint": str(manifest["fingerprint"]),
        "zerda.version": str(manifest["versions"]["zerda"]),
        "zerda.records-read": str(counts["records_read"]),
        "zerda.documents-chunked": str(counts["documents_chunked"]),
        "zerda.chunks": str(counts["chunks"]),
        REJECTS_SNAPSHOT_KEY: str(manifest["output"]["rejects_snapshot_id"]),
    }
    properties |= {f"zerda.rejects.{reason}": str(n) for reason, n in counts["rejects"].items()}
    return properties


def committed_manifest(target: TableTarget, run_id: str) -> dict[str, Any]:
    """The manifest of ``run_id``'s snapshot, the table's current one (CommitError if it is not)."""
    table = target.catalog().load_table(target.name)
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    if snapshot is None or summary is None or summary.additional_properties.get(RUN_ID_KEY) != run_id:
        raise CommitError(f"Iceberg table {target.name!r}: this run's snapshot is not the current one")
    manifest: dict[str, Any] = json.loads(summary.additional_properties[MANIFEST_KEY])
    manifest["output"]["snapshot_id"] = snapshot.snapshot_id
    manifest["output"]["metadata_location"] = table.metadata_location  # what DuckDB's iceberg_scan reads
    return manifest


def summary_lines(target: TableTarget, manifest: Mapping[str, Any]) -> list[str]:
    """The run summary's last lines for a table: where the rows are, and how to read them."""
    output = manifest["output"]
    return [
        f"output:  {target.url} (snapshot {output['snapshot_id']}, catalog {target.catalog_name!r})",
        f"rejects: {target.rejects_name} (snapshot {output['rejects_snapshot_id']})",
        "query:   SELECT density_bucket, count(*) AS chunks FROM "
        f"iceberg_scan('{output['metadata_location']}') GROUP BY 1 ORDER BY 1",
        f"python:  pyiceberg.catalog.load_catalog({target.catalog_name!r}, ...).load_table({target.name!r})"
        ".scan().to_arrow() (docs/iceberg.md)",
    ]


def run_snapshot(table: Table, run_id: str) -> int | None:
    """The id of the snapshot ``run_id`` committed to ``table``, if any."""
    for snapshot in table.snapshots():
        if snapshot.summary is not None and snapshot.summary.additional_properties.get(RUN_ID_KEY) == run_id:
            return snapshot.snapshot_id
    return None


_RUN_STARTED = re.compile(r"(\d{8}T\d{6}Z)-")  # a run id begins with its start time (write.new_run_id)


@dataclass(frozen=True)
class Orphan:
    """A file in a table's data folder or the side folder that no snapshot names, and the run that wrote it."""

    url: str
    run_id: str
    started: datetime


def orphan_files(target: TableTarget, older_than_hours: float = ORPHAN_HOURS) -> list[Orphan]:
    """The files runs wrote that no snapshot names, of runs started more than ``older_than_hours`` ago (a run
    writing now has files no snapshot names yet): a killed run's data and side files, and, once snapshots are
    expired, the files only they named. A data file is an orphan when no snapshot of its table lists it (an
    incremental run keeps the files of unchanged documents, so one run's folder may hold files of many
    snapshots); a side folder when no snapshot of the chunk table is its run's. Files outside a run's folder
    (not zerda's) are never listed."""
    catalog = target.catalog()
    cutoff = datetime.now(timezone.utc).timestamp() - older_than_hours * 3600
    found: list[Orphan] = []
    for name, location in ((target.name, target.chunks_location), (target.rejects_name, target.rejects_location)):
        table = catalog.load_table(name)
        named = _named_files(table)
        found += [o for o in _run_files(f"{location}/{DATA_DIR}") if o.url not in named]
    runs = {
        s.summary.additional_properties.get(RUN_ID_KEY)
        for s in catalog.load_table(target.name).snapshots()
        if s.summary
    }
    found += [o for o in _run_files(target.side_location) if o.run_id not in runs or _staged(o)]
    return sorted((o for o in found if o.started.timestamp() <= cutoff), key=lambda o: o.url)


def _staged(orphan: Orphan) -> bool:
    """Whether a side file is in a run's staging, which a committed run's launcher deletes once its job is over
    (a launcher killed then leaves it)."""
    return f"/{STAGING_DIR}/{orphan.run_id}/" in orphan.url


def _named_files(table: Table) -> set[str]:
    """The paths of the data files every snapshot of ``table`` holds (a manifest shared by snapshots read once)."""
    named: set[str] = set()
    seen: set[str] = set()
    for snapshot in table.snapshots():
        for manifest_file in snapshot.manifests(table.io):
            if manifest_file.manifest_path in seen:
                continue
            seen.add(manifest_file.manifest_path)
            named.update(
                e.data_file.file_path for e in manifest_file.fetch_manifest_entry(table.io, discard_deleted=True)
            )
    return named


def _run_files(folder: str) -> Iterator[Orphan]:
    """Each file below ``folder``'s run folders (``<run_id>/...``, or ``_staging/<run_id>/...``), with its run."""
    fs, root = url_to_fs(folder)
    root = posixpath.normpath(root)
    try:
        paths = fs.find(root)
    except FileNotFoundError:
        return
    for path in paths:
        parts = posixpath.relpath(path, root).split("/")
        run_id = parts[1] if parts[0] == STAGING_DIR and len(parts) > 2 else parts[0]
        started = _RUN_STARTED.match(run_id)
        if len(parts) > 1 and started:
            when = datetime.strptime(started.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
            yield Orphan(fs.unstrip_protocol(path), run_id, when)


def remove_orphans(orphans: list[Orphan]) -> None:
    """Delete the files :func:`orphan_files` listed, then the run folders they leave empty."""
    for orphan in orphans:
        fs, path = url_to_fs(orphan.url)
        _remove(fs, path)
    for folder in sorted({_run_folder(orphan) for orphan in orphans}):
        fs, path = url_to_fs(folder)
        below = fs.find(path, withdirs=True, detail=True).items()
        for empty in sorted((p for p, info in below if info["type"] == "directory"), key=len, reverse=True):
            _remove_if_empty(fs, empty)
        _remove_if_empty(fs, path)
        if posixpath.basename(posixpath.dirname(path)) == STAGING_DIR:
            _remove_if_empty(fs, posixpath.dirname(path))


def _run_folder(orphan: Orphan) -> str:
    """The folder of the run that wrote an orphan (``.../<run_id>``)."""
    folder = posixpath.dirname(orphan.url)
    while folder and posixpath.basename(folder) != orphan.run_id:
        folder = posixpath.dirname(folder)
    return folder


def notice_orphans(target: TableTarget) -> None:
    """Log how many orphan files (:func:`orphan_files`) runs left, if any: only a notice, whatever the storage
    says."""
    try:
        orphans = orphan_files(target)
    except Exception as err:
        log.debug("could not list the orphan files of %s: %s", target.name, _why(err))
        return
    if orphans:
        runs = sorted({o.run_id for o in orphans})
        log.warning(
            "%d file(s) of %d run(s) that no snapshot of %s names (killed runs', or expired snapshots'), e.g. %s: "
            "zerda-report %s --orphans --remove deletes them (docs/iceberg.md)",
            len(orphans),
            len(runs),
            target.name,
            redact_url(orphans[0].url),
            target.url,
        )


def discard_run(target: TableTarget, run_id: str) -> None:
    """Delete what ``run_id`` wrote that nothing names: its data files in each table it did not commit to, its
    staging, and its side folder unless its chunk snapshot is committed."""
    catalog = target.catalog()
    committed = False
    for name, location in ((target.name, target.chunks_location), (target.rejects_name, target.rejects_location)):
        if run_snapshot(catalog.load_table(name), run_id) is None:
            fs, root = url_to_fs(location)
            _remove(fs, posixpath.join(root, DATA_DIR, run_id), recursive=True)
        elif name == target.name:
            committed = True
    fs, root = url_to_fs(target.side_location)
    _remove_staging(fs, root, run_id)
    if not committed:
        _remove(fs, posixpath.join(root, run_id), recursive=True)


def conflict_line(error: BaseException) -> str | None:
    """The line of a :class:`TableConflict` that ended a run, raised here or in a worker process (whose
    traceback reaches the launcher as text naming the class), if one did."""
    for err in chain(error):
        if isinstance(err, TableConflict):
            return str(err)
        found = re.findall(rf"\b{TableConflict.__name__}: ([^\n]+)", str(err))
        if found:
            return without_beam_steps(found[-1])
    return None


def table_after_stop(target: TableTarget, run_id: str) -> str:
    """What the table holds once a stopped run's commit was stopped too, in words."""
    try:
        table = target.catalog().load_table(target.name)
        snapshot = table.current_snapshot()
        summary = snapshot.summary if snapshot is not None else None
        if summary is not None and summary.additional_properties.get(RUN_ID_KEY) == run_id:
            return f"after the commit: {target.name} holds this run's snapshot"
        return f"{target.name} keeps its previous snapshot"
    except Exception as err:
        return f"{target.name}'s state is unknown ({type(err).__name__}); a snapshot is whole or absent"
