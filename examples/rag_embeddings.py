"""zerda in Beam's RAG ingestion: files -> ZerdaChunker -> embeddings -> JSONL, all inside MLTransform.

    python examples/rag_embeddings.py --output out/embeddings [--input 'docs/*.md'] [Beam options]

The embedding model is WordLlama's ``l2_supercat`` (256 dimensions), whose weights and tokenizer
ship inside the ``wordllama`` wheel (``pip install -e '.[rag]'``): nothing is downloaded, so it
runs offline and on workers without a model hub. Beam's embedding interface takes a custom model
through an ``EmbeddingsManager`` whose ``get_model_handler()`` gives a ``ModelHandler``; the
wrapper that maps ``Chunk``s to texts and vectors back (``_TextEmbeddingHandler``) is private in
Beam 2.77, so this uses it the way Beam's own ``HuggingfaceTextEmbeddings`` does.

Each output line: ``{"id", "doc_id", "source", "index", "text", "density", "embedding"}``; ``id``
is zerda's stable chunk id, so a rerun upserts the same vectors in a vector store.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.ml.inference.base import ModelHandler, RunInference
from apache_beam.ml.rag.embeddings.base import create_text_adapter
from apache_beam.ml.rag.types import Chunk
from apache_beam.ml.transforms.base import EmbeddingsManager, MLTransform, _TextEmbeddingHandler
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.rag import ZerdaChunker
from pipelines.settings import ChunkingSettings

SAMPLE = Path(__file__).resolve().parent.parent / "pipelines" / "sample_corpus"


def load_wordllama() -> Any:
    """WordLlama from the files in its wheel; ``cache_dir`` points at them (0.4 looks for the
    tokenizer in ``tokenizer/``, while the wheel ships it in ``tokenizers/``)."""
    import wordllama

    return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


class _WordLlamaHandler(ModelHandler[str, list[float], Any]):
    """Texts -> WordLlama vectors, a batch at a time."""

    def load_model(self) -> Any:
        return load_wordllama()

    def run_inference(
        self, batch: Sequence[str], model: Any, inference_args: dict[str, Any] | None = None
    ) -> list[list[float]]:
        return model.embed(list(batch)).tolist()


class WordLlamaEmbeddings(EmbeddingsManager):
    """Beam ``Chunk``s -> the same chunks with ``embedding.dense_embedding`` set."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(type_adapter=create_text_adapter(), **kwargs)

    def get_model_handler(self) -> ModelHandler:
        return _WordLlamaHandler()

    def get_ptransform_for_processing(self, **kwargs: Any) -> beam.PTransform:
        return RunInference(model_handler=_TextEmbeddingHandler(self)).with_output_types(Chunk)


def documents(patterns: Sequence[str]) -> list[dict[str, str]]:
    """One dict a text file: its text, its path as source, and as id its path below the files' common folder."""
    paths = sorted({p for pattern in patterns for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)})
    if not paths:
        raise SystemExit(f"no files match {list(patterns)}")
    root = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
    return [
        {"text": Path(p).read_text(encoding="utf-8"), "id": os.path.relpath(os.path.abspath(p), root), "source": p}
        for p in paths
    ]


def as_json(chunk: Chunk) -> str:
    meta = chunk.metadata
    return json.dumps(
        {
            "id": chunk.id,
            "doc_id": meta["doc_id"],
            "source": meta["source"],
            "index": chunk.index,
            "text": chunk.content.text,
            "density": meta["density"],
            "embedding": chunk.dense_embedding,
        },
        ensure_ascii=False,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", action="append", help="text/Markdown files (glob); default: the sample corpus")
    parser.add_argument("--output", required=True, help="folder for embeddings.jsonl")
    args, beam_args = parser.parse_known_args(argv)
    docs = documents(args.input or [str(SAMPLE / "**" / "*.md"), str(SAMPLE / "**" / "*.txt")])
    os.makedirs(args.output, exist_ok=True)
    with tempfile.TemporaryDirectory() as artifacts, beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        _ = (
            pipeline
            | "Documents" >> beam.Create(docs)
            | "ChunkAndEmbed"
            >> MLTransform(write_artifact_location=artifacts)
            .with_transform(ZerdaChunker(ChunkingSettings(min_size=200, max_size=800, overlap=64)))
            .with_transform(WordLlamaEmbeddings())
            | "AsJson" >> beam.Map(as_json)
            | "Write"
            >> beam.io.WriteToText(
                os.path.join(args.output, "embeddings"), ".jsonl", num_shards=1, shard_name_template=""
            )
        )
    return 0


def read_embeddings(output: str) -> Iterator[dict[str, Any]]:
    """The lines :func:`main` wrote."""
    with open(os.path.join(output, "embeddings.jsonl"), encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


if __name__ == "__main__":
    sys.exit(main())
