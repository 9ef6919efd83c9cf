"""One index partition before and now: its index file, the changes, and the rows that leave their chunk
file; and the id counts, per id partition."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import zip_longest
from typing import Any, NamedTuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.pvalue import TaggedOutput

from pipelines.errors import PreviousUnreadable
from pipelines.incremental.classify import kept_records
from pipelines.incremental.index import (
    _INDEX_ROW_GROUP,
    document_key,
    id_key,
    index_path,
    partition_of,
)
from pipelines.incremental.previous import UNREADABLE_INDEX, Previous, _previous_partition
from pipelines.incremental.rows import read_rows, stage_leaving
from pipelines.incremental.tags import _CHANGES, _DROPPED, _DUPLICATES, _FACTS, _IDS
from pipelines.output.build_manifest import DUPLICATE_EXAMPLES
from pipelines.output.layout import (
    IDS_DIR,
    INDEX_DIR,
    REJECT_SUFFIX,
)
from pipelines.output.schema import IDS_SCHEMA, INDEX_SCHEMA
from pipelines.output.write import (
    stage_table,
)


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

    The partition's previous rows are read here, from the previous index (never shuffled), and so are this run's
    new index rows, from the files the chunk writer staged them in (:mod:`pipelines.incremental.rows`): only
    the files' paths and this run's hashes come grouped by partition. The rows of the sources not read (unchanged
    files) are carried as they are and count as unchanged; the others are compared per (source, doc id)
    (:func:`_compare`).
    A task holds one partition: about ``_DOCUMENTS_PER_PARTITION`` documents.
    """

    def __init__(
        self, previous: Previous, partitions: int, output: str, run_id: str, compression: str, fingerprint: str
    ) -> None:
        super().__init__(previous, partitions, output, run_id, compression)
        self._fingerprint = fingerprint  # of this run's settings: its new index rows say it

    def process(self, element: tuple[int, Mapping[str, Iterable[Any]]]) -> Iterator[Any]:
        partition, grouped = element
        before = self._before(partition)
        unread = pc.is_in(before.column("source"), value_set=pa.array(sorted(set(grouped["unread"])), pa.string()))
        carried = before.filter(unread)
        groups: dict[str, dict[str, list[Any]]] = defaultdict(lambda: {"previous": [], "hash": [], "rows": []})
        read_before: Counter = Counter()  # the previous documents of the sources read (or gone), by id
        kept: set[tuple[str, int]] = set()  # the documents classified unchanged, by source and record
        for kept_by_source, chunked in grouped["hash"]:
            for source, packed in kept_by_source.items():
                kept.update((source, record) for record in kept_records(packed))
            for key, (record, digest) in chunked:
                groups[key]["hash"].append((record, "chunked", digest))
        found = 0
        for row in before.filter(pc.invert(unread)).to_pylist():
            key = id_key(row["source"], row["doc_id"])
            groups[key]["previous"].append(row)
            read_before[row["doc_id"]] += 1
            if (row["source"], row["record"]) in kept:
                groups[key]["hash"].append((row["record"], "kept", row["content_hash"]))
                found += 1
        if found != len(kept):  # classified unchanged by a slice of the index this partition does not hold
            path = index_path(partition, self._partitions)
            raise PreviousUnreadable(f"{UNREADABLE_INDEX}: {path} (it lacks documents its sources' slices hold)")
        for row in read_rows(self._output, list(grouped["rows"]), self._fingerprint):
            groups[id_key(row["source"], row["doc_id"])]["rows"].append(row)
        rows: list[dict[str, Any]] = []
        leaving: list[Leaving] = []
        for key in sorted(groups):
            for out in _compare((key, groups.pop(key)), self._previous.carry):
                if isinstance(out, Leaving):
                    leaving.append(out)
                elif isinstance(out, TaggedOutput):
                    yield out
                else:
                    rows.extend(out)
        for chunk_file, path in stage_leaving(self._output, self._run_id, partition, leaving, self._compression):
            yield TaggedOutput(_DROPPED, (chunk_file, path))
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
            raise PreviousUnreadable(f"{UNREADABLE_INDEX}: {path} (its id counts do not match the index)")
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
    (when rows are carried) the previous rows that leave their chunk file (:class:`Leaving`).

    Chunk ids are compared over the whole group, not document by document: two copies of one text under
    one id share chunk ids, so removing one copy removes no chunk the other still holds; and a document
    whose record moved (a JSONL line shifted by a deletion above it) keeps its chunk ids, so downstream is
    not asked to re-embed it.
    """
    _, grouped = element
    before = {row["record"]: row for row in grouped["previous"]}
    hashed = {record: (kind, digest) for record, kind, digest in grouped["hash"]}
    rows = {row["record"]: row for row in grouped["rows"]}
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
                yield Leaving(row["chunk_file"], document_key(row["source"], record, row["doc_id"]), row["chunk_count"])
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


class Leaving(NamedTuple):
    """A previous document whose rows leave their chunk file (changed, moved to another record, or removed)."""

    chunk_file: str
    document: str  # its key (:func:`document_key`)
    rows: int


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
