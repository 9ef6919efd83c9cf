"""pipelines: the Apache Beam side of zerda (reading corpora, chunking, writing Parquet)."""

import logging

from pipelines import redact


def _is_not_import_noise(record: logging.LogRecord) -> bool:
    """Beam warns at import that optional BigQuery clients are missing; zerda never uses them."""
    return not record.getMessage().startswith("apitools not found")


logging.getLogger().addFilter(_is_not_import_noise)
redact.install()  # every process that runs zerda code (launcher, Beam workers) keeps credentials out of its logs
