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
from pipelines.cli.rechunk import main as rechunk_main
from pipelines.rag import ZerdaChunker
from pipelines.settings import ChunkingSettings, config_fingerprint, load_settings
from tests.common import DATA, REPO
from tests.output_checks import read_chunks, read_manifest
from zerda_core.chunks import AdaptiveChunker, ChunkConfig

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
                "config_fingerprint": config_fingerprint(SETTINGS),
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


def test_the_job_and_zerda_chunker_give_one_config_fingerprint_for_one_config(tmp_path: Path) -> None:
    """``config_fingerprint`` has one meaning: the rows the job writes and the chunks ZerdaChunker gives, made
    with one config, carry the same one (the rows carried the whole run's fingerprint, ZerdaChunker the
    chunking section's alone, so they never matched). How files are read and written is not in it."""
    config = tmp_path / "run.yaml"
    config.write_text(
        'chunking:\n  max_size: 600\n  overlap: 40\noutput:\n  compression: zstd\n  embed_text: "{section}: {text}"\n',
        encoding="utf-8",
    )
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "prose.txt").write_text(PROSE, encoding="utf-8")
    output = tmp_path / "out"
    assert rechunk_main(["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet"]) == 0
    in_rows = set(read_chunks(output).column("config_fingerprint").to_pylist())
    settings = load_settings(str(config))
    assert in_rows == {settings.config_fingerprint}
    assert read_manifest(output)["fingerprint"] == settings.fingerprint  # the run's, for incremental runs
    chunker = ZerdaChunker(settings.chunking, embed_text=settings.output.embed_text)
    with BeamTestPipeline() as pipeline:
        chunks = (
            pipeline
            | beam.Create([{"text": PROSE, "id": "prose.txt"}])
            | MLTransform(write_artifact_location=str(tmp_path / "artifacts")).with_transform(chunker)
        )
        fingerprints = chunks | beam.Map(lambda c: c.metadata["config_fingerprint"]) | beam.Distinct()
        assert_that(fingerprints, equal_to(sorted(in_rows)))


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


ARTICLES = [
    {"body": PROSE, "text": "a summary, not the document", "id": "prose", "title": "Prose", "url": "u1", "n": 1},
    beam.Row(body=ARABIC, id="ar", title="Arabic", url="u2", n=2),
    {"body": PROSE[:3000], "id": "short", "title": "No url"},
]


def library_ids(documents: list[Any], config: ChunkConfig) -> list[tuple[str, str, int, str]]:
    """(doc_id, chunk id, index, text) of every chunk ``AdaptiveChunker`` gives for the ``body`` fields."""
    chunker = AdaptiveChunker(config)
    rows = [doc if isinstance(doc, dict) else doc._asdict() for doc in documents]
    return [
        (row["id"], c.chunk_id, c.metadata.chunk_index, c.text)
        for row in rows
        for c in chunker.chunk(row["body"], doc_id=row["id"])
    ]


def chunked(documents: beam.PCollection, chunker: ZerdaChunker, artifacts: Path) -> beam.PCollection:
    """``documents`` through ``chunker`` inside MLTransform, as Beam's RAG ingestion runs a chunker (one
    MLTransform a folder of artifacts, so the folder's name is the step's)."""
    transform = MLTransform(write_artifact_location=str(artifacts)).with_transform(chunker)
    return documents | f"MLTransform {artifacts.name}" >> transform


def test_document_field_names_the_text_and_ids_default_to_the_librarys_stable_ids(tmp_path: Path) -> None:
    config = ChunkConfig(min_size=80, max_size=600, overlap=40)
    expected = library_ids(ARTICLES, config)
    assert {doc_id for doc_id, *_ in expected} == {"prose", "ar", "short"}
    chunker = ZerdaChunker(config, document_field="body", metadata_fields=["title"])
    as_row = beam.Map(lambda c: (c.metadata["doc_id"], c.id, c.index, c.content.text))
    with BeamTestPipeline() as pipeline:
        chunks = chunked(pipeline | beam.Create(ARTICLES), chunker, tmp_path)
        assert_that(chunks | as_row, equal_to(expected))


def test_metadata_fields_are_copied_into_every_chunks_metadata(tmp_path: Path) -> None:
    chunker = ZerdaChunker(SETTINGS, document_field="body", metadata_fields=["title", "url", "n"])
    carried = beam.Map(
        lambda c: (c.metadata["doc_id"], {k: c.metadata[k] for k in ("title", "url", "n", "text") if k in c.metadata})
    )
    counts = {
        doc_id: sum(1 for d, *_ in library_ids(ARTICLES, SETTINGS.chunk_config()) if d == doc_id)
        for doc_id in ("prose", "ar", "short")
    }
    expected = (
        [("prose", {"title": "Prose", "url": "u1", "n": 1})] * counts["prose"]
        + [("ar", {"title": "Arabic", "url": "u2", "n": 2})] * counts["ar"]
        + [("short", {"title": "No url"})] * counts["short"]  # a field the document lacks is left out
    )
    with BeamTestPipeline() as pipeline:
        chunks = chunked(pipeline | beam.Create(ARTICLES), chunker, tmp_path)
        assert_that(chunks | carried, equal_to(expected), label="Carried")
        zerdas = chunks | "Own" >> beam.Map(lambda c: tuple(sorted(c.metadata)[:4]))
        assert_that(
            zerdas | beam.Distinct(), equal_to([("chunk_type", "config_fingerprint", "density", "doc_id")]), label="Own"
        )


def doc_and_index(chunk: Chunk) -> str:
    """A chunk id function as a Beam user writes one (module level: MLTransform's artifact stores it by name)."""
    return f"{chunk.metadata['doc_id']}#{chunk.index}"


def test_a_chunk_id_fn_makes_the_ids_with_or_without_exception_handling(tmp_path: Path) -> None:
    expected = sorted(f"{doc_id}#{index}" for doc_id, _, index, _ in library_ids(ARTICLES, SETTINGS.chunk_config()))
    chunker = ZerdaChunker(SETTINGS, document_field="body", chunk_id_fn=doc_and_index)
    ids = beam.Map(lambda c: c.id)
    with BeamTestPipeline() as pipeline:
        documents = pipeline | beam.Create(ARTICLES)
        chunks = chunked(documents, chunker, tmp_path / "plain")
        assert_that(chunks | "PlainIds" >> ids, equal_to(expected), label="Plain")
        handled, errors = (
            documents
            | "Handled"
            >> MLTransform(write_artifact_location=str(tmp_path / "handled"))
            .with_transform(chunker)
            .with_exception_handling()
        )
        assert_that(handled | "HandledIds" >> ids, equal_to(expected), label="Handled")
        assert_that(errors, equal_to([]), label="NoErrors")
    # the artifact holds the function too: chunking again from it gives the same ids
    with BeamTestPipeline() as pipeline:
        again = pipeline | beam.Create(ARTICLES) | MLTransform(read_artifact_location=str(tmp_path / "plain"))
        assert_that(again | ids, equal_to(expected))


def test_a_document_without_the_document_field_is_an_error_row_that_names_it(tmp_path: Path) -> None:
    documents = [*ARTICLES, {"text": PROSE, "id": "no-body"}, beam.Row(body=None, id="null-body")]
    with BeamTestPipeline() as pipeline:
        chunks, errors = (
            pipeline
            | beam.Create(documents)
            | MLTransform(write_artifact_location=str(tmp_path))
            .with_transform(ZerdaChunker(SETTINGS, document_field="body"))
            .with_exception_handling()
        )
        expected_ids = [chunk_id for _, chunk_id, _, _ in library_ids(ARTICLES, SETTINGS.chunk_config())]
        assert_that(chunks | beam.Map(lambda c: c.id), equal_to(expected_ids), label="Chunks")
        assert_that(
            errors | beam.Map(lambda row: (row.element["doc_id"], row.msg)),
            equal_to(
                [
                    ("no-body", "missing_text: no 'body' key"),
                    ("null-body", "missing_text: 'body' is null, not a string"),
                ]
            ),
            label="Errors",
        )


def test_the_librarys_chunk_config_and_the_yaml_section_give_identical_chunks(tmp_path: Path) -> None:
    config = ChunkConfig(min_size=80, max_size=600, overlap=40)
    with BeamTestPipeline() as pipeline:
        documents = pipeline | beam.Create(DOCUMENTS)
        for name, chunking in (("Settings", SETTINGS), ("Config", config)):
            chunks = chunked(documents, ZerdaChunker(chunking), tmp_path / name)
            assert_that(chunks | f"{name}Rows" >> beam.Map(as_tuple), equal_to(expected_chunks()), label=name)


def test_bad_fields_are_refused_when_the_pipeline_is_built() -> None:
    with pytest.raises(ValueError, match="document_field"):
        ZerdaChunker(document_field="")
    with pytest.raises(TypeError, match="metadata_fields"):
        ZerdaChunker(metadata_fields="title")


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
