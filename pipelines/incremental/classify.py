"""Each record read: unchanged (its rows stay, its previous index row says so) or to be chunked."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows

from pipelines.incremental.index import _SUMMARY_COLUMNS, document_key, document_keys, id_key, partition_of
from pipelines.incremental.previous import Previous, read_index
from pipelines.incremental.tags import _HASH, _TOTALS
from pipelines.output.build_manifest import add_buckets
from pipelines.output.layout import (
    PARTITION_COLUMN,
)
from pipelines.records import SourceRecord

_SLICES_HELD = 8  # sources whose previous index rows a classifying worker keeps (records come file by file)


_HASH_BATCH = 4096  # documents' hashes per element sent to a partition's comparison


class HashBatch:
    """The documents of one index partition a worker classified, for that partition's comparison: the records
    of the unchanged ones, 8 bytes each by source (their key and hash are in the previous index, which the
    comparison reads), and the key, record and hash of the others. What a run shuffles grows with the
    documents read: this keeps it to a few bytes for each unchanged one."""

    def __init__(self) -> None:
        self.kept: dict[str, array[int]] = {}
        self.chunked: list[tuple[str, tuple[int, str]]] = []
        self.size = 0

    def add(self, record: SourceRecord, digest: str | None) -> None:
        if digest is None:
            self.kept.setdefault(record.source, array("q")).append(record.record)
        else:
            self.chunked.append((id_key(record.source, record.doc_id), (record.record, digest)))
        self.size += 1

    def sealed(self) -> tuple[dict[str, bytes], list[tuple[str, tuple[int, str]]]]:
        """What is sent: the kept records as bytes, so the shuffle carries no Python int a document."""
        return {source: records.tobytes() for source, records in self.kept.items()}, self.chunked


def kept_records(packed: bytes) -> array[int]:
    """The records of a sealed :class:`HashBatch`'s unchanged documents of one source."""
    records = array("q")
    records.frombytes(packed)
    return records


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
        self._hashes: dict[int, HashBatch] = {}  # by index partition

    def finish_bundle(self) -> Iterator[TaggedOutput]:
        if self._kept:
            yield TaggedOutput(_TOTALS, GlobalWindows.windowed_value_at_end_of_window((self._kept, self._buckets)))
        for partition, batch in self._hashes.items():
            yield TaggedOutput(_HASH, GlobalWindows.windowed_value_at_end_of_window((partition, batch.sealed())))

    def _hash(self, record: SourceRecord, digest: str | None) -> Iterator[TaggedOutput]:
        """Note a document for its partition's comparison (``digest`` None: unchanged); a partition's batch goes
        when it is full: one element a batch of documents, not one a document (the runner holds the shuffle's
        elements)."""
        partition = partition_of(record.source, self._partitions)
        batch = self._hashes.setdefault(partition, HashBatch())
        batch.add(record, digest)
        if batch.size >= _HASH_BATCH:
            yield TaggedOutput(_HASH, (partition, self._hashes.pop(partition).sealed()))

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
        digest = record.digest()
        known = self._known(record.source).get(key)
        if known is not None and known[0] == digest:
            _, bucket, *numbers = known
            self._kept += 1
            add_buckets(self._buckets, {bucket: numbers})
            yield from self._hash(record, None)
            return
        yield from self._hash(record, digest)
        yield record
