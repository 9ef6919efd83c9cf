"""Where things lie in OUTPUT, and the density bucket a chunk goes to: the layout readers rely on.

``OUTPUT/density_bucket=K/part-NNNNN.parquet`` (Hive partitioning; ``K`` from :func:`density_bucket`),
``OUTPUT/_rejects/``, ``_index/`` and ``_changes/`` (``.pq``, so that the documented
``read_parquet('OUTPUT/**/*.parquet', hive_partitioning=true)`` reads chunks only), ``_manifest.json``,
``_SUCCESS``, and ``_staging/`` while a run writes.
"""

from __future__ import annotations

import math

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
