"""ChunkText on the DirectRunner: strings, dicts and Documents in, DocumentChunks and tagged rejects out."""

from __future__ import annotations

import logging
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.chunk_text import ChunkText
from pipelines.names import REJECTS
from pipelines.records import REJECT_REASONS, SourceRecord, content_id
from pipelines.settings import ChunkingSettings
from tests.common import DATA
from zerda_core.chunks import ChunkConfig, Document, DocumentChunk

PROSE = (DATA / "english_prose.txt").read_text(encoding="utf-8")
CODE = (DATA / "code_python.txt").read_text(encoding="utf-8")
ARABIC = (DATA / "arabic_prose.txt").read_text(encoding="utf-8")
SETTINGS = ChunkingSettings(min_size=80, max_size=600, overlap=40)


def library_chunks(text: str, doc_id: str, source: str = "") -> list[tuple[str, int, str, int, int]]:
    """What the library alone gives, as comparable tuples."""
    return [key(c) for c in SETTINGS.chunker().chunk(text, doc_id=doc_id, source=source)]


def key(chunk: DocumentChunk) -> tuple[str, int, str, int, int]:
    m = chunk.metadata
    return (m.doc_id, m.chunk_index, chunk.text, m.start_char, m.end_char)


class _ExplodingText(str):
    """A text whose chunking fails inside the library (a stand-in for any chunker bug)."""

    def strip(self, chars: str | None = None) -> str:
        raise RuntimeError("boom")


def test_strings_are_chunked_as_the_library_does_with_content_ids() -> None:
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create([PROSE, CODE]) | ChunkText(SETTINGS)
        assert_that(
            out.chunks | beam.Map(key),
            equal_to(library_chunks(PROSE, content_id(PROSE)) + library_chunks(CODE, content_id(CODE))),
        )


def test_content_ids_do_not_depend_on_order_or_run() -> None:
    assert content_id(PROSE) == content_id(PROSE[:]) != content_id(CODE)
    runs = []
    for texts in ([PROSE, CODE, ARABIC], [ARABIC, PROSE, CODE]):
        with BeamTestPipeline() as pipeline:
            ids = pipeline | beam.Create(texts) | ChunkText(SETTINGS)
            expected = sorted(c.chunk_id for t in texts for c in SETTINGS.chunker().chunk(t, content_id(t)))
            assert_that(ids.chunks | beam.Map(lambda c: c.chunk_id), equal_to(expected))
        runs.append(expected)
    assert runs[0] == runs[1]


def test_dicts_carry_id_source_and_extra_fields_into_metadata() -> None:
    elements = [
        {"text": PROSE, "id": "p1", "source": "web", "lang_hint": "en", "tags": ["a", "b"], "density": "theirs"},
        {"text": CODE, "doc_id": 7},
        {"text": ARABIC, "id": None, "source": None},
    ]
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create(elements) | ChunkText(SETTINGS)
        assert_that(
            out.chunks | beam.Map(lambda c: (c.metadata.doc_id, c.metadata.source, sorted(c.metadata.extra))),
            equal_to(
                [("p1", "web", ["density", "lang_hint", "tags", "target_size"])] * len(library_chunks(PROSE, "p1"))
                + [("7", "", ["density", "target_size"])] * len(library_chunks(CODE, "7"))
                + [(content_id(ARABIC), "", ["density", "target_size"])] * len(library_chunks(ARABIC, "x"))
            ),
            label="CheckMetadata",
        )
        assert_that(
            out.chunks
            | "Extras" >> beam.Filter(lambda c: c.metadata.doc_id == "p1")
            | beam.Map(
                lambda c: (c.metadata.extra["lang_hint"], c.metadata.extra["tags"], c.metadata.extra["density"])
            ),
            equal_to([("en", ["a", "b"], SETTINGS.chunker().sizing(PROSE)[0])] * len(library_chunks(PROSE, "p1"))),
            label="ChunkerKeysWin",
        )


def test_documents_keep_their_ids_and_sources() -> None:
    documents = [Document(PROSE, "doc-1", "s3://bucket/a.txt"), Document(CODE)]
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create(documents) | ChunkText(SETTINGS)
        assert_that(
            out.chunks | beam.Map(key),
            equal_to(library_chunks(PROSE, "doc-1", "s3://bucket/a.txt") + library_chunks(CODE, content_id(CODE))),
        )


def test_every_element_without_chunks_is_a_reject_with_the_jobs_reason() -> None:
    elements: list[object] = [
        "   \n\t ",
        "\u200b" * 300,  # only zero-width spaces: it used to give a chunk of 300 invisible characters
        {"id": "invisible", "text": "\u200b\u2060\ufeff\u200d \n" * 50},
        "Too short.",
        {"id": "no-text", "body": "x"},
        {"id": "null-text", "text": None},
        {"id": "number-text", "text": 42},
        Document(None, "doc-none"),  # type: ignore[arg-type]
        12345,
        b"bytes are not text",
        _ExplodingText(PROSE),
        SourceRecord("f.jsonl", 9, "r9", "tiny"),
        PROSE,
    ]
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create(elements) | ChunkText(SETTINGS)
        assert_that(
            out[REJECTS] | beam.Map(lambda r: (r.doc_id, r.source, r.record, r.reason)),
            equal_to(
                [
                    (content_id("   \n\t "), "", 0, "empty"),
                    (content_id("\u200b" * 300), "", 0, "empty"),
                    ("invisible", "", 0, "empty"),
                    (content_id("Too short."), "", 0, "below_min_chunk_size"),
                    ("no-text", "", 0, "missing_text"),
                    ("null-text", "", 0, "missing_text"),
                    ("number-text", "", 0, "missing_text"),
                    ("doc-none", "", 0, "missing_text"),
                    ("", "", 0, "not_text"),
                    ("", "", 0, "not_text"),
                    (content_id(PROSE), "", 0, "chunker_error"),
                    ("r9", "f.jsonl", 9, "below_min_chunk_size"),
                ]
            ),
            label="CheckRejects",
        )
        assert_that(
            out[REJECTS] | "Messages" >> beam.Filter(lambda r: r.reason in ("chunker_error", "not_text")),
            lambda rejects: _check_messages(rejects),
            label="CheckMessages",
        )
        prose_ids = [content_id(PROSE)] * len(library_chunks(PROSE, "p"))
        assert_that(out.chunks | beam.Map(lambda c: c.metadata.doc_id), equal_to(prose_ids))


def _check_messages(rejects: list) -> None:
    messages = sorted(r.message for r in rejects)
    assert messages == [
        "RuntimeError: boom",
        "expected str, dict, beam.Row or Document, got bytes",
        "expected str, dict, beam.Row or Document, got int",
    ], messages
    assert all(r.reason in REJECT_REASONS for r in rejects)


def test_lone_surrogates_are_rejected_in_texts_and_made_encodable_in_ids_and_sources() -> None:
    """Text Python holds but UTF-8 cannot (JSON's "\\ud800"), in Documents and SourceRecords (pickled, so they
    reach ChunkText; a plain str or dict holding one fails in Beam's own coder first)."""
    elements = [
        Document(PROSE[:300] + "\ud800" + PROSE[300:], "bad-text"),
        SourceRecord("dir/\udc80.jsonl", 3, "bad-\udcff-id", PROSE),
        Document(None, "bad-\udcff-none", "\udc80"),  # type: ignore[arg-type]
    ]
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create(elements) | ChunkText(SETTINGS)
        fields = beam.Map(lambda r: repr((r.doc_id, r.source, r.reason, r.message, r.excerpt[:3])).encode())
        surrogate = "lone surrogate U+D800 at character 300 of the text: not encodable as UTF-8"
        assert_that(
            out[REJECTS] | fields | beam.Map(bytes.decode),
            equal_to(
                [
                    repr(("bad-text", "", "invalid_utf8", surrogate, PROSE[:3])),
                    repr(("bad-\\udcff-none", "\\udc80", "missing_text", "'text' is null, not a string", "")),
                ]
            ),
            label="Rejects",
        )
        chunks = out.chunks | beam.Map(lambda c: (c.metadata.doc_id, c.metadata.source, c.text.encode("utf-8")))
        expected = [("bad-\\udcff-id", "dir/\\udc80.jsonl", c[2].encode()) for c in library_chunks(PROSE, "x")]
        assert_that(chunks, equal_to(expected), label="Chunks")


def test_per_document_gives_one_list_a_document() -> None:
    records = [SourceRecord("a.txt", 0, "a", PROSE), SourceRecord("b.jsonl", 4, "b", CODE)]
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create(records) | ChunkText(SETTINGS, per_document=True)
        assert_that(
            out.chunks | beam.Map(lambda chunks: (chunks[0].metadata.doc_id, [key(c) for c in chunks])),
            equal_to([("a", library_chunks(PROSE, "a", "a.txt")), ("b", library_chunks(CODE, "b", "b.jsonl"))]),
            label="CheckLists",
        )
        assert_that(
            out.chunks | "Records" >> beam.Map(lambda chunks: {c.metadata.extra["record"] for c in chunks}),
            equal_to([{0}, {4}]),
            label="CheckRecordCarried",
        )


def test_runs_on_worker_processes() -> None:
    options = PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    texts = [PROSE, CODE, ARABIC, "short"]
    expected = library_chunks(PROSE, content_id(PROSE)) + library_chunks(CODE, content_id(CODE))
    expected += library_chunks(ARABIC, content_id(ARABIC))
    with beam.Pipeline(options=options) as pipeline:
        out = pipeline | beam.Create(texts) | ChunkText(SETTINGS)
        assert_that(out.chunks | beam.Map(key), equal_to(expected), label="CheckChunks")
        assert_that(out[REJECTS] | beam.Map(lambda r: r.reason), equal_to(["below_min_chunk_size"]), label="Rejects")


def test_settings_are_checked_when_the_transform_is_built(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        ChunkText(ChunkingSettings(min_size=900, max_size=300))
    assert "min_size (900) > max_size (300): every chunk target collapses to min_size" in caplog.text


def test_the_librarys_chunk_config_gives_the_same_chunks_as_the_yaml_section() -> None:
    config = ChunkConfig(min_size=80, max_size=600, overlap=40)
    texts = [PROSE, CODE, ARABIC]
    expected = [repr(c) for t in texts for c in SETTINGS.chunker().chunk(t, content_id(t))]
    assert expected and all("'density'" in row for row in expected)
    with BeamTestPipeline() as pipeline:
        texts_in = pipeline | beam.Create(texts)
        for name, chunking in (("Settings", SETTINGS), ("Config", config)):
            out = texts_in | name >> ChunkText(chunking)
            assert_that(out.chunks | f"Repr{name}" >> beam.Map(repr), equal_to(expected), label=f"Check{name}")


def test_document_field_and_metadata_fields_pick_a_dicts_or_rows_keys() -> None:
    elements = [
        {"body": PROSE, "text": "not this one", "id": "p", "title": "Prose", "team": "search"},
        beam.Row(body=CODE, id="c", title="Code", team="infra"),
        {"body": ARABIC, "id": "a"},  # no title: the chunks carry no title
        {"text": PROSE, "id": "no-body"},
        {"body": None, "id": "null-body"},
    ]
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create(elements) | ChunkText(SETTINGS, document_field="body", metadata_fields=["title"])
        fields = ("title", "team", "text")
        carried = beam.Map(
            lambda c: (c.metadata.doc_id, c.text, {k: v for k, v in c.metadata.extra.items() if k in fields})
        )
        assert_that(
            out.chunks | carried,
            equal_to(
                [
                    (doc_id, c.text, title)
                    for doc_id, text, title in (
                        ("p", PROSE, {"title": "Prose"}),
                        ("c", CODE, {"title": "Code"}),
                        ("a", ARABIC, {}),
                    )
                    for c in SETTINGS.chunker().chunk(text, doc_id)
                ]
            ),
            label="Chunks",
        )
        assert_that(
            out[REJECTS] | beam.Map(lambda r: (r.doc_id, r.reason, r.message)),
            equal_to(
                [
                    ("no-body", "missing_text", "no 'body' key"),
                    ("null-body", "missing_text", "'body' is null, not a string"),
                ]
            ),
            label="Rejects",
        )


def test_without_metadata_fields_every_field_but_the_document_field_id_and_source_is_carried() -> None:
    element = {"body": PROSE, "text": "another field", "id": "p", "source": "s", "team": "search"}
    with BeamTestPipeline() as pipeline:
        out = pipeline | beam.Create([element]) | ChunkText(SETTINGS, document_field="body")
        extras = out.chunks | beam.Map(
            lambda c: (c.metadata.extra["text"], c.metadata.extra["team"], sorted(c.metadata.extra))
        )
        keys = ["density", "target_size", "team", "text"]
        assert_that(extras, equal_to([("another field", "search", keys)] * len(library_chunks(PROSE, "p"))))


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"document_field": ""}, ValueError),
        ({"metadata_fields": "title"}, TypeError),  # a string would be read as its letters
        ({"metadata_fields": ["title", 3]}, TypeError),
    ],
)
def test_bad_fields_are_refused_when_the_transform_is_built(arguments: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ChunkText(SETTINGS, **arguments)
