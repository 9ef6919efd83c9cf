"""Reading a finished output back, and checking it against the corpus it came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from pipelines.chunking import summarise
from pipelines.input.expand import expand_inputs
from pipelines.input.source import read_file
from pipelines.output.layout import INPUTS_DIR
from pipelines.output.manifest import Manifest, write_files_table
from pipelines.output.schema import INPUTS_SCHEMA
from pipelines.records import SourceRecord
from pipelines.settings import InputSettings


def read_chunks(output: str | Path) -> pa.Table:
    """The chunk dataset as pyarrow reads it, the partition column included."""
    return ds.dataset(str(output), format="parquet", partitioning="hive").to_table()


def read_manifest(output: str | Path) -> dict[str, Any]:
    """The committed manifest with its per-file lists (``inputs``, ``output.files``) read from its tables."""
    return Manifest.load_url(str(output)).with_lists()


def write_manifest(output: str | Path, manifest: dict[str, Any], format: int = 2) -> None:
    """``manifest`` (as :func:`read_manifest` gives it, edited by hand) written back as the commit writes one: its
    inputs as one part of the inputs table (none when ``inputs`` is not a list), its files (that part in place of
    the previous ones) in the files table, whose rows and bytes the JSON records. With ``format`` 1, as an older
    zerda wrote it: both lists in the JSON, which a hand can edit into any type."""
    root = Path(output)
    if format == 1:
        output_part = {key: value for key, value in manifest["output"].items() if key != "files_table"}
        old = {**manifest, "format": 1, "output": output_part}
        (root / "_manifest.json").write_text(json.dumps(old), encoding="utf-8")
        return
    for part in root.glob(f"{INPUTS_DIR}/*.pq"):
        part.unlink()
    files = [entry for entry in manifest["output"]["files"] if not entry["path"].startswith(f"{INPUTS_DIR}/")]
    if isinstance(manifest["inputs"], list):
        part = f"{INPUTS_DIR}/part-{'0' * 32}.pq"
        (root / INPUTS_DIR).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(manifest["inputs"], schema=INPUTS_SCHEMA), root / part)
        files.append({"path": part, "rows": len(manifest["inputs"]), "bytes": (root / part).stat().st_size})
    table = write_files_table(LocalFileSystem(), str(root), files)
    output_part = {key: value for key, value in manifest["output"].items() if key != "files"}
    data = {key: value for key, value in manifest.items() if key != "inputs"}
    data["output"] = {**output_part, "files_table": table}
    (root / "_manifest.json").write_text(json.dumps(data), encoding="utf-8")


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
