"""The document index's keys and layout: which partition a source's documents are in, how a document is
named, how its chunk ids are packed."""

from __future__ import annotations

import hashlib
import re

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.output.layout import (
    INDEX_DIR,
    REJECT_SUFFIX,
)

_SUMMARY_COLUMNS = ("chars", "text_chars", "overlap_chars")  # with chunk_count: a document's manifest summary


_COUNTED_COLUMNS = ("chunk_count", *_SUMMARY_COLUMNS)  # summed by bucket: an unread file's manifest totals


_SEP = "\x00"  # joins the parts of a document key; never in a path and unlikely in an id


_PARTITION_NAME = re.compile(r"part-(\d{5,})-of-(\d{5,})\.pq")  # an index file: one partition of the documents


_DOCUMENTS_PER_PARTITION = 50_000  # index rows a partition is planned to hold: what one task compares at once


_BYTES_PER_PARTITION = 32 * 2**20  # input bytes a partition is planned from at most: its chunks' ids, compared at once


MAX_INDEX_PARTITIONS = 4096


# Documents a run without previous documents plans its index for: it knows nothing of its input's size at launch
# (the workers list the files), so it plans for a large corpus, 1,024 partitions (10^8 documents at twice a
# partition's planned rows). A partition that gets no document costs one small task and writes no file.
FIRST_RUN_DOCUMENTS = 1024 * _DOCUMENTS_PER_PARTITION


_INDEX_ROW_GROUP = 2048  # rows per row group of an index file: a source's slice is read by its statistics


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


def index_partitions(documents: int, input_bytes: int = 0) -> int:
    """How many partitions an index of about ``documents`` rows, made from ``input_bytes`` of input, has: a power
    of two (so that an index read with another number maps each partition onto few), of about
    ``_DOCUMENTS_PER_PARTITION`` rows and at most about ``_BYTES_PER_PARTITION`` input bytes each (a large
    document makes many chunks, whose ids a comparing task holds)."""
    wanted = max(1, -(-documents // _DOCUMENTS_PER_PARTITION), -(-input_bytes // _BYTES_PER_PARTITION))
    return min(MAX_INDEX_PARTITIONS, 1 << (wanted - 1).bit_length())


def index_path(partition: int, partitions: int, folder: str = INDEX_DIR) -> str:
    """An index file's path relative to OUTPUT: ``_index/part-00003-of-00016.pq`` (``_ids/...`` for the id
    counts, partitioned alike, by document id)."""
    return f"{folder}/part-{partition:05d}-of-{partitions:05d}{REJECT_SUFFIX}"


def document_keys(table: pa.Table) -> pa.Array:
    """The document keys of a table with source, record and doc_id columns (see :func:`document_key`)."""
    return pc.binary_join_element_wise(
        table.column("source"), pc.cast(table.column("record"), pa.string()), table.column("doc_id"), _SEP
    )
