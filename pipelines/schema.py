"""The Arrow schemas of the output dataset and the density bucket of a chunk.

- ``CHUNK_SCHEMA``: the columns stored in ``OUTPUT/density_bucket=K/part-*.parquet``. The
  partition column ``density_bucket`` is not stored in the files: Hive partitioning puts it in
  the path, and readers (pyarrow, DuckDB, polars) add it back from there.
- ``REJECT_SCHEMA``: the columns of ``OUTPUT/_rejects/``, one row per input record without chunks.
- ``density_bucket(density, width)``: the partition a chunk goes to; shared by the chunking
  transform (which adds it to each row) and the writer (which turns it into a directory).

Every column is required except ``keywords`` (null when enrichment is off), ``local_density``
(null unless ``chunking.density_scope`` is ``section``) and ``section`` (the Markdown/rST heading
path, null when the chunk has none), so the writer can refuse a row that lacks a field instead of
storing a silent null.
"""

from __future__ import annotations

import math

import pyarrow as pa

PARTITION_COLUMN = "density_bucket"

# Where things lie in OUTPUT; reject files end in .pq so that read_parquet('OUTPUT/**/*.parquet') reads chunks only.
STAGING_DIR = "_staging"
REJECTS_DIR = "_rejects"
MANIFEST_FILE = "_manifest.json"
SUCCESS_FILE = "_SUCCESS"
CHUNK_SUFFIX = ".parquet"
REJECT_SUFFIX = ".pq"
# The document index of a run and the chunk ids it added and removed (pipelines.incremental); .pq like rejects.
INDEX_DIR = "_index"
CHANGES_DIR = "_changes"

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

# Quotients are rounded to this many decimals before flooring, so that 0.3 / 0.1
# (2.9999999999999996 in floats) lands in bucket 3 as a reader of the YAML expects.
_QUOTIENT_DECIMALS = 9


def _quotient(numerator: float, width: float) -> float:
    return round(numerator / width, _QUOTIENT_DECIMALS)


def n_buckets(width: float) -> int:
    """How many buckets cover densities [0, 1]: ``ceil(1 / width)``; the last may be narrower."""
    if not 0 < width <= 1:
        raise ValueError(f"bucket width must be in (0, 1], got {width!r}")
    return math.ceil(_quotient(1.0, width))


def density_bucket(density: float, width: float) -> int:
    """The bucket index ``floor(density / width)``, with density 1.0 in the last bucket."""
    if not 0.0 <= density <= 1.0:  # also refuses NaN
        raise ValueError(f"density must be in [0, 1], got {density!r}")
    return min(math.floor(_quotient(density, width)), n_buckets(width) - 1)
