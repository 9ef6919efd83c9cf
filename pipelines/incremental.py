"""Incremental runs: unchanged documents keep their chunk rows, and downstream learns what changed.

Every run writes a document index, ``OUTPUT/_index/part-*.pq`` (``INDEX_SCHEMA``: source, record, doc id,
a blake2b hash of the text as chunked, the settings fingerprint, the zerda version, chunk count, bucket,
the manifest's character counts, the chunk ids and the chunk file holding the document's rows), the id
counts ``OUTPUT/_ids/part-*.pq`` (``IDS_SCHEMA``: how many documents hold each id, partitioned by id, for the
manifest's duplicate ids) and ``OUTPUT/_changes/part-*.pq``: the chunk ids this run added and removed against
the previous committed output (``CHANGES_SCHEMA``).

The index is partitioned by source (:func:`partition_of`): ``_index/part-J-of-P.pq`` holds the documents of
the sources in partition J of P, sorted by source, so one source's rows are a few row groups of one file.

With ``--incremental``, :func:`read_previous` (at launch, before anything is written) decides from the
previous output's ``_SUCCESS``, manifest and index whether its rows can be reused: the same settings
fingerprint and zerda version, else the run is a full one and says why. Then::

    records ─► Classify (the previous index slice of each source met) ─┬─► unchanged: rows stay; totals
                                                                       └─► new or changed: ChunkDocuments ─►
                                          WriteChunks ─► files, and an index row per document naming its file
    partitions, unread sources ┐
    hashes in batches, rows ───┴─► CoGroupByKey per partition ─► ComparePartition (reads that partition of the
          previous index) ─► its index file, change rows and counts, (chunk file, key) of each row leaving its file
    leaving rows ─► GroupByKey per chunk file ─► CarryRows: that file without them, under its own name
    previous chunk files ─► KeepUntouched: the others, kept where they are, unread
    id partitions, ids changed ─► CoGroupByKey per id partition ─► CountIds (adds them to that partition's
          previous counts) ─► its id counts file, the duplicated ids

An input file listed with the stamp the previous run recorded in its manifest's ``inputs`` (path, size,
times and inode or ETag: ``pipelines.input.expand.file_stamp``) is not read at all (:meth:`Previous.unchanged`):
``_CarryFiles`` gives, from the previous index and rejects, its documents' totals (one element a file), its
rejects and its previous report; its index rows are carried by its partition's comparison, and its ids are in
the previous id counts: only the ids of the sources read, before and now, are sent to be counted.

A document is keyed on (source, record, doc id): two copies of one id in different files stay distinct.
Changes are found per (source, doc id), all the documents that can share a chunk id. What is shuffled is
this run's keys, hashes and chunk ids, never texts or previous index rows; a worker holds a few sources'
slices of the previous index, a comparing task one partition (about ``_DOCUMENTS_PER_PARTITION`` documents).
The previous files are only read, and stay committed and readable until the commit replaces the dataset,
so a failed or killed run leaves them whole.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import posixpath
import re
import time
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import zip_longest
from typing import Any, NamedTuple, TypeGuard

import apache_beam as beam
import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

import zerda_core
from pipelines.chunking import ChunkDocuments, summarise
from pipelines.errors import EnvironmentFault, ManifestError, OutputError, without_beam_steps
from pipelines.input.context import source_name
from pipelines.input.expand import InputFile
from pipelines.input.listing import Listed, listing_folder
from pipelines.input.source import fault_kind
from pipelines.names import REJECTS
from pipelines.output.build_manifest import DUPLICATE_EXAMPLES, add_buckets
from pipelines.output.layout import (
    CHANGES_DIR,
    CHUNK_SUFFIX,
    IDS_DIR,
    INDEX_DIR,
    MANIFEST_FILE,
    PARTITION_COLUMN,
    REJECT_SUFFIX,
    REJECTS_DIR,
    SUCCESS_FILE,
)
from pipelines.output.manifest import Manifest
from pipelines.output.ownership import staged_as
from pipelines.output.schema import CHANGES_SCHEMA, CHUNK_SCHEMA, IDS_SCHEMA, INDEX_SCHEMA, REJECT_SCHEMA
from pipelines.output.write import (
    DOCUMENTS,
    Describe,
    EmptyFileIfNone,
    StagedFile,
    WriteDescribedChunks,
    WriteRows,
    absolute_url,
    stage_table,
)
from pipelines.records import FileReport, Reject, SourceRecord, content_hash
from pipelines.redact import bounded
from pipelines.settings import OutputSettings

log = logging.getLogger("zerda")

_TO_CHUNK, _HASH, _TOTALS = "to_chunk", "hash", "totals"
_CHANGES, _FACTS, _INDEX, _DROPPED, _IDS, _DUPLICATES = "changes", "facts", "index", "dropped", "ids", "duplicates"
_SUMMARY_COLUMNS = ("chars", "text_chars", "overlap_chars")  # with chunk_count: a document's manifest summary
_COUNTED_COLUMNS = ("chunk_count", *_SUMMARY_COLUMNS)  # summed by bucket: an unread file's manifest totals
_READ_RETRY_SECONDS = (0.5, 2.0, 8.0)  # the waits before each new attempt at a previous file: 4 attempts in all
_SEP = "\x00"  # joins the parts of a document key; never in a path and unlikely in an id
_AGAINST_NOTHING = "; without its index every chunk is listed as added"
UNREADABLE = "a previous chunk file cannot be read"  # what fails a carry (see :func:`unreadable_carry`)
UNREADABLE_INDEX = "a previous index file cannot be read"  # the same of the index: the rerun lists no removal
_PARTITION_NAME = re.compile(r"part-(\d{5,})-of-(\d{5,})\.pq")  # an index file: one partition of the documents
_DOCUMENTS_PER_PARTITION = 50_000  # index rows a partition is planned to hold: what one task compares at once
MAX_INDEX_PARTITIONS = 4096
_BYTES_PER_DOCUMENT = 4096  # a first run plans its index from the bytes it reads: documents of about 4 KB
_SLICES_HELD = 8  # sources whose previous index rows a classifying worker keeps (records come file by file)
_INDEX_ROW_GROUP = 2048  # rows per row group of an index file: a source's slice is read by its statistics
_HASH_BATCH = 4096  # documents' hashes per element sent to a partition's comparison


def document_key(source: str, record: int, doc_id: str) -> str:
    """One string per document: source and record as well as the id, so duplicate ids stay apart."""
    return f"{source}{_SEP}{record}{_SEP}{doc_id}"


def id_key(source: str, doc_id: str) -> str:
    """The documents of one id in one source: all that can share a chunk id (it hashes source and id)."""
    return f"{source}{_SEP}{doc_id}"


def partition_of(source: str, partitions: int) -> int:
    """The index partition of a source's documents: a stable hash (the same in every process and run)."""
    digest = hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def index_partitions(documents: int) -> int:
    """How many partitions an index of about ``documents`` rows has: a power of two (so that an index read
    with another number maps each partition onto few), about ``_DOCUMENTS_PER_PARTITION`` rows each."""
    wanted = max(1, -(-documents // _DOCUMENTS_PER_PARTITION))
    return min(MAX_INDEX_PARTITIONS, 1 << (wanted - 1).bit_length())


def planned_partitions(previous: Previous, files: Sequence[InputFile]) -> int:
    """This run's index partitions: from the previous run's documents, else from the bytes to read."""
    if previous.documents:
        return index_partitions(previous.documents)
    return index_partitions(sum(file.size or 0 for file in files) // _BYTES_PER_DOCUMENT)


def index_path(partition: int, partitions: int, folder: str = INDEX_DIR) -> str:
    """An index file's path relative to OUTPUT: ``_index/part-00003-of-00016.pq`` (``_ids/...`` for the id
    counts, partitioned alike, by document id)."""
    return f"{folder}/part-{partition:05d}-of-{partitions:05d}{REJECT_SUFFIX}"


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
    chunk_files: tuple[tuple[str, int], ...] = ()  # (path, rows) of each previous chunk file
    reject_files: tuple[str, ...] = ()
    inputs: Mapping[str, FileReport] = field(default_factory=dict)  # source -> its report, if read whole and stamped
    id_partitions: int = 0  # how many partitions the previous id counts (``_ids/``) have (0: none, an older zerda)
    id_parts: frozenset[int] = frozenset()

    @property
    def counts_ids(self) -> bool:
        """Whether the run counts duplicate ids from the previous id counts and what changed, not from every id."""
        return self.carry and self.id_partitions > 0

    def unchanged(self, files: Sequence[InputFile]) -> list[FileReport]:
        """The previous reports of the ``files`` that need not be read: rows carried, stamps the same as before.

        Rows are carried by source, so a file whose source another file shares (redaction can make two paths
        one: ``Signature=v1.jsonl``, ``Signature=v2.jsonl``) is always read: carrying would carry both.
        """
        sources = Counter(source_name(file.url) for file in files)
        reports = [self.inputs.get(source_name(file.url)) for file in files] if self.carry else []
        return [
            r
            for r, file in zip(reports, files, strict=False)
            if r is not None and file.stamp == r.stamp and sources[r.source] == 1
        ]


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
        listed, _ = manifest.files, manifest.inputs  # format 2: its tables, read and checked here
    except ManifestError as err:  # edited by hand, or not zerda's
        return Previous(reason=f"full run: the previous {MANIFEST_FILE} is unreadable ({err.why}){_AGAINST_NOTHING}")
    except OSError as err:  # a table of the manifest the storage would not give: nothing decided on a guess
        raise _unreadable(f"{root}/{MANIFEST_FILE}", err) from err
    if listed is None:
        why = "it lists no files: an output of an older zerda"
        return Previous(reason=f"full run: the previous {MANIFEST_FILE} is unreadable ({why}){_AGAINST_NOTHING}")
    entries = {entry["path"]: entry.get("bytes") for entry in listed}
    rows = {entry["path"]: entry.get("rows") for entry in listed}
    files = list(entries)
    index = [path for path in files if path.startswith(f"{INDEX_DIR}/")]
    checked = files if incremental else index  # a full run reads only the previous index: list only that
    listed = fs.find(root if incremental else f"{root}/{INDEX_DIR}", detail=True)
    present = {posixpath.relpath(path, root): info.get("size") for path, info in listed.items()}
    missing = [path for path in checked if path not in present or _resized(entries[path], present[path])]
    missing += [path for path in files if path.startswith(f"{PARTITION_COLUMN}=") and not _count(rows[path])]
    chunk_files = tuple((path, n) for path, n in rows.items() if path.startswith(f"{PARTITION_COLUMN}=") and _count(n))
    rejects = tuple(fs.unstrip_protocol(f"{root}/{path}") for path in files if path.startswith(f"{REJECTS_DIR}/"))
    return judge_previous(
        manifest, fs.unstrip_protocol(root), index, missing, chunk_files, rejects, fingerprint, incremental
    )


def judge_previous(
    manifest: Manifest,
    root: str,
    index: Sequence[str],
    missing: Sequence[str],
    chunk_files: tuple[tuple[str, int], ...],
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
    if carry:
        try:
            fs, _ = url_to_fs(root)
            inputs = _stamped_inputs(manifest.inputs, _chunker_failed(fs, rejects))
        except (OSError, pa.ArrowException) as err:  # read whole, yet no Parquet: damaged in place, its size kept
            carry, reason = False, f"full run: a previous reject file does not decode ({_why(err)})"
    documents = manifest.counts.get("documents_chunked")
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
    found = re.search(f"({UNREADABLE}|{UNREADABLE_INDEX}): [^\n]*", str(error))
    return without_beam_steps(found.group(0)) if found else None


def without_carry(previous: Previous, why: str) -> Previous:
    """``previous`` for a full run, for ``why``: its index still lists the changes, unless it is what failed."""
    if why.startswith(UNREADABLE_INDEX):
        return replace(
            previous, carry=False, reason=f"full run: {why}{_AGAINST_NOTHING}", inputs={}, index_partitions=0
        )
    return replace(previous, carry=False, reason=f"full run: {why}", inputs={})


def _chunker_failed(fs: AbstractFileSystem, reject_files: Iterable[str]) -> set[str]:
    """The sources of the previous ``chunker_error`` rejects: such an error may be the worker's (a MemoryError),
    not the file's, and a full run tries the document again, so its file is read again, not carried."""
    sources: set[str] = set()
    for url in reject_files:
        table = pq.read_table(pa.BufferReader(_read_bytes(fs, url)), columns=["source", "reason"])
        sources.update(table.filter(pc.equal(table.column("reason"), "chunker_error")).column("source").to_pylist())
    return sources


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


def _read_table(url: str, columns: list[str] | None = None, filters: Any = None) -> pa.Table:
    """A Parquet file of the previous output, each page checked against its CRC (zerda writes one: a byte
    changed on disk fails the read, see :func:`unreadable_carry`), tried again after a transient fault
    (:func:`fault_kind`: an I/O error, a timeout), with back-off: one passing hiccup must not turn the run into
    a full one. A file that decodes wrongly fails at once: reading it again gives the same."""

    def read() -> pa.Table:
        with fsspec.open(url, "rb") as f:
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


def document_keys(table: pa.Table) -> pa.Array:
    """The document keys of a table with source, record and doc_id columns (see :func:`document_key`)."""
    return pc.binary_join_element_wise(
        table.column("source"), pc.cast(table.column("record"), pa.string()), table.column("doc_id"), _SEP
    )


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
            found = _read_table(f"{previous.root}/{path}", list(columns), filters(part))
            tables.append(found.select(list(columns)).cast(schema))
        except (OSError, pa.ArrowException, KeyError) as err:
            raise _index_failure(path, err) from err
    return pa.concat_tables(tables)


def _index_failure(path: str, error: BaseException) -> Exception:
    """What a failed read of a previous index file raises: damage (a CRC, a column gone) fails the attempt for
    the launcher to run again in full without the index (:func:`unreadable_carry`); a fault of the storage or
    the worker (denied, an I/O error past the retries) fails the run with one line, OUTPUT as it was: a full
    run against no index would list no removed chunk, and downstream would keep them."""
    kind = fault_kind(error)
    if kind == "data":
        return RuntimeError(f"{UNREADABLE_INDEX}: {path} ({_why(error)})")
    return EnvironmentFault(
        f"cannot read the previous output's {path}, not for its content ({kind} fault): {_why(error)}"
    )


class _Classify(beam.DoFn):
    """Each SourceRecord -> unchanged (its rows stay where they are) or to be chunked; the manifest's totals of
    the unchanged ones, from the index, one element a bundle (``(documents, bucket totals)``), not one a document.

    A worker holds the previous index rows of the last few sources it met (records come file by file), read
    by source from the index (:func:`read_index`): its memory follows the largest file, not the corpus.
    """

    _COLUMNS = ("content_hash", PARTITION_COLUMN, "chunk_count", *_SUMMARY_COLUMNS)

    def __init__(self, previous: Previous, partitions: int) -> None:
        self._previous = previous
        self._partitions = partitions

    def setup(self) -> None:
        self._slices: OrderedDict[str, dict[str, tuple[Any, ...]]] = OrderedDict()

    def start_bundle(self) -> None:
        self._kept = 0  # unchanged documents in this bundle, and their totals by bucket
        self._buckets: dict[int, list[int]] = {}
        self._hashes: dict[int, list[tuple[str, tuple[int, str, str]]]] = defaultdict(list)  # by index partition

    def finish_bundle(self) -> Iterator[TaggedOutput]:
        if self._kept:
            yield TaggedOutput(_TOTALS, GlobalWindows.windowed_value_at_end_of_window((self._kept, self._buckets)))
        for partition, batch in self._hashes.items():
            yield TaggedOutput(_HASH, GlobalWindows.windowed_value_at_end_of_window((partition, batch)))

    def _hash(self, record: SourceRecord, kind: str, digest: str) -> Iterator[TaggedOutput]:
        """Note a document's hash for its partition's comparison; a partition's batch goes when it is full: one
        element a batch of documents, not one a document (the runner holds the shuffle's elements)."""
        partition = partition_of(record.source, self._partitions)
        batch = self._hashes[partition]
        batch.append((id_key(record.source, record.doc_id), (record.record, kind, digest)))
        if len(batch) >= _HASH_BATCH:
            yield TaggedOutput(_HASH, (partition, self._hashes.pop(partition)))

    def _known(self, source: str) -> dict[str, tuple[Any, ...]]:
        known = self._slices.get(source)
        if known is not None:
            self._slices.move_to_end(source)
            return known
        known = {}
        if self._previous.carry:
            table = read_index(self._previous, [source], ["source", "record", "doc_id", *self._COLUMNS])
            values = zip(*(table.column(name).to_pylist() for name in self._COLUMNS), strict=True)
            known = dict(zip(document_keys(table).to_pylist(), values, strict=True))
        self._slices[source] = known
        if len(self._slices) > _SLICES_HELD:
            self._slices.popitem(last=False)
        return known

    def process(self, record: SourceRecord) -> Iterator[Any]:
        key = document_key(record.source, record.record, record.doc_id)
        digest = content_hash(record.text)
        known = self._known(record.source).get(key)
        if known is not None and known[0] == digest:
            _, bucket, *numbers = known
            self._kept += 1
            add_buckets(self._buckets, {bucket: numbers})
            yield from self._hash(record, "kept", digest)
            return
        yield from self._hash(record, "chunked", digest)
        yield record


class _CarryFiles(beam.DoFn):
    """A batch of previous reports of input files unchanged since (not read) -> those reports, their previous
    rejects, and each file's totals for the manifest, ``(documents, {bucket: [chunks, characters, text,
    overlap]})``, summed from its index slice: one element a file, not one a document. Nothing of a file that
    did not change can change. Their index rows are carried by the comparison (:class:`_ComparePartition`),
    which counts them unchanged; their ids are counted in the previous id counts (:class:`_CountIds`).

    Each worker holds the previous rejects, loaded on the first batch, and a batch's index rows.
    """

    def __init__(self, previous: Previous) -> None:
        self._previous = previous

    def setup(self) -> None:
        self._rejects: dict[str, list[Reject]] | None = None

    def _load(self) -> dict[str, list[Reject]]:
        rejects: dict[str, list[Reject]] = {}
        for url in self._previous.reject_files:
            for reject in _read_table(url, REJECT_SCHEMA.names).to_pylist():
                rejects.setdefault(reject["source"], []).append(Reject(**reject))
        return rejects

    def process(self, reports: Sequence[FileReport]) -> Iterator[Any]:
        if self._rejects is None:
            self._rejects = self._load()
        columns = ["source", PARTITION_COLUMN, *_COUNTED_COLUMNS]
        index = read_index(self._previous, [r.source for r in reports], columns).sort_by("source")
        slices, start = {}, 0
        for run in pc.value_counts(index.column("source")).to_pylist():  # in order of first appearance: sorted
            slices[run["values"]] = (start, run["counts"])
            start += run["counts"]
        for report in reports:
            rows = index.slice(*slices.get(report.source, (0, 0)))
            if rows.num_rows:
                yield TaggedOutput(_TOTALS, (rows.num_rows, _bucket_totals(rows)))
            rejects = self._rejects.get(report.source, [])
            for reject in rejects:
                yield TaggedOutput(REJECTS, reject)
            yield replace(report, records=rows.num_rows + len(rejects))  # each record a document or a reject


def _bucket_totals(rows: pa.Table) -> dict[int, list[int]]:
    """Index rows summed by bucket, as the manifest adds documents: ``{bucket: [chunks, characters, text,
    overlap]}``."""
    sums = rows.group_by(PARTITION_COLUMN).aggregate([(name, "sum") for name in _COUNTED_COLUMNS])
    columns = [sums.column(f"{name}_sum").to_pylist() for name in _COUNTED_COLUMNS]
    buckets = sums.column(PARTITION_COLUMN).to_pylist()
    return {bucket: list(numbers) for bucket, *numbers in zip(buckets, *columns, strict=True)}


def _encoded_batch(batch: tuple[FileReport, ...]) -> list[dict[str, Any]]:
    return [asdict(report) for report in batch]


def _decoded_batch(reports: list[dict[str, Any]]) -> tuple[FileReport, ...]:
    return tuple(FileReport(**report) for report in reports)


def _batches(reports: Sequence[FileReport], max_rows: int) -> list[tuple[FileReport, ...]]:
    """The reports in batches of at most ``max_rows`` records (or one file): a batch's index rows are read at once."""
    batches: list[tuple[FileReport, ...]] = []
    batch: list[FileReport] = []
    rows = 0
    for report in reports:
        if batch and rows + report.records > max_rows:
            batches.append(tuple(batch))
            batch, rows = [], 0
        batch.append(report)
        rows += report.records
    return [*batches, tuple(batch)] if batch else batches


class _CarryRows(beam.DoFn):
    """(previous chunk file, the documents whose rows leave it) -> the file without those rows, staged to replace
    it under its own name, so the index rows pointing at it stay right; nothing when no row is left. Only the
    files that hold a changed or removed document are read: the others stay as they are (:class:`_KeepUntouched`)."""

    def __init__(self, root: str, output: str, run_id: str, compression: str) -> None:
        self._root = root
        self._output = output
        self._run_id = run_id
        self._compression = compression

    def process(self, element: tuple[str, Iterable[tuple[str, int]]]) -> Iterator[StagedFile]:
        path, leaving = element
        table = rows_staying(f"{self._root}/{path}", path, leaving, CHUNK_SCHEMA)
        if table.num_rows:
            directory = posixpath.dirname(path)
            staged = stage_table(self._output, self._run_id, directory, table, CHUNK_SUFFIX, self._compression)
            yield replace(staged, final=path)


def rows_staying(url: str, path: str, leaving: Iterable[tuple[str, int]], schema: pa.Schema) -> pa.Table:
    """The rows of the previous chunk file at ``url`` (``path`` in the output) but those of the documents
    ``leaving`` it, ``(document key, rows)`` each, as ``schema``. A file that cannot be read fails the run for
    the launcher to run again in full (:func:`unreadable_carry`); one that does not hold the rows the index
    says it does fails it outright."""
    dropped = dict(leaving)
    try:
        table = _read_table(url)
        stay = pc.invert(pc.is_in(document_keys(table), value_set=pa.array(list(dropped))))
        table = table.select(schema.names).cast(schema).filter(stay)
    except (OSError, pa.ArrowException) as err:  # pyarrow's decoding errors are OSErrors too
        raise RuntimeError(f"{UNREADABLE}: {path} ({_why(err)})") from err
    gone = len(stay) - table.num_rows
    if gone != sum(dropped.values()):
        raise RuntimeError(
            f"previous output changed under the run: {gone} rows of changed or removed documents in {path},"
            f" the index says {sum(dropped.values())}"
        )
    return table


class _KeepUntouched(beam.DoFn):
    """(path, rows) of a previous chunk file -> the file kept where it is, unless a changed or removed document
    has rows in it (``touched``: :class:`_CarryRows` replaces it). Nothing is read but its footer."""

    def __init__(self, root: str) -> None:
        self._root = root

    def process(self, entry: tuple[str, int], touched: Container[str]) -> Iterator[StagedFile]:
        path, rows = entry
        if path not in touched:
            source_fs, source = url_to_fs(f"{self._root}/{path}")
            written_as = staged_as(source_fs, source)  # the path the previous run staged it as, in its footer
            yield StagedFile(posixpath.dirname(path), path, rows, written_as=written_as or path, kept=True)


def _index_row(
    rows: list[dict[str, Any]], chunk_file: str, fingerprint: str, partitions: int
) -> tuple[int, tuple[str, dict[str, Any]]]:
    """A chunked document's index row from its chunk rows and the file holding them, keyed for the comparison
    (its index partition, then its id in its source); the hash of its text is added where they meet."""
    first = rows[0]
    _, totals = summarise(rows)
    bucket = first[PARTITION_COLUMN]
    chunks, chars, text_chars, overlap = totals[bucket]
    return partition_of(first["source"], partitions), (
        id_key(first["source"], first["doc_id"]),
        {
            "source": first["source"],
            "record": first["record"],
            "doc_id": first["doc_id"],
            "content_hash": "",
            "config_fingerprint": fingerprint,
            "zerda_version": zerda_core.__version__,
            "chunk_count": chunks,
            PARTITION_COLUMN: bucket,
            "chars": chars,
            "text_chars": text_chars,
            "overlap_chars": overlap,
            "chunk_ids": _packed([row["chunk_id"] for row in sorted(rows, key=lambda row: row["chunk_index"])]),
            "chunk_file": chunk_file,
        },
    )


_DIGEST = re.compile(r"[0-9a-f]{32}")  # a chunk id: a 16-byte blake2b digest in hex (DocumentChunk.chunk_id)


def _packed(ids: list[str]) -> bytes | list[str]:
    """A document's chunk ids as one string of 16-byte digests, for the shuffle to the comparison: a third of
    the bytes Beam buffers (a DirectRunner holds a shuffle's data in memory), and one object per document,
    not one per chunk. Ids of another form (an index edited by hand) stay a list."""
    if all(_DIGEST.fullmatch(chunk_id) for chunk_id in ids):
        return bytes.fromhex("".join(ids))
    return ids


def _unpacked(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with its chunk ids a list again (see :func:`_packed`)."""
    ids = row["chunk_ids"]
    if isinstance(ids, bytes):
        ids = [ids[start : start + 16].hex() for start in range(0, len(ids), 16)]
    return {**row, "chunk_ids": ids}


class _PartitionTask(beam.DoFn):
    """A task of one partition of this run's ``partitions`` that reads its previous rows and stages its file."""

    def __init__(self, previous: Previous, partitions: int, output: str, run_id: str, compression: str) -> None:
        self._previous = previous
        self._partitions = partitions
        self._output = output
        self._run_id = run_id
        self._compression = compression


class _ComparePartition(_PartitionTask):
    """One index partition, before and now -> its index file, change rows, change counts, and (when rows are
    carried) the previous rows that leave their chunk file.

    The partition's previous rows are read here, from the previous index (never shuffled); this run's hashes
    and new index rows come grouped by partition. The rows of the sources not read (unchanged files) are
    carried as they are and count as unchanged; the others are compared per (source, doc id) (:func:`_compare`).
    A task holds one partition: about ``_DOCUMENTS_PER_PARTITION`` documents.
    """

    def process(self, element: tuple[int, Mapping[str, Iterable[Any]]]) -> Iterator[Any]:
        partition, grouped = element
        before = self._before(partition)
        unread = pc.is_in(before.column("source"), value_set=pa.array(sorted(set(grouped["unread"])), pa.string()))
        carried = before.filter(unread)
        groups: dict[str, dict[str, list[Any]]] = defaultdict(lambda: {"previous": [], "hash": [], "rows": []})
        read_before: Counter = Counter()  # the previous documents of the sources read (or gone), by id
        for row in before.filter(pc.invert(unread)).to_pylist():
            groups[id_key(row["source"], row["doc_id"])]["previous"].append(row)
            read_before[row["doc_id"]] += 1
        for batch in grouped["hash"]:
            for key, value in batch:
                groups[key]["hash"].append(value)
        for key, value in grouped["rows"]:
            groups[key]["rows"].append(value)
        rows = []
        for key in sorted(groups):
            for out in _compare((key, groups.pop(key)), self._previous.carry):
                if isinstance(out, TaggedOutput):
                    yield out
                else:
                    rows.extend(out)
        if carried.num_rows:
            yield TaggedOutput(_FACTS, Counter({"documents_unchanged": carried.num_rows}))
        index = pa.concat_tables([pa.Table.from_pylist(rows, schema=INDEX_SCHEMA), carried])
        if self._previous.counts_ids:  # the previous counts hold every previous document: only the change is sent
            ids = Counter(row["doc_id"] for row in rows)
            ids.subtract(read_before)
        else:
            ids = Counter(index.column("doc_id").to_pylist())
        yield from _by_id_partition(ids, self._partitions)
        if index.num_rows:
            index = index.sort_by([("source", "ascending"), ("record", "ascending")])
            staged = stage_table(
                self._output, self._run_id, INDEX_DIR, index, REJECT_SUFFIX, self._compression, _INDEX_ROW_GROUP
            )
            yield replace(staged, final=index_path(partition, self._partitions))

    def _before(self, partition: int) -> pa.Table:
        """The previous index rows of this run's ``partition``."""
        if not self._previous.index_partitions:
            return INDEX_SCHEMA.empty_table()
        return _previous_partition(self._previous, INDEX_DIR, partition, self._partitions)


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


def _by_id_partition(ids: Mapping[str, int], partitions: int) -> Iterator[TaggedOutput]:
    """Documents per id (or their change since the previous run), one element per id partition they fall in."""
    parts: dict[int, dict[str, int]] = defaultdict(dict)
    for doc_id, n in ids.items():
        if n:
            parts[partition_of(doc_id, partitions)][doc_id] = n
    for part, counts in parts.items():
        yield TaggedOutput(_IDS, (part, counts))


class _CountIds(_PartitionTask):
    """One id partition: its previous counts (when the run counts from them) plus this run's changes -> its
    ``_ids`` file and the duplicated ids (held by two documents or more, in any sources) as ``(count, examples)``.

    An unchanged file's documents are counted in the previous counts already: its ids are never sent. A task
    holds one partition's ids (about ``_DOCUMENTS_PER_PARTITION``).
    """

    def process(self, element: tuple[int, Mapping[str, Iterable[Any]]]) -> Iterator[Any]:
        partition, grouped = element
        counts: Counter = Counter()
        if self._previous.counts_ids:
            before = _previous_partition(self._previous, IDS_DIR, partition, self._partitions)
            counts.update(dict(zip(*(before.column(name).to_pylist() for name in IDS_SCHEMA.names), strict=True)))
        for change in grouped["change"]:
            counts.update(change)
        if any(n < 0 for n in counts.values()):  # previous counts that do not match the previous index
            path = index_path(partition, self._partitions, IDS_DIR)
            raise RuntimeError(f"{UNREADABLE_INDEX}: {path} (its id counts do not match the index)")
        ids = sorted(doc_id for doc_id, n in counts.items() if n)
        duplicated = [doc_id for doc_id in ids if counts[doc_id] > 1]
        if duplicated:
            yield TaggedOutput(_DUPLICATES, (len(duplicated), duplicated[:DUPLICATE_EXAMPLES]))
        if ids:
            table = pa.table([ids, [counts[doc_id] for doc_id in ids]], schema=IDS_SCHEMA)
            staged = stage_table(self._output, self._run_id, IDS_DIR, table, REJECT_SUFFIX, self._compression)
            yield replace(staged, final=index_path(partition, self._partitions, IDS_DIR))


def _compare(element: tuple[str, Mapping[str, Iterable[Any]]], carry: bool) -> Iterator[Any]:
    """The documents of one id in one source, before and now -> their index rows, change rows and counts, and
    (when rows are carried) the previous rows that leave their chunk file: ``(file, (document key, rows))``.

    Chunk ids are compared over the whole group, not document by document: two copies of one text under
    one id share chunk ids, so removing one copy removes no chunk the other still holds; and a document
    whose record moved (a JSONL line shifted by a deletion above it) keeps its chunk ids, so downstream is
    not asked to re-embed it.
    """
    _, grouped = element
    before = {row["record"]: _unpacked(row) for row in grouped["previous"]}
    hashed = {record: (kind, digest) for record, kind, digest in grouped["hash"]}
    rows = {row["record"]: _unpacked(row) for row in grouped["rows"]}
    now: dict[int, dict[str, Any]] = {}
    for record, (kind, digest) in hashed.items():
        if kind == "kept":  # only a document found in the previous index is kept
            now[record] = before[record]
        elif record in rows:
            now[record] = {**rows[record], "content_hash": digest}
    for record in sorted(now):
        yield [now[record]]
    if carry:  # every previous document not kept as it was: changed, moved to another record, or removed
        for record, row in before.items():
            if now.get(record) is not row:
                key = document_key(row["source"], record, row["doc_id"])
                yield TaggedOutput(_DROPPED, (row["chunk_file"], (key, row["chunk_count"])))
    for old, new in _paired(before, now):
        kind = "removed" if new is None else "added" if old is None else "unchanged" if _same(old, new) else "changed"
        yield TaggedOutput(_FACTS, Counter({f"documents_{kind}": 1}))
    old_holder, new_holder = _holders(before), _holders(now)
    changes = []
    for change, ids, holder in (
        ("added", new_holder.keys() - old_holder.keys(), new_holder),
        ("removed", old_holder.keys() - new_holder.keys(), old_holder),
    ):
        for chunk_id in sorted(ids):
            document = holder[chunk_id]
            where = {"doc_id": document["doc_id"], "source": document["source"], "record": document["record"]}
            changes.append({"chunk_id": chunk_id, **where, "change": change})
        if ids:
            yield TaggedOutput(_FACTS, Counter({f"chunks_{change}": len(ids)}))
    if changes:
        yield TaggedOutput(_CHANGES, changes)


Document = Mapping[str, Any]


def _paired(
    before: Mapping[int, Document], now: Mapping[int, Document]
) -> Iterator[tuple[Document | None, Document | None]]:
    """The documents of one id in one source, before and now, paired by identity, not by line or row number:
    a document whose line moved (a deletion above it) is the same document. Copies of one id pair by text
    first, the rest in record order; what is left unpaired was removed or added."""
    old = dict(before)
    by_text: dict[str, list[int]] = defaultdict(list)
    for record in sorted(old):
        by_text[old[record]["content_hash"]].append(record)
    new: dict[int, Document] = {}
    for record in sorted(now):
        same_text = by_text.get(now[record]["content_hash"])
        if same_text:
            yield old.pop(same_text.pop(0)), now[record]
        else:
            new[record] = now[record]
    for old_record, new_record in zip_longest(sorted(old), sorted(new)):
        yield old.get(old_record), new.get(new_record)


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return (old["content_hash"], old["chunk_ids"]) == (new["content_hash"], new["chunk_ids"])


def _holders(documents: Mapping[int, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each chunk id -> the first document (by record) that holds it."""
    holders: dict[str, Mapping[str, Any]] = {}
    for record in sorted(documents, reverse=True):
        holders.update(dict.fromkeys(documents[record]["chunk_ids"], documents[record]))
    return holders


def _add_changes(manifest: dict[str, Any], facts: Counter, previous: Previous, files_unchanged: int) -> dict[str, Any]:
    """The manifest with a ``changes`` section: the run's mode and why, documents and chunks changed, and
    how many input files were not read (unchanged since the previous output)."""
    counts = {
        name: facts.get(name, 0)
        for name in (
            "documents_added",
            "documents_changed",
            "documents_removed",
            "documents_unchanged",
            "chunks_added",
            "chunks_removed",
        )
    }
    changes = {"incremental": previous.carry, "reason": previous.reason, **counts, "files_unchanged": files_unchanged}
    return {**manifest, "changes": changes}


class IncrementalChunks(NamedTuple):
    """What :class:`ChunkIncrementally` gives the job."""

    chunk_files: beam.PCollection  # StagedFiles: of the chunked documents, the rewritten and the kept previous files
    rejects: beam.PCollection  # of the chunked documents and of the files not read
    reports: beam.PCollection | None  # FileReports of the files not read (unchanged), from the previous manifest
    summaries: beam.PCollection  # of every document chunked
    totals: beam.PCollection  # (documents, bucket totals): of a bundle's unchanged documents, of each file not read
    duplicates: beam.PCollection  # (duplicated ids, examples) of each id partition that has some
    index_files: beam.PCollection  # StagedFiles of the index: one a partition that holds documents
    id_files: beam.PCollection  # StagedFiles of the id counts: one an id partition that holds documents
    change_files: beam.PCollection
    facts: beam.PCollection  # one Counter of the change counts, for :meth:`ChunkIncrementally.annotate`


class ChunkIncrementally(beam.PTransform):
    """SourceRecords -> :class:`IncrementalChunks`: ``ChunkDocuments`` on what changed, written; the rest kept."""

    def __init__(
        self,
        chunk_documents: ChunkDocuments,
        previous: Previous,
        unchanged: Sequence[FileReport] = (),
        *,
        output: str,
        run_id: str,
        settings: OutputSettings,
        fingerprint: str,
        partitions: int = 1,
    ) -> None:
        super().__init__()
        self._partitions = partitions
        self._chunk_documents = chunk_documents
        self._previous = previous
        self._unchanged = list(unchanged)
        self._output = output
        self._run_id = run_id
        self._settings = settings
        self._fingerprint = fingerprint

    def expand(self, records: beam.PCollection) -> IncrementalChunks:
        output = absolute_url(self._output)
        compression, max_rows = self._settings.compression, self._settings.max_rows_per_file
        partitions = self._partitions
        previous = replace(self._previous, inputs={}, chunk_files=())  # what the workers need of it: no file list
        split = records | "Classify" >> beam.ParDo(_Classify(previous, partitions)).with_outputs(
            _TOTALS, _HASH, main=_TO_CHUNK
        )
        chunked = split[_TO_CHUNK] | "ChunkDocuments" >> self._chunk_documents
        describe = functools.partial(_index_row, fingerprint=self._fingerprint, partitions=partitions)
        written = chunked.chunks | "WriteChunks" >> self._write_chunks(describe)
        rejects, reports, totals = chunked.rejects, None, split[_TOTALS]
        if self._unchanged:  # files not read: their totals and rejects join those of the records read
            batches = _batches(self._unchanged, max_rows)
            files = (
                records.pipeline
                | "UnchangedFiles" >> Listed(batches, self._listing("unchanged"), _encoded_batch, _decoded_batch)
                | "SpreadUnchanged" >> beam.Reshuffle()
                | "CarryFiles" >> beam.ParDo(_CarryFiles(previous)).with_outputs(_TOTALS, REJECTS, main="reports")
            )
            totals = (totals, files[_TOTALS]) | "AllTotals" >> beam.Flatten()
            rejects = (rejects, files[REJECTS]) | "AllCarriedRejects" >> beam.Flatten()
            reports = files.reports
        unread = [(partition_of(report.source, partitions), report.source) for report in self._unchanged]
        every_partition = records.pipeline | "IndexPartitions" >> beam.Create([(n, None) for n in range(partitions)])
        compared = (
            {
                "partition": every_partition,
                "unread": records.pipeline | "UnreadSources" >> Listed(unread, self._listing("unread"), list, tuple),
                "hash": split[_HASH],
                "rows": written[DOCUMENTS],
            }
            | "ByPartition" >> beam.CoGroupByKey()
            | "Compare"
            >> beam.ParDo(_ComparePartition(previous, partitions, output, self._run_id, compression)).with_outputs(
                _CHANGES, _FACTS, _DROPPED, _IDS, main="index"
            )
        )
        counted = (
            {"partition": every_partition, "change": compared[_IDS]}
            | "ById" >> beam.CoGroupByKey()
            | "CountIds"
            >> beam.ParDo(_CountIds(previous, partitions, output, self._run_id, compression)).with_outputs(
                _DUPLICATES, main="files"
            )
        )
        chunk_files = written.files
        if previous.carry:
            chunk_files = self._carry(compared[_DROPPED], written.files, output)
        facts = compared[_FACTS] | "CountChanges" >> beam.CombineGlobally(_sum_counters)
        run_id, folder = self._run_id, self._changes_folder()
        change_files = (  # an empty _changes file when nothing changed: read_parquet('OUTPUT/_changes/*.pq') works
            compared[_CHANGES]
            | "WriteChanges" >> WriteRows(output, run_id, CHANGES_SCHEMA, CHANGES_DIR, compression, max_rows, folder)
            | "NoChanges" >> EmptyFileIfNone(output, run_id, CHANGES_SCHEMA, CHANGES_DIR, compression, folder)
        )
        return IncrementalChunks(
            chunk_files,
            rejects,
            reports,
            chunked.summaries,
            totals,
            counted[_DUPLICATES],
            compared.index,
            counted.files,
            change_files,
            facts,
        )

    def _write_chunks(self, describe: Describe) -> beam.PTransform:
        """Chunk row lists -> the files (``files``) and each document's index row (``documents``): staged in
        OUTPUT, for its commit to move."""
        settings = self._settings
        return WriteDescribedChunks(
            self._output, self._run_id, settings.compression, settings.max_rows_per_file, describe
        )

    def _changes_folder(self) -> str | None:
        """Where in OUTPUT the change files are written: None, the run's staging, for its commit to move."""
        return None

    def _listing(self, name: str) -> str:
        """Where a list the launcher knows is written for the workers (:class:`Listed`)."""
        return listing_folder(self._output, self._run_id, name)

    def _carry(self, dropped: beam.PCollection, written: beam.PCollection, output: str) -> beam.PCollection:
        """The chunk files of the run: ``written``, the previous files that hold a changed or removed document
        rewritten without its rows (one task per file), and the other previous files kept, unread."""
        previous, compression = self._previous, self._settings.compression
        touched = dropped | "ByChunkFile" >> beam.GroupByKey()
        rewritten = touched | "CarryRows" >> beam.ParDo(_CarryRows(previous.root, output, self._run_id, compression))
        kept = (
            written.pipeline
            | "PreviousChunkFiles" >> Listed(previous.chunk_files, self._listing("previous"), list, tuple)
            | "KeepUntouched"
            >> beam.ParDo(_KeepUntouched(previous.root), beam.pvalue.AsList(touched | "TouchedFiles" >> beam.Keys()))
        )
        return (written, rewritten, kept) | "AllChunkFiles" >> beam.Flatten()

    def annotate(self, manifest: beam.PCollection, facts: beam.PCollection) -> beam.PCollection:
        """The manifest PCollection with the run's change counts added (``changes``)."""
        files = len(self._unchanged)
        previous = replace(self._previous, inputs={}, chunk_files=())  # its mode and reason: no file list
        return manifest | "AddChanges" >> beam.Map(_add_changes, beam.pvalue.AsSingleton(facts), previous, files)


def _sum_counters(counters: Iterable[Counter]) -> Counter:
    total: Counter = Counter()
    for counter in counters:
        total.update(counter)
    return total
