"""A table's data files described where they are written: each worker turns the footer its Parquet writer
closed a file with into the file's Iceberg ``DataFile`` (its statistics, partition and size), so that the
commit adds the files without reading a footer or computing a statistic (its cost stays metadata, nearly
flat in the number of files).

The workers describe the files with the table's schema, partitioning and metrics settings as the launch read
them (:class:`TableFiles`); the commit checks the table still has those, else it refuses the run's files."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

_METRICS_PREFIX = "write.metadata.metrics."  # pyiceberg's metrics modes: the default and per column


@dataclass(frozen=True)
class TableFiles:
    """What a worker needs to describe a data file of one table: the table's location, its schema and
    partition spec (as JSON) and its metrics settings (the table properties that choose which statistics a
    file gets). Small and picklable: it travels in the job's graph."""

    location: str
    schema: str
    spec: str
    metrics: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, table: Table) -> TableFiles:
        """The table's, as its metadata says now."""
        metadata = table.metadata
        metrics = tuple(sorted((k, v) for k, v in metadata.properties.items() if k.startswith(_METRICS_PREFIX)))
        location = table.location().rstrip("/")
        return cls(location, metadata.schema().model_dump_json(), metadata.spec().model_dump_json(), metrics)

    def data_file(self, path: str, footer: Any, size: int) -> DataFile:
        """The ``DataFile`` of the file at ``path`` in the location, from the footer its writer closed it with
        (``pyarrow.parquet.FileMetaData``) and its size: what pyiceberg builds from a footer it reads."""
        from pyiceberg.io.pyarrow import data_file_statistics_from_parquet_metadata
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

        schema, spec, plan, mapping = _plan(self.schema, self.spec, self.metrics)
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=footer, stats_columns=plan, parquet_column_mapping=mapping
        )
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=f"{self.location}/{path}",
            file_format=FileFormat.PARQUET,
            partition=statistics.partition(spec, schema),
            file_size_in_bytes=size,
            sort_order_id=None,
            spec_id=spec.spec_id,
            equality_ids=None,
            key_metadata=None,
            **statistics.to_serialized_dict(),
        )


@functools.lru_cache(maxsize=8)
def _plan(schema_json: str, spec_json: str, metrics: tuple[tuple[str, str], ...]) -> tuple[Any, Any, Any, Any]:
    """The parsed schema and spec, pyiceberg's statistics plan and Parquet column mapping: once per process."""
    from pyiceberg.io.pyarrow import compute_statistics_plan, parquet_path_to_id_mapping
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

    schema = Schema.model_validate_json(schema_json)
    plan = compute_statistics_plan(schema, dict(metrics))
    return schema, PartitionSpec.model_validate_json(spec_json), plan, parquet_path_to_id_mapping(schema)
