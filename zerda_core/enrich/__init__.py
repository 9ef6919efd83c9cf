"""Enrichment of chunks with extra metadata."""

from zerda_core.enrich.metadata_enricher import MetadataEnricher

__all__ = ["MetadataEnricher"]
