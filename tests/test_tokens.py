"""``size_unit: tokens`` with the real Llama 2 tokenizer wordllama's wheel ships.

The random-text contract and determinism in tokens are tests/test_chunker_properties.py's, whose
configs draw both units.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

from pipelines.cli.rechunk import main, run
from pipelines.errors import SettingsError
from pipelines.rag import to_beam_chunk
from pipelines.settings import ChunkingSettings, Settings, config_fingerprint, load_settings
from pipelines.settings import main as settings_main
from tests.chunk_checks import assert_chunk_contract
from tests.common import LLAMA_TOKENIZER, REPO
from tests.output_checks import assert_chunks_are_slices, read_chunks, source_texts
from zerda_core.chunks import AdaptiveChunker, ChunkConfig
from zerda_core.chunks import tokens as tokens_module
from zerda_core.chunks.tokens import TOKEN_WINDOW, _load, load_tokenizer, tokenizer_path

DATA = REPO / "tests/data"


def token_chunker(**sizes: int) -> AdaptiveChunker:
    return AdaptiveChunker(ChunkConfig(size_unit="tokens", tokenizer=LLAMA_TOKENIZER, **sizes))


@pytest.mark.parametrize("path", sorted(DATA.iterdir()), ids=lambda p: p.name)
@pytest.mark.parametrize(("lo", "hi", "overlap"), [(16, 64, 8), (64, 256, 32), (128, 512, 0)])
def test_contract_in_tokens_on_real_text(path: Path, lo: int, hi: int, overlap: int) -> None:
    text = path.read_text(encoding="utf-8")
    chunker = token_chunker(min_size=lo, max_size=hi, overlap=overlap, min_chunk_size=20)
    chunks = chunker.chunk(text)
    assert_chunk_contract(chunker, text, chunks)
    assert len(chunks) > 1 or chunks[0].metadata.extra["token_count"] <= hi


def test_a_document_longer_than_one_tokenizer_window() -> None:
    """Past ``TOKEN_WINDOW`` characters the document is tokenized in pieces: offsets stay the document's."""
    unit = (DATA / "english_prose.txt").read_text(encoding="utf-8") + "\n\n"
    text = unit * (TOKEN_WINDOW // len(unit) + 2)
    chunker = token_chunker(min_size=64, max_size=256, overlap=32)
    measure = load_tokenizer(LLAMA_TOKENIZER).measure(text)
    assert len(text) > TOKEN_WINDOW and list(measure.starts) == sorted(measure.starts)
    assert measure.ends[-1] == len(text) and measure.size(0, len(text)) == len(measure.starts)
    assert_chunk_contract(chunker, text, chunker.chunk(text))


def test_targets_are_tokens_not_characters() -> None:
    text = (DATA / "english_prose.txt").read_text(encoding="utf-8")
    chunks = token_chunker(min_size=50, max_size=50, overlap=0).chunk(text)
    counts = [c.metadata.extra["token_count"] for c in chunks]
    assert all(c.metadata.extra["target_size"] == 50 for c in chunks)
    assert max(counts) <= 50 < max(c.char_count for c in chunks), "50 tokens span more than 50 characters"
    assert sum(counts) / len(counts) >= 30, "chunks are filled towards the target"


def test_a_character_of_more_tokens_than_the_target_is_the_one_exception() -> None:
    """An emoji is 4 byte tokens in Llama 2 (5 alone, with the word-start token): a target of 2 cannot hold it."""
    text = "😀" * 40
    chunker = token_chunker(min_size=2, max_size=2, overlap=0, min_chunk_size=1)
    chunks = chunker.chunk(text)
    assert_chunk_contract(chunker, text, chunks, hard_bound=False)
    assert {c.text for c in chunks} == {"😀"} and {c.metadata.extra["token_count"] for c in chunks} == {5}


def test_characters_stay_the_default_without_token_counts() -> None:
    text = (DATA / "guide.md").read_text(encoding="utf-8")
    chunks = AdaptiveChunker().chunk(text)
    assert AdaptiveChunker().size_unit == "characters"
    assert all("token_count" not in c.metadata.extra for c in chunks)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size_unit": "tokens"}, "ChunkConfig.tokenizer must be a tokenizer.json path"),
        ({"tokenizer": LLAMA_TOKENIZER}, "unset (None) when size_unit is characters"),
        ({"size_unit": "bytes"}, "ChunkConfig.size_unit must be one of characters, tokens"),
        ({"size_unit": "tokens", "tokenizer": "/nonexistent/tokenizer.json"}, "cannot read tokenizer"),
        ({"size_unit": "tokens", "tokenizer": str(REPO / "setup.py")}, "is not a tokenizer.json file"),
        ({"size_unit": "tokens", "tokenizer": "package:no_such_package/t.json"}, "is not installed"),
        ({"size_unit": "tokens", "tokenizer": "/dev/zero"}, "not a regular file (a character device)"),  # read forever
        ({"size_unit": "tokens", "tokenizer": str(REPO)}, "not a regular file (a directory)"),
    ],
)
def test_config_refuses_a_bad_unit_or_tokenizer(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=r"^ChunkConfig") as info:
        ChunkConfig(**kwargs)  # type: ignore[arg-type]
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_fifo_or_an_oversized_file_as_tokenizer_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "tokenizer.json"
    os.mkfifo(fifo)  # opening it would block until a writer comes
    with pytest.raises(ValueError, match=r"not a regular file \(a FIFO\)"):
        ChunkConfig(size_unit="tokens", tokenizer=str(fifo))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    monkeypatch.setattr(tokens_module, "MAX_TOKENIZER_BYTES", 1024)
    with pytest.raises(ValueError, match=r"2,048 bytes, over 1,024: not a tokenizer.json"):
        ChunkConfig(size_unit="tokens", tokenizer=str(big))


def test_without_the_tokenizers_package_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # the file's path first: finding it imports wordllama, which imports tokenizers (unless an earlier test did)
    path = str(tokenizer_path(LLAMA_TOKENIZER))
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # an import of it now fails, as when it is not installed
    _load.cache_clear()
    with pytest.raises(ValueError, match=r"needs the tokenizers package: pip install 'zerda\[tokens\]'"):
        ChunkConfig(size_unit="tokens", tokenizer=path)
    _load.cache_clear()


def test_an_edited_tokenizer_file_is_reloaded_and_changes_the_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    shutil.copy(tokenizer_path(LLAMA_TOKENIZER), path)
    settings = ChunkingSettings(size_unit="tokens", tokenizer=str(path))
    before = config_fingerprint(settings)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["normalizer"] = None
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_tokenizer(str(path)).digest != load_tokenizer(LLAMA_TOKENIZER).digest
    assert config_fingerprint(settings) != before


def test_unit_and_tokenizer_enter_the_fingerprint() -> None:
    default = Settings().fingerprint
    tokens = Settings.from_dict({"chunking": {"size_unit": "tokens", "tokenizer": LLAMA_TOKENIZER}})
    assert tokens.fingerprint != default
    assert tokens.config_fingerprint != Settings().config_fingerprint
    assert tokens.chunking.chunker().size_unit == "tokens"


@pytest.mark.parametrize(
    ("yaml", "message"),
    [
        ("chunking:\n  size_unit: tokens\n", "chunking: ChunkConfig.tokenizer must be a tokenizer.json path"),
        ("chunking:\n  size_unit: words\n", "chunking.size_unit must be one of 'characters', 'tokens'"),
        ("chunking:\n  size_unit: tokens\n  tokenizer: /nonexistent/t.json\n", "cannot read tokenizer"),
        ("chunking:\n  size_unit: tokens\n  tokenizer: BAD_FILE\n", "is not a tokenizer.json file"),
        ("chunking:\n  tokenizer: 3\n", "chunking.tokenizer must be a non-empty string or null"),
    ],
)
def test_yaml_errors_exit_2_in_one_line(
    yaml: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_file = tmp_path / "bad.json"
    bad_file.write_text("{not json", encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.replace("BAD_FILE", str(bad_file)), encoding="utf-8")
    with pytest.raises(SettingsError):
        load_settings(config)
    assert settings_main([str(config)]) == 2
    assert message in capsys.readouterr().err
    output = tmp_path / "out"
    assert main(["--input", str(DATA), "--output", str(output), "--config", str(config), "--quiet"]) == 2
    err = capsys.readouterr().err
    problem = [line for line in err.splitlines() if message in line]
    assert len(problem) == 1, err
    assert not output.exists()


def test_pipeline_writes_token_counts_within_max_size(tmp_path: Path) -> None:
    config = tmp_path / "tokens.yaml"
    config.write_text(
        f"chunking:\n  size_unit: tokens\n  tokenizer: {LLAMA_TOKENIZER}\n"
        "  min_size: 32\n  max_size: 96\n  overlap: 16\n",
        encoding="utf-8",
    )
    output = tmp_path / "out"
    run(["--input", str(DATA), "--output", str(output), "--config", str(config), "--quiet"])
    table = read_chunks(output)
    assert_chunks_are_slices(table, source_texts([str(DATA)]))
    counts = table["token_count"].to_pylist()
    assert counts and None not in counts and max(counts) <= 96
    assert counts == load_tokenizer(LLAMA_TOKENIZER).count(table["text"].to_pylist())
    assert pc.max(table["target_size"]).as_py() <= 96


def test_rag_chunks_carry_the_token_count() -> None:
    text = (DATA / "guide.md").read_text(encoding="utf-8")
    chunk = token_chunker(min_size=32, max_size=96).chunk(text)[0]
    assert to_beam_chunk(chunk, "fp").metadata["token_count"] == chunk.metadata.extra["token_count"] <= 96


def test_an_incremental_run_after_switching_to_tokens_rechunks_everything(tmp_path: Path) -> None:
    output = tmp_path / "out"
    run(["--input", str(DATA), "--output", str(output), "--quiet"])
    config = tmp_path / "tokens.yaml"
    config.write_text(f"chunking:\n  size_unit: tokens\n  tokenizer: {LLAMA_TOKENIZER}\n", encoding="utf-8")
    manifest = run(["--input", str(DATA), "--output", str(output), "--config", str(config), "--incremental", "--quiet"])
    assert manifest["changes"]["incremental"] is False and "settings changed" in manifest["changes"]["reason"]
    counts = read_chunks(output)["token_count"].to_pylist()
    assert counts and None not in counts
    again = run(["--input", str(DATA), "--output", str(output), "--config", str(config), "--incremental", "--quiet"])
    assert again["changes"]["incremental"] is True and again["changes"]["chunks_added"] == 0
