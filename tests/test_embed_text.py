"""The opt-in ``embed_text``: a chunk's context before its text, for embedding, while ``text`` stays the slice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from apache_beam.ml.transforms.base import MLTransform
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines import embed_text
from pipelines.chunk_text import ChunkText
from pipelines.cli.rechunk import main, run
from pipelines.embed_text import check_template, render, template_problem
from pipelines.errors import SettingsError
from pipelines.rag import ZerdaChunker
from pipelines.settings import ChunkingSettings, Settings
from pipelines.settings import main as check_config
from tests.common import DATA, REPO
from tests.output_checks import assert_chunks_are_slices, read_chunks, read_manifest, source_texts
from zerda_core.chunks import ChunkConfig

TEMPLATE = "{section}\n\n{text}"
GUIDE = (DATA / "guide.md").read_text(encoding="utf-8")
SETTINGS = ChunkingSettings(min_size=80, max_size=600, overlap=40)


def _config(path: Path, template: str, *, incremental: bool = False) -> Path:
    escaped = template.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    lines = ["output:", f'  embed_text: "{escaped}"', *(["  incremental: true"] if incremental else [])]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{author}: {text}", "unknown placeholder {author}"),
        ("{section}", "must contain {text}"),
        ("{text!r}", "no format spec or conversion"),
        ("{text:>20}", "no format spec or conversion"),
        ("{text.upper}", "unknown placeholder {text.upper}"),
        ("{0} {text}", "unknown placeholder {0}"),
        ("{} {text}", "unknown placeholder {}"),
        ("{text", "is not a template"),
        ("} {text}", "is not a template"),
    ],
)
def test_a_bad_template_is_named_in_one_line(template: str, problem: str) -> None:
    found = template_problem(template)
    assert found is not None and problem in found and "\n" not in found
    with pytest.raises(SettingsError, match=r"output\.embed_text"):
        Settings.from_dict({"output": {"embed_text": template}})
    with pytest.raises(ValueError, match="embed_text"):
        ChunkText(SETTINGS, embed_text=template)


def test_templates_render_the_context_and_keep_literal_braces() -> None:
    assert check_template(None) is None
    assert template_problem("{{{doc_id}}} {source}: {section} | {text}") is None
    chunk = next(c for c in SETTINGS.chunker().chunk(GUIDE, "guide", "guide.md") if c.metadata.extra.get("section"))
    rendered = render("{{{doc_id}}} {source}: {section} | {text}", chunk)
    assert rendered == f"{{guide}} guide.md: {chunk.metadata.extra['section']} | {chunk.text}"
    plain = SETTINGS.chunker().chunk("A plain sentence of prose. " * 20, "p", "p.txt")[0]
    assert render(TEMPLATE, plain) == plain.text, "no heading: context of white space only is left out"
    assert render("{text}\n\n{section}", plain) == plain.text
    assert render("{doc_id}: {section}\n\n{text}", plain) == "p: \n\n" + plain.text, "other context is kept"
    assert render("{text} | {text}", plain) == f"{plain.text} | {plain.text}"


def test_the_template_is_in_the_fingerprint_and_off_by_default() -> None:
    default = Settings()
    assert default.output.embed_text is None
    on = Settings.from_dict({"output": {"embed_text": TEMPLATE}})
    other = Settings.from_dict({"output": {"embed_text": "{doc_id}: {text}"}})
    assert len({default.fingerprint, on.fingerprint, other.fingerprint}) == 3


def test_a_new_rendering_moves_the_fingerprints_of_templates_only(monkeypatch: pytest.MonkeyPatch) -> None:
    default, on = Settings(), Settings.from_dict({"output": {"embed_text": TEMPLATE}})
    before = [default.fingerprint, default.config_fingerprint, on.fingerprint, on.config_fingerprint]
    monkeypatch.setattr(embed_text, "RENDERING", embed_text.RENDERING + 1)
    after = [default.fingerprint, default.config_fingerprint, on.fingerprint, on.config_fingerprint]
    assert after[:2] == before[:2], "an output without a template keeps its fingerprint"
    assert after[2] != before[2] and after[3] != before[3], "rows rendered another way are other rows"


def test_a_bad_template_stops_the_job_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path / "bad.yaml", "{author}: {text}")
    assert check_config([str(config)]) == 2
    assert "output.embed_text has an unknown placeholder {author}" in capsys.readouterr().err
    output = tmp_path / "out"
    assert main(["--input", str(DATA), "--output", str(output), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    problems = [line for line in err.splitlines() if "embed_text" in line]
    assert len(problems) == 1 and len(err.splitlines()) <= 2 and "Traceback" not in err, err
    assert not output.exists()


def test_the_job_fills_embed_text_and_keeps_text_the_exact_slice(tmp_path: Path) -> None:
    output = tmp_path / "out"
    config = _config(tmp_path / "embed.yaml", TEMPLATE)
    run(["--input", str(DATA), "--output", str(output), "--config", str(config), "--quiet"])
    table = read_chunks(output)
    assert_chunks_are_slices(table, source_texts([str(DATA)]))
    rows = table.to_pylist()
    context = [f"{row['section']}\n\n" if row["section"] else "" for row in rows]
    assert rows and all(row["embed_text"] == c + row["text"] for c, row in zip(context, rows, strict=True))
    guide = table.filter(pc.equal(table["doc_id"], "guide.md")).to_pylist()
    configuration = [r for r in guide if r["section"] == "Deploying the ingestion API > Configuration"]
    assert configuration, "the Markdown sample's chunks carry their heading path"
    assert all(r["embed_text"].startswith("Deploying the ingestion API > Configuration\n\n") for r in configuration)
    assert read_manifest(output)["settings"]["output"]["embed_text"] == TEMPLATE


def test_switching_embed_text_on_runs_in_full_and_fills_the_column(tmp_path: Path) -> None:
    corpus, output = tmp_path / "corpus", tmp_path / "out"
    corpus.mkdir()
    (corpus / "guide.md").write_text(GUIDE, encoding="utf-8")
    (corpus / "notes.txt").write_text("The fennec fox sleeps by day in a burrow. " * 30, encoding="utf-8")
    argv = ["--input", str(corpus), "--output", str(output), "--quiet"]
    run(argv)
    assert set(read_chunks(output)["embed_text"].to_pylist()) == {None}, "off: the column is there, null"
    manifest = run([*argv, "--config", str(_config(tmp_path / "on.yaml", "{source}: {text}", incremental=True))])
    assert manifest["changes"]["incremental"] is False
    assert "settings changed" in manifest["changes"]["reason"]
    rows = sorted(read_chunks(output).to_pylist(), key=lambda row: row["chunk_id"])
    assert rows and all(row["embed_text"] == f"{row['source']}: {row['text']}" for row in rows)
    again = run([*argv, "--config", str(tmp_path / "on.yaml")])
    assert again["changes"]["incremental"] is True and again["changes"]["chunks_added"] == 0
    assert sorted(read_chunks(output).to_pylist(), key=lambda row: row["chunk_id"]) == rows, "carried as written"


def test_chunk_text_carries_the_rendered_text_in_extra() -> None:
    with BeamTestPipeline() as pipeline:
        chunks = pipeline | beam.Create([{"text": GUIDE, "id": "guide"}]) | ChunkText(SETTINGS, embed_text=TEMPLATE)
        assert_that(
            chunks.chunks | beam.Map(lambda c: c.metadata.extra["embed_text"] == render(TEMPLATE, c)),
            lambda flags: None if flags and all(flags) else pytest.fail(f"not rendered: {flags}"),
        )


def _content_and_metadata(chunk: Any) -> tuple[str, str | None, int, int]:
    return chunk.content.text, chunk.metadata.get("text"), chunk.metadata["start_char"], chunk.metadata["end_char"]


@pytest.mark.parametrize("template", [TEMPLATE, None])
def test_zerda_chunker_embeds_the_rendered_text_and_keeps_the_slice_in_metadata(
    tmp_path: Path, template: str | None
) -> None:
    config = ChunkConfig(min_size=80, max_size=600, overlap=40)
    chunker = ZerdaChunker(config, embed_text=template)
    with BeamTestPipeline() as pipeline:
        chunks = (
            pipeline
            | beam.Create([{"text": GUIDE, "id": "guide", "source": "guide.md", "embed_text": "a field"}])
            | MLTransform(write_artifact_location=str(tmp_path)).with_transform(chunker)
        )
        library = ChunkText(config).chunking.chunker()
        expected = []
        for c in library.chunk(GUIDE, "guide", "guide.md"):
            sliced = GUIDE[c.metadata.start_char : c.metadata.end_char]
            if template is None:
                expected.append((sliced, None, c.metadata.start_char, c.metadata.end_char))
            else:
                section = c.metadata.extra.get("section")
                content = f"{section}\n\n{sliced}" if section else sliced
                expected.append((content, sliced, c.metadata.start_char, c.metadata.end_char))
        assert_that(chunks | beam.Map(_content_and_metadata), equal_to(expected))
        # the rendered text is the content, not metadata; without a template a document's own field is metadata
        field = None if template is not None else "a field"
        assert_that(
            chunks | "EmbedKey" >> beam.Map(lambda c: c.metadata.get("embed_text")),
            lambda values: None if set(values) == {field} else pytest.fail(f"embed_text in metadata: {values}"),
            label="CheckEmbedKey",
        )


def test_the_docs_name_the_column_and_the_option() -> None:
    assert "`embed_text`" in (REPO / "docs/output.md").read_text(encoding="utf-8")
    assert "embed_text=" in (REPO / "docs/beam.md").read_text(encoding="utf-8")


PROSE = "The fennec fox sleeps by day in a burrow and hunts beetles and gerbils at night. "


def _titled_config(path: Path, template: str, *, incremental: bool = False) -> Path:
    _config(path, template, incremental=incremental)
    path.write_text(path.read_text(encoding="utf-8") + "input:\n  title_field: title\n", encoding="utf-8")
    return path


def test_title_fields_fill_title_in_jsonl_and_parquet(tmp_path: Path) -> None:
    corpus, output = tmp_path / "corpus", tmp_path / "out"
    corpus.mkdir()
    rows = [
        {"id": "fox", "title": "Fennec fox", "text": PROSE * 12},
        {"id": "none", "text": PROSE * 11},  # no title: the template's blank context is left out
        {"id": "number", "title": 7, "text": PROSE * 10},  # not a string: no title, the document is kept
        {"id": "long", "title": "T" * 500, "text": PROSE * 9},
        {"id": "surrogate", "title": "caf\ud800e", "text": PROSE * 8},  # a lone surrogate: U+FFFD
    ]
    (corpus / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    table = pa.table({"id": ["pq"], "title": ["Parquet title"], "text": [PROSE * 7]})
    pq.write_table(table, corpus / "b.parquet")
    config = _titled_config(tmp_path / "titled.yaml", "{title}\n\n{text}")
    manifest = run(["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet"])
    assert not any(manifest["counts"]["rejects"].values())
    expected = {
        "fox": "Fennec fox\n\n",
        "none": "",
        "number": "",
        "long": "T" * 199 + "…\n\n",
        "surrogate": "caf\ufffde\n\n",
        "pq": "Parquet title\n\n",
    }
    chunks = read_chunks(output).to_pylist()
    assert {row["doc_id"] for row in chunks} == set(expected)
    for row in chunks:
        assert row["embed_text"] == expected[row["doc_id"]] + row["text"], row["doc_id"]


def test_a_new_title_makes_the_document_changed_in_an_incremental_run(tmp_path: Path) -> None:
    corpus, output = tmp_path / "corpus", tmp_path / "out"
    corpus.mkdir()
    lines = [{"id": f"d{i}", "title": f"Title {i}", "text": PROSE * (8 + i)} for i in range(3)]
    path = corpus / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    config = _titled_config(tmp_path / "titled.yaml", "{title}: {text}", incremental=True)
    argv = ["--input", str(corpus), "--output", str(output), "--config", str(config), "--quiet"]
    run(argv)
    lines[1]["title"] = "A new title"  # the text is the same
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    manifest = run(argv)
    assert manifest["changes"]["incremental"] is True
    assert manifest["changes"]["documents_changed"] == 1 and manifest["changes"]["documents_unchanged"] == 2
    titles = {row["doc_id"]: row["embed_text"].split(": ")[0] for row in read_chunks(output).to_pylist()}
    assert titles == {"d0": "Title 0", "d1": "A new title", "d2": "Title 2"}


def test_a_beam_element_s_title_fills_title() -> None:
    with BeamTestPipeline() as p:
        chunks = (
            p
            | beam.Create([{"id": "fox", "title": "Fennec fox", "text": PROSE * 10}, {"id": "bare", "text": PROSE * 9}])
            | ChunkText(SETTINGS, embed_text="{title}\n\n{text}")
        ).chunks
        pairs = chunks | beam.Map(lambda c: (c.metadata.doc_id, c.metadata.extra["embed_text"].startswith("Fennec")))
        assert_that(pairs | beam.Distinct(), equal_to([("fox", True), ("bare", False)]))


def test_a_title_field_that_is_the_text_or_the_id_is_refused() -> None:
    for field in ("text", "id"):
        with pytest.raises(SettingsError, match=r"input\.title_field is"):
            Settings.from_dict({"input": {"title_field": field}})
