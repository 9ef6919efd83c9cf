"""ZerdaChunker inside Beam's MLTransform, and the example that goes on to WordLlama embeddings."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.ml.rag.types import Chunk
from apache_beam.ml.transforms.base import MLTransform
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.chunk_text import content_id
from pipelines.rag import ZerdaChunker
from pipelines.settings import ChunkingSettings
from tests.common import DATA, REPO

PROSE = (DATA / "english_prose.txt").read_text(encoding="utf-8")
ARABIC = (DATA / "arabic_prose.txt").read_text(encoding="utf-8")
SETTINGS = ChunkingSettings(min_size=80, max_size=600, overlap=40)
DOCUMENTS = [
    {"text": PROSE, "id": "prose", "source": "docs/prose.txt", "team": "search"},
    {"text": ARABIC, "source": "docs/ar.txt"},
]


def expected_chunks() -> list[tuple[Any, ...]]:
    """What ZerdaChunker must give, worked out with the library alone."""
    chunker = SETTINGS.chunker()
    rows = []
    for doc in DOCUMENTS:
        doc_id = str(doc.get("id") or content_id(str(doc["text"])))
        for c in chunker.chunk(str(doc["text"]), doc_id=doc_id, source=str(doc["source"])):
            m = c.metadata
            extra = {"team": doc["team"]} if "team" in doc else {}
            metadata = {
                **extra,
                "density": m.extra["density"],
                "target_size": m.extra["target_size"],
                "doc_id": doc_id,
                "source": doc["source"],
                "start_char": m.start_char,
                "end_char": m.end_char,
                "language": m.language,
                "chunk_type": "adaptive",
                "config_fingerprint": SETTINGS.fingerprint,
            }
            rows.append((c.chunk_id, m.chunk_index, c.text, metadata))
    return rows


def as_tuple(chunk: Chunk) -> tuple[Any, ...]:
    assert chunk.content.text is not None
    return (chunk.id, chunk.index, chunk.content.text, chunk.metadata)


def test_chunks_in_mltransform_carry_zerdas_ids_and_metadata(tmp_path: Path) -> None:
    expected = expected_chunks()
    assert {m["language"] for *_, m in expected} == {"en", "ar"}
    with BeamTestPipeline() as pipeline:
        chunks = (
            pipeline
            | beam.Create(DOCUMENTS)
            | MLTransform(write_artifact_location=str(tmp_path / "artifacts")).with_transform(ZerdaChunker(SETTINGS))
        )
        assert_that(chunks | beam.Map(as_tuple), equal_to(expected))
    # the artifact MLTransform wrote is enough to chunk again, with the same settings and ids
    with BeamTestPipeline() as pipeline:
        again = pipeline | beam.Create(DOCUMENTS) | MLTransform(read_artifact_location=str(tmp_path / "artifacts"))
        assert_that(again | beam.Map(as_tuple), equal_to(expected))


def test_documents_without_chunks_come_out_as_mltransform_errors(tmp_path: Path) -> None:
    elements = [*DOCUMENTS, {"text": "tiny", "id": "t"}, {"body": "no text", "id": "b"}, {"text": "  ", "id": "e"}]
    with BeamTestPipeline() as pipeline:
        chunks, errors = (
            pipeline
            | beam.Create(elements)
            | MLTransform(write_artifact_location=str(tmp_path))
            .with_transform(ZerdaChunker(SETTINGS))
            .with_exception_handling()
        )
        assert_that(chunks | beam.Map(lambda c: c.id), equal_to([c[0] for c in expected_chunks()]), label="Chunks")
        assert_that(
            errors | beam.Map(lambda row: (row.element["doc_id"], row.msg.split(":")[0])),
            equal_to([("t", "below_min_chunk_size"), ("b", "missing_text"), ("e", "empty")]),
            label="Errors",
        )


def test_exception_handling_options_zerda_cannot_honour_are_refused() -> None:
    splitter = ZerdaChunker(SETTINGS).get_splitter_transform()
    with pytest.raises(ValueError, match="defaults only"):
        splitter.with_exception_handling(threshold=0.5)  # type: ignore[attr-defined]


def test_example_embeds_zerda_chunks_with_a_model_shipped_in_a_wheel(tmp_path: Path) -> None:
    """examples/rag_embeddings.py, run as a user runs it: every chunk gets a vector, and the vectors retrieve."""
    inputs = [str(DATA / "*.txt"), str(DATA / "*.md")]
    command = [sys.executable, str(REPO / "examples" / "rag_embeddings.py"), "--output", str(tmp_path)]
    for pattern in inputs:
        command += ["--input", pattern]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(command, check=True, env=env, capture_output=True, timeout=600)

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import rag_embeddings
    finally:
        sys.path.remove(str(REPO / "examples"))
    lines = list(rag_embeddings.read_embeddings(str(tmp_path)))
    files = sorted([*DATA.glob("*.txt"), *DATA.glob("*.md")])
    chunker = ChunkingSettings(min_size=200, max_size=800, overlap=64).chunker()
    expected = {c.chunk_id: c.text for f in files for c in chunker.chunk(f.read_text(encoding="utf-8"), f.name, str(f))}
    assert {line["id"]: line["text"] for line in lines} == expected
    assert all(len(line["embedding"]) == 256 and all(map(math.isfinite, line["embedding"])) for line in lines)

    model = rag_embeddings.load_wordllama()
    query = model.embed(["a Python function that defines a class and returns a value"])[0].tolist()
    best = max(lines, key=lambda line: cosine(query, line["embedding"]))
    assert best["doc_id"] == "code_python.txt", json.dumps({k: best[k] for k in ("doc_id", "text")})


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)) or 1.0)
