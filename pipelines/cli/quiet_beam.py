"""Apache Beam imported without the warning its import logs through the root logger (``apitools not
found``: optional BigQuery clients zerda never uses). The job's entry point imports this module before
anything else imports Beam; the filter goes once Beam is imported, so nothing outlives the import and a
library user importing ``ChunkText`` sees Beam as Beam is.
"""

from __future__ import annotations

import logging


def _is_not_import_noise(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("apitools not found")


def _import_beam() -> None:
    root = logging.getLogger()
    root.addFilter(_is_not_import_noise)
    try:
        import apache_beam  # noqa: F401
    finally:
        root.removeFilter(_is_not_import_noise)


_import_beam()
