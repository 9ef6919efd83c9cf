"""Where things lie in OUTPUT, and the density bucket a chunk goes to: the layout readers rely on.

``OUTPUT/density_bucket=K/part-<uuid>.parquet`` (Hive partitioning; ``K`` from :func:`density_bucket`),
``OUTPUT/_rejects/``, ``_index/``, ``_ids/`` and ``_changes/`` (``.pq``, so that the documented
``read_parquet('OUTPUT/**/*.parquet', hive_partitioning=true)`` reads chunks only), ``_manifest.json`` and its
tables in ``_manifest/``, ``_SUCCESS``, and ``_staging/`` while a run writes.
"""

from __future__ import annotations

import math

PARTITION_COLUMN = "density_bucket"

# Where things lie in OUTPUT; reject files end in .pq so that read_parquet('OUTPUT/**/*.parquet') reads chunks only.
STAGING_DIR = "_staging"
LISTING_DIR = "listing"  # in a run's staging folder: the lists of files its workers read (pipelines.input.listing)
INDEX_ROWS_DIR = "index_rows"  # in a run's staging folder too: its new index rows, for the comparison to read
LEAVING_DIR = "leaving"  # and the previous rows leaving their chunk files, for the carry (pipelines.incremental.rows)
REJECTS_DIR = "_rejects"
MANIFEST_FILE = "_manifest.json"
SUCCESS_FILE = "_SUCCESS"
CHUNK_SUFFIX = ".parquet"
REJECT_SUFFIX = ".pq"
# The document index of a run, how many documents hold each id, and the chunk ids it added and removed
# (pipelines.incremental); .pq like rejects.
INDEX_DIR = "_index"
IDS_DIR = "_ids"
CHANGES_DIR = "_changes"
# The manifest's per-file lists, beside _manifest.json (which stays small): each committed file, written by the
# commit, and each input file read, staged by the workers like any output file.
MANIFEST_DIR = "_manifest"
FILES_TABLE = f"{MANIFEST_DIR}/files.pq"
INPUTS_DIR = f"{MANIFEST_DIR}/inputs"
# An Iceberg table output, --output iceberg://NAMESPACE.TABLE (pipelines.output.iceberg); its files no snapshot names
# are orphans once the run that wrote them started this long ago (a younger run may be writing still).
TABLE_SCHEME = "iceberg://"
ORPHAN_HOURS = 72.0


# Buckets a run may have: each is a folder, a summary row and a histogram bar. Densities are stored with four
# decimals, so narrower buckets than 1/1000 split hardly anything, while a width of 1e-9 would have the summary
# and the report walk a billion empty bars.
MAX_BUCKETS = 1000
MIN_BUCKET_WIDTH = 1 / MAX_BUCKETS


def is_bucket_width(width: object) -> bool:
    """A width giving at most ``MAX_BUCKETS`` buckets: a number (not a bool, not NaN) in ``[1/MAX_BUCKETS, 1]``."""
    return isinstance(width, (int, float)) and not isinstance(width, bool) and MIN_BUCKET_WIDTH <= width <= 1


BUCKET_WIDTHS = f"a number in [{MIN_BUCKET_WIDTH:g}, 1] (at most {MAX_BUCKETS} density buckets)"


# Quotients are rounded to this many decimals before flooring, so that 0.3 / 0.1
# (2.9999999999999996 in floats) lands in bucket 3 as a reader of the YAML expects.
_QUOTIENT_DECIMALS = 9


def _quotient(numerator: float, width: float) -> float:
    return round(numerator / width, _QUOTIENT_DECIMALS)


def n_buckets(width: float) -> int:
    """How many buckets cover densities [0, 1]: ``ceil(1 / width)``; the last may be narrower."""
    if not is_bucket_width(width):
        raise ValueError(f"bucket width must be {BUCKET_WIDTHS}, got {width!r}")
    return math.ceil(_quotient(1.0, width))


def density_bucket(density: float, width: float) -> int:
    """The bucket index ``floor(density / width)``, with density 1.0 in the last bucket."""
    if not 0.0 <= density <= 1.0:  # also refuses NaN
        raise ValueError(f"density must be in [0, 1], got {density!r}")
    return min(math.floor(_quotient(density, width)), n_buckets(width) - 1)
