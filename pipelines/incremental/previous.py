"""The previous output, judged at launch and read by slices on workers: its manifest, index and files."""

from __future__ import annotations

import io
import logging
import posixpath
import re
import time
from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

import zerda_core
from pipelines.errors import EnvironmentFault, ManifestError, OutputError, PreviousUnreadable, without_beam_steps
from pipelines.incremental.index import (
    _PARTITION_NAME,
    FIRST_RUN_DOCUMENTS,
    index_partitions,
    index_path,
    partition_of,
)
from pipelines.input.source import fault_kind
from pipelines.output.layout import (
    IDS_DIR,
    INDEX_DIR,
    MANIFEST_FILE,
    PARTITION_COLUMN,
    REJECTS_DIR,
    SUCCESS_FILE,
)
from pipelines.output.manifest import Manifest, footer_digest, read_by_slices, read_manifest_table
from pipelines.output.schema import IDS_SCHEMA, INDEX_SCHEMA, INPUTS_SCHEMA
from pipelines.records import FileReport
from pipelines.redact import bounded

log = logging.getLogger("zerda")


_READ_RETRY_SECONDS = (0.5, 2.0, 8.0)  # the waits before each new attempt at a previous file: 4 attempts in all


_AGAINST_NOTHING = "; without its index every chunk is listed as added"


UNREADABLE = "a previous chunk file cannot be read"  # what fails a carry (see :func:`unreadable_carry`)


UNREADABLE_INDEX = "a previous index file cannot be read"  # the same of the index: the rerun lists no removal


UNREADABLE_INPUTS = "a previous inputs table cannot be read"  # the manifest's: the rerun reads every file


def planned_partitions(previous: Previous) -> int:
    """This run's index partitions: as many as the previous run's documents or the bytes it read ask, the more
    (known from its manifest's counts: the launch lists no input file); a first run, as many as
    ``FIRST_RUN_DOCUMENTS`` ask."""
    return index_partitions(previous.documents or FIRST_RUN_DOCUMENTS, previous.input_bytes)


@dataclass(frozen=True)
class Previous:
    """What a run takes from the previous committed output in OUTPUT (absolute URLs).

    The index partitions are compared against to list changes (in any run); ``carry`` says whether unchanged
    documents keep their rows in ``chunk_files``, and ``reason`` why or why not.
    """

    carry: bool = False
    reason: str = "no previous output"
    root: str = ""  # OUTPUT's URL: ``chunk_files`` and the index partitions are relative to it
    index_partitions: int = 0  # how many partitions the previous index has (0: none to compare against)
    index_parts: frozenset[int] = frozenset()  # the partitions that have a file (an empty one has none)
    documents: int = 0  # the previous run's documents: the size of this run's index is planned from it
    chunk_files: tuple[tuple[str, int, str], ...] = ()  # (path, rows, footer digest or "") of each previous chunk file
    reject_files: tuple[str, ...] = ()
    inputs: Mapping[str, FileReport] = field(default_factory=dict)  # source -> its report, if read whole and stamped
    id_partitions: int = 0  # how many partitions the previous id counts (``_ids/``) have (0: none, an older zerda)
    id_parts: frozenset[int] = frozenset()
    footers: Mapping[str, str] = field(default_factory=dict)  # index and id-count path -> its footer's digest
    input_bytes: int = 0  # the text the previous run chunked (characters): this run's index is planned from it too
    input_parts: tuple[tuple[str, int, int], ...] = ()  # (path, bytes, rows) of the inputs table's parts: read on
    # the workers (PreviousReports), never here; ``inputs`` holds a format 1 manifest's entries, read with its JSON
    retry: frozenset[str] = frozenset()  # the sources whose previous read ended in a chunker_error: read again

    @property
    def counts_ids(self) -> bool:
        """Whether the run counts duplicate ids from the previous id counts and what changed, not from every id."""
        return self.carry and self.id_partitions > 0


def read_previous(output: str, fingerprint: str, incremental: bool) -> Previous:
    """The previous committed output of OUTPUT (only with its ``_SUCCESS``) and whether its rows can be reused."""
    fs, root = url_to_fs(output)
    root = posixpath.normpath(root)
    if not fs.exists(f"{root}/{SUCCESS_FILE}"):
        return Previous(reason="no committed previous output (no _SUCCESS)")
    try:
        data = _read_bytes(fs, f"{root}/{MANIFEST_FILE}")
    except (FileNotFoundError, IsADirectoryError) as err:  # a _SUCCESS without its manifest: deleted by hand
        return Previous(
            reason=f"full run: the previous {MANIFEST_FILE} is missing ({type(err).__name__}){_AGAINST_NOTHING}"
        )
    try:  # a newer zerda's manifest is refused (NewerManifestError): OUTPUT is not overwritten on a guess
        manifest = Manifest.loads(data, f"{root}/{MANIFEST_FILE}", fs, root)
        listed = manifest.files  # format 2: its table, read and checked here (the inputs table: on the workers)
    except ManifestError as err:  # edited by hand, or not zerda's
        return Previous(reason=f"full run: the previous {MANIFEST_FILE} is unreadable ({err.why}){_AGAINST_NOTHING}")
    except OSError as err:  # a table of the manifest the storage would not give: nothing decided on a guess
        raise _unreadable(f"{root}/{MANIFEST_FILE}", err) from err
    if listed is None:
        why = "it lists no files: an output of an older zerda"
        return Previous(reason=f"full run: the previous {MANIFEST_FILE} is unreadable ({why}){_AGAINST_NOTHING}")
    entries = {entry["path"]: entry.get("bytes") for entry in listed}
    rows = {entry["path"]: entry.get("rows") for entry in listed}
    footers = {entry["path"]: entry.get("footer") or "" for entry in listed}
    files = list(entries)
    index = [path for path in files if path.startswith(f"{INDEX_DIR}/")]
    checked = files if incremental else index  # a full run reads only the previous index: list only that
    listed = fs.find(root if incremental else f"{root}/{INDEX_DIR}", detail=True)
    present = {posixpath.relpath(path, root): info.get("size") for path, info in listed.items()}
    missing = [path for path in checked if path not in present or _resized(entries[path], present[path])]
    missing += [path for path in files if path.startswith(f"{PARTITION_COLUMN}=") and not _count(rows[path])]
    chunk_files = tuple(
        (path, n, footers[path]) for path, n in rows.items() if path.startswith(f"{PARTITION_COLUMN}=") and _count(n)
    )
    rejects = tuple(fs.unstrip_protocol(f"{root}/{path}") for path in files if path.startswith(f"{REJECTS_DIR}/"))
    return judge_previous(
        manifest, fs.unstrip_protocol(root), index, missing, chunk_files, rejects, fingerprint, incremental
    )


def judge_previous(
    manifest: Manifest,
    root: str,
    index: Sequence[str],
    missing: Sequence[str],
    chunk_files: tuple[tuple[str, int, str], ...],
    rejects: tuple[str, ...],
    fingerprint: str,
    incremental: bool,
) -> Previous:
    """Whether a previous output's rows can be reused, and why: from its manifest, its ``index`` files (relative
    to ``root``, a URL), the files it lists that are ``missing`` (gone or resized), its chunk files and the URLs
    of its reject files. A directory's previous output (:func:`read_previous`) and a table's
    (``pipelines.output.iceberg_incremental``) are judged alike."""
    if any(path in missing for path in index):
        index = []  # changes are then listed against nothing: every chunk added, none removed
    partitions, parts = _index_partitions(index)
    ids = [entry["path"] for entry in manifest.files or () if entry["path"].startswith(f"{IDS_DIR}/")]
    id_partitions, id_parts = _index_partitions(ids)
    carry, reason = _can_carry(manifest, fingerprint, incremental, bool(index) or not chunk_files)
    if carry and index and not partitions:  # an older zerda's index: neither read by source nor says where rows are
        carry, reason = False, f"full run: the previous index is of an older format{_AGAINST_NOTHING}"
    if missing and incremental:
        carry, reason = (
            False,
            (
                f"full run: the previous output is incomplete ({len(missing)} file(s) its manifest lists are gone"
                f" or changed, e.g. {missing[0]})" + ("" if index else _AGAINST_NOTHING)
            ),
        )
    inputs: dict[str, FileReport] = {}
    retry: set[str] = set()
    if carry:
        try:
            fs, _ = url_to_fs(root)
            recorded = {f"{root}/{e['path']}": e["footer"] for e in manifest.files or () if e.get("footer")}
            retry = _chunker_failed(fs, rejects, recorded)
            inputs = _stamped_inputs(manifest.inputs, retry) if not manifest.input_parts else {}
        except (OSError, pa.ArrowException, FooterChanged) as err:  # damaged in place, or another file of its size
            carry, reason = False, f"full run: a previous reject file does not decode ({_why(err)})"
    input_parts = tuple((e["path"], e["bytes"], e["rows"]) for e in manifest.input_parts) if carry else ()
    documents, text = manifest.counts.get("documents_chunked"), manifest.counts.get("text_chars")
    footers = {e["path"]: e["footer"] for e in manifest.files or () if e.get("footer") and read_by_slices(e["path"])}
    return Previous(
        carry,
        reason,
        root,
        partitions,
        parts,
        documents if _count(documents) else 0,
        chunk_files,
        rejects,
        inputs,
        id_partitions,
        id_parts,
        footers,
        text if _count(text) else 0,
        input_parts,
        frozenset(retry) if carry else frozenset(),
    )


def _index_partitions(index: Sequence[str]) -> tuple[int, frozenset[int]]:
    """(partitions, the partitions with a file) of the previous index's files (or id counts'), or (0, {}) when
    they are not all named ``part-J-of-P`` for one P: an index written otherwise cannot be read by source."""
    named = [_PARTITION_NAME.fullmatch(posixpath.basename(path)) for path in index]
    totals = {int(found.group(2)) for found in named if found}
    if not index or None in named or len(totals) != 1:
        return 0, frozenset()
    return totals.pop(), frozenset(int(found.group(1)) for found in named if found)


def _read_bytes(fs: AbstractFileSystem, path: str) -> bytes:
    """The bytes of a file of the previous output. What the filesystem raises but for a missing file (denied,
    an I/O error, a store that fails after its retries) is an OutputError: nothing is decided on a file the
    run could not read, so a run with nothing touched (exit 2) is the answer, and the next one is right."""
    try:
        with fs.open(path, "rb") as f:
            return bytes(f.read())
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as err:
        raise _unreadable(path, err) from err


def _unreadable(path: str, err: OSError) -> OutputError:
    return OutputError(f"cannot read the previous output's {posixpath.basename(path)}: {_why(err)}")


def _why(err: BaseException) -> str:
    return bounded(" ".join(f"{type(err).__name__}: {err}".split()))


def unreadable_carry(error: BaseException) -> str | None:
    """The line naming the previous chunk or index file a run could not read, if that failed the run (the
    words reach the launcher from any runner, inside the worker's traceback): a file changed in place, its
    size the same, or an I/O error that outlasted :func:`_read_table`'s retries. The launcher then runs in
    full, which reads no previous chunk file, and no previous index when that was the file
    (:func:`without_carry`): a scheduled run does not fail every night on one damaged file."""
    found = re.search(f"({UNREADABLE}|{UNREADABLE_INDEX}|{UNREADABLE_INPUTS}): [^\n]*", str(error))
    return without_beam_steps(found.group(0)) if found else None


def without_carry(previous: Previous, why: str) -> Previous:
    """``previous`` for a full run, for ``why``: its index still lists the changes, unless it is what failed."""
    if why.startswith(UNREADABLE_INDEX):
        return replace(
            previous,
            carry=False,
            reason=f"full run: {why}{_AGAINST_NOTHING}",
            inputs={},
            input_parts=(),
            index_partitions=0,
        )
    return replace(previous, carry=False, reason=f"full run: {why}", inputs={}, input_parts=())


def _chunker_failed(fs: AbstractFileSystem, reject_files: Iterable[str], footers: Mapping[str, str]) -> set[str]:
    """The sources of the previous ``chunker_error`` rejects: such an error may be the worker's (a MemoryError),
    not the file's, and a full run tries the document again, so its file is read again, not carried. Each reject
    file, read whole here, must have the footer whose digest the manifest records (``footers``, by URL), if any:
    the rejects of the files not read again are carried from these files."""
    sources: set[str] = set()
    for url in reject_files:
        data = _read_bytes(fs, url)
        if footers.get(url) and footer_digest(io.BytesIO(data)) != footers[url]:
            name = f"{REJECTS_DIR}/{posixpath.basename(url)}"
            raise FooterChanged(f"{name}: its footer is not the one committed: another file put in its place")
        table = pq.read_table(pa.BufferReader(data), columns=["source", "reason"])
        sources.update(table.filter(pc.equal(table.column("reason"), "chunker_error")).column("source").to_pylist())
    return sources


def previous_reports(previous: Previous, part: tuple[str, int, int]) -> list[FileReport]:
    """The reports of one part of the previous inputs table (``(path, bytes, rows)``, read on a worker) of the
    files its run read whole and stamped, but for ``previous.retry``. A part that is not the one committed fails
    the attempt for the launcher to run again in full (:func:`unreadable_carry`)."""
    path, size, rows = part
    fs, root = url_to_fs(previous.root)
    try:
        table = read_manifest_table(fs, root, {"path": path, "bytes": size, "rows": rows}, INPUTS_SCHEMA)
    except ManifestError as err:
        raise PreviousUnreadable(f"{UNREADABLE_INPUTS}: {path} ({err.why})") from err
    return list(_stamped_inputs(table.to_pylist(), previous.retry).values())


def _stamped_inputs(entries: Iterable[Mapping[str, Any]], retry: Container[str] = frozenset()) -> dict[str, FileReport]:
    """The previous run's reports (its manifest's ``inputs`` entries) of the files it read without error and whose
    listing gave a stamp, but for the sources in ``retry``."""
    reports = {}
    for entry in entries:
        if entry.get("error") or entry.get("source") in retry:
            continue
        source, stamp, size, records = (entry.get(key) for key in ("source", "stamp", "bytes", "records"))
        if isinstance(source, str) and isinstance(stamp, str) and stamp and _count(size) and _count(records):
            reports[source] = FileReport(source, size, records, "", stamp)
    return reports


def _count(value: object) -> TypeGuard[int]:
    """Whether a manifest entry's number is a count (not edited into a string, a float or a negative)."""
    return type(value) is int and value >= 0


def _resized(committed: int | None, now: int | None) -> bool:
    """Not the file committed: its size differs from the one the manifest recorded (since zerda 0.2.1)."""
    return committed is not None and now is not None and committed != now


def _can_carry(manifest: Manifest, fingerprint: str, incremental: bool, has_index: bool) -> tuple[bool, str]:
    version = manifest.zerda_version
    if not incremental:
        return False, "full run (not --incremental)"
    if not has_index:
        return False, "full run: the previous output has no document index (written before zerda had one)"
    if version != zerda_core.__version__:
        return False, f"full run: zerda's chunking version changed ({version} -> {zerda_core.__version__})"
    if manifest.fingerprint != fingerprint:
        return False, f"full run: the settings changed (fingerprint {manifest.fingerprint} -> {fingerprint})"
    return True, "incremental: unchanged documents keep their rows from the previous output"


class FooterChanged(ValueError):
    """A previous index or id-count file whose footer is not the one its manifest recorded (a byte changed in
    place: no page CRC covers the footer, and its statistics decide which row groups a slice reads)."""


def _read_table(url: str, columns: list[str] | None = None, filters: Any = None, footer: str = "") -> pa.Table:
    """A Parquet file of the previous output, each page checked against its CRC (zerda writes one: a byte
    changed on disk fails the read, see :func:`unreadable_carry`) and its footer against ``footer`` when given
    (:func:`footer_digest`), tried again after a transient fault (:func:`fault_kind`: an I/O error, a timeout),
    with back-off: one passing hiccup must not turn the run into a full one. A file that decodes wrongly fails
    at once: reading it again gives the same."""

    def read() -> pa.Table:
        with fsspec.open(url, "rb") as f:
            if footer and footer_digest(f) != footer:
                raise FooterChanged("its footer is not the one committed (changed in place)")
            return pq.read_table(f, columns=columns, filters=filters, page_checksum_verification=True)

    for wait in _READ_RETRY_SECONDS:
        try:
            return read()
        except Exception as err:
            if fault_kind(err) != "transient":
                raise
            log.warning("reading %s failed (%s): trying again in %.1f s", posixpath.basename(url), _why(err), wait)
            time.sleep(wait)
    return read()


def read_index(previous: Previous, sources: Iterable[str], columns: Sequence[str] = INDEX_SCHEMA.names) -> pa.Table:
    """The previous index rows of ``sources``: only their partitions' files are opened, and of those only the
    row groups whose statistics may hold them (a partition's file is sorted by source)."""
    wanted: dict[int, list[str]] = defaultdict(list)
    for source in set(sources) if previous.index_partitions else ():
        wanted[partition_of(source, previous.index_partitions)].append(source)
    parts = sorted(wanted.keys() & previous.index_parts)
    return _index_files(previous, parts, columns, lambda part: [("source", "in", sorted(wanted[part]))])


def _index_files(
    previous: Previous,
    parts: Iterable[int],
    columns: Sequence[str],
    filters: Callable[[int], Any] = lambda _: None,
    folder: str = INDEX_DIR,
) -> pa.Table:
    """The rows of the previous index's partitions ``parts`` (``filters(part)`` applied), as one table of
    ``columns``; a file that cannot be read raises :func:`_index_failure`. With ``folder`` ``_ids``: the rows
    of the previous id counts."""
    schema, partitions = (INDEX_SCHEMA, previous.index_partitions)
    if folder == IDS_DIR:
        schema, partitions = (IDS_SCHEMA, previous.id_partitions)
    schema = schema.empty_table().select(list(columns)).schema
    tables = [schema.empty_table()]
    for part in parts:
        path = index_path(part, partitions, folder)
        try:
            found = _read_table(f"{previous.root}/{path}", list(columns), filters(part), previous.footers.get(path, ""))
            tables.append(found.select(list(columns)).cast(schema))
        except (OSError, pa.ArrowException, KeyError, FooterChanged) as err:
            raise _index_failure(path, err) from err
    return pa.concat_tables(tables)


def _index_failure(path: str, error: BaseException) -> Exception:
    """What a failed read of a previous index file raises: damage (a CRC, a column gone) fails the attempt for
    the launcher to run again in full without the index (:func:`unreadable_carry`); a fault of the storage or
    the worker (denied, an I/O error past the retries) fails the run with one line, OUTPUT as it was: a full
    run against no index would list no removed chunk, and downstream would keep them."""
    kind = fault_kind(error)
    if kind == "data":
        return PreviousUnreadable(f"{UNREADABLE_INDEX}: {path} ({_why(error)})")
    return EnvironmentFault(
        f"cannot read the previous output's {path}, not for its content ({kind} fault): {_why(error)}"
    )


def _previous_partition(previous: Previous, folder: str, partition: int, ours: int) -> pa.Table:
    """The previous rows of ``folder`` (``_index``, keyed by source, or ``_ids``, by document id) that fall in
    this run's ``partition`` of ``ours``, from the previous partitions that map onto it (both counts are powers
    of two: one previous file, or a few, filtered by key)."""
    key, theirs, present = ("source", previous.index_partitions, previous.index_parts)
    if folder == IDS_DIR:
        key, theirs, present = ("doc_id", previous.id_partitions, previous.id_parts)
    common = min(theirs, ours)
    parts = [j for j in sorted(present) if j % common == partition % common]
    schema = IDS_SCHEMA if folder == IDS_DIR else INDEX_SCHEMA
    table = _index_files(previous, parts, schema.names, folder=folder)
    if theirs < ours:  # a previous partition is split between several of ours
        keys = table.column(key).unique().to_pylist()
        mine = pa.array([k for k in keys if partition_of(k, ours) == partition], pa.string())
        table = table.filter(pc.is_in(table.column(key), value_set=mine))
    return table
