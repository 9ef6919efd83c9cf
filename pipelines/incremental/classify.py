"""Each record read: unchanged (its rows stay, its previous index row says so) or to be chunked."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
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
from pipelines.records import SourceRecord, content_hash

_SLICES_HELD = 8  # sources whose previous index rows a classifying worker keeps (records come file by file)


_HASH_BATCH = 4096  # documents' hashes per element sent to a partition's comparison


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
