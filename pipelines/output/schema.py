"""The Arrow schemas of the output dataset (where the files lie: :mod:`pipelines.output.layout`).

- ``CHUNK_SCHEMA``: the columns stored in ``OUTPUT/density_bucket=K/part-*.parquet``. The
  partition column ``density_bucket`` is not stored in the files: Hive partitioning puts it in
  the path, and readers (pyarrow, DuckDB, polars) add it back from there.
- ``REJECT_SCHEMA``: the columns of ``OUTPUT/_rejects/``, one row per input record without chunks, except
  past ``input.max_reject_rows``: then one summary row whose ``count`` is the records it stands for.

Every column is required except ``keywords`` (null when enrichment is off), ``local_density``
(null unless ``chunking.density_scope`` is ``section``) and ``section`` (the Markdown/rST heading
path, null when the chunk has none), ``token_count`` (the chunk's own tokens, null unless
``chunking.size_unit`` is ``tokens``) and ``embed_text`` (null unless ``output.embed_text`` is set), so
the writer can refuse a row that lacks a field instead of storing a silent null.
"""

from __future__ import annotations

import pyarrow as pa

from pipelines.output.layout import PARTITION_COLUMN

KEYWORDS_TYPE = pa.list_(pa.struct([("term", pa.string()), ("score", pa.float64())]))


def _required(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=False)


CHUNK_SCHEMA = pa.schema(
    [
        _required("chunk_id", pa.string()),
        _required("doc_id", pa.string()),
        _required("source", pa.string()),
        _required("record", pa.int64()),
        _required("chunk_index", pa.int32()),
        _required("text", pa.string()),
        _required("char_count", pa.int32()),
        _required("start_char", pa.int64()),
        _required("end_char", pa.int64()),
        _required("density", pa.float64()),
        _required("target_size", pa.int32()),
        _required("chunk_type", pa.string()),
        _required("language", pa.string()),
        _required("config_fingerprint", pa.string()),
        pa.field("keywords", KEYWORDS_TYPE, nullable=True),
        pa.field("local_density", pa.float64(), nullable=True),
        pa.field("section", pa.string(), nullable=True),
        pa.field("token_count", pa.int32(), nullable=True),
        pa.field("embed_text", pa.string(), nullable=True),
    ]
)

# Columns whose values repeat from row to row: Parquet stores them dictionary-encoded. Chunk text and ids
# are unique, so a dictionary there only costs time (about a tenth of the write) before Parquet gives up on it.
REPEATED_COLUMNS = frozenset({"doc_id", "source", "chunk_type", "language", "config_fingerprint", "reason"})

REJECT_SCHEMA = pa.schema(
    [
        _required("source", pa.string()),
        _required("record", pa.int64()),
        _required("doc_id", pa.string()),
        _required("reason", pa.string()),
        _required("message", pa.string()),
        _required("excerpt", pa.string()),
        _required("count", pa.int64()),
    ]
)

# One row per chunked document: what an --incremental run needs to carry its chunks over unchanged.
INDEX_SCHEMA = pa.schema(
    [
        _required("source", pa.string()),
        _required("record", pa.int64()),
        _required("doc_id", pa.string()),
        _required("content_hash", pa.string()),
        _required("config_fingerprint", pa.string()),
        _required("zerda_version", pa.string()),
        _required("chunk_count", pa.int32()),
        _required(PARTITION_COLUMN, pa.int32()),
        _required("chars", pa.int64()),
        _required("text_chars", pa.int64()),
        _required("overlap_chars", pa.int64()),
        _required("chunk_ids", pa.list_(pa.string())),
        _required("chunk_file", pa.string()),  # the chunk file holding the document's rows, relative to OUTPUT
    ]
)

# One row per document id: how many chunked documents hold it, in any source (the manifest's duplicate ids). Kept
# beside the index, partitioned by id, so that an incremental run counts duplicates from what changed.
IDS_SCHEMA = pa.schema([_required("doc_id", pa.string()), _required("documents", pa.int64())])

# The manifest's tables (pipelines.output.manifest): one row per input file read, and per committed file.
INPUTS_SCHEMA = pa.schema(
    [
        _required("source", pa.string()),
        _required("bytes", pa.int64()),
        _required("records", pa.int64()),
        _required("error", pa.string()),
        _required("stamp", pa.string()),
    ]
)
# ``footer``: the digest of the file's footer (see pipelines.output.manifest.footer_digest): of every file a directory
# output commits, of the index and id-count files of a table's side folder; null in outputs written before it was
# recorded.
FILES_SCHEMA = pa.schema(
    [
        _required("path", pa.string()),
        _required("rows", pa.int64()),
        _required("bytes", pa.int64()),
        pa.field("footer", pa.string()),
    ]
)

# One row per chunk id a run added or removed, against the previous committed output.
CHANGES_SCHEMA = pa.schema(
    [
        _required("chunk_id", pa.string()),
        _required("doc_id", pa.string()),
        _required("source", pa.string()),
        _required("record", pa.int64()),
        _required("change", pa.string()),
    ]
)
