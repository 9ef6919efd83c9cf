"""Reading a finished output back, and checking it against the corpus it came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from pipelines.chunking import summarise
from pipelines.input.expand import expand_inputs
from pipelines.input.source import read_file
from pipelines.records import SourceRecord
from pipelines.settings import InputSettings


def read_chunks(output: str | Path) -> pa.Table:
    """The chunk dataset as pyarrow reads it, the partition column included."""
    return ds.dataset(str(output), format="parquet", partitioning="hive").to_table()


def read_manifest(output: str | Path) -> dict[str, Any]:
    return json.loads((Path(output) / "_manifest.json").read_text(encoding="utf-8"))


def source_texts(patterns: list[str], settings: InputSettings | None = None) -> dict[tuple[str, int], str]:
    """Every accepted document of the corpus, by (source, record), read the way the pipeline reads."""
    texts = {}
    for file in expand_inputs(patterns):
        for item in read_file(file, settings or InputSettings()):
            if isinstance(item, SourceRecord):
                texts[(item.source, item.record)] = item.text
    return texts


def assert_chunks_are_slices(table: pa.Table, texts: dict[tuple[str, int], str]) -> None:
    """Each chunk's text is exactly its document's ``text[start_char:end_char]``."""
    rows = table.select(["source", "record", "start_char", "end_char", "text"]).to_pylist()
    assert rows
    for row in rows:
        document = texts[(row["source"], row["record"])]
        assert row["text"] == document[row["start_char"] : row["end_char"]], row


def documents_of(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Chunk rows grouped by document, one list each, as ``ChunkDocuments`` emits them."""
    documents: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        documents.setdefault((row.get("source"), row["doc_id"], row["record"]), []).append(row)
    return list(documents.values())


def summaries_of(rows: list[dict[str, Any]]) -> list[tuple[str, dict[int, list[int]]]]:
    """The manifest's per-document summaries of chunk rows, as ``ChunkDocuments`` emits them."""
    return [summarise(document) for document in documents_of(rows)]
