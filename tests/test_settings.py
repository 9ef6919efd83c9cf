"""Run settings: defaults, validation messages naming the key, configs/, fingerprint, reference."""

from __future__ import annotations

import dataclasses
import logging
import pickle
from pathlib import Path

import pytest

import zerda_core
from pipelines import settings as settings_module
from pipelines.errors import SettingsError
from pipelines.settings import (
    ChunkingSettings,
    Settings,
    as_chunking_settings,
    config_fingerprint,
    load_settings,
    main,
    settings_reference,
    settings_reference_markdown,
)
from tests.common import LLAMA_TOKENIZER, REPO
from zerda_core.chunks import adaptive_chunker
from zerda_core.chunks.config import ChunkConfig

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


SIZE_RULE = "an integer in [1, 2147483647]"
BUCKET_RULE = "output.bucket_width must be a number in [0.001, 1] (at most 1000 density buckets),"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(data: object) -> str:
    with pytest.raises(SettingsError) as info:
        Settings.from_dict(data)  # type: ignore[arg-type]
    return str(info.value)


def test_defaults_are_the_documented_ones() -> None:
    assert Settings().to_dict() == {
        "chunking": {
            "base_size": 512,
            "min_size": 100,
            "max_size": 1500,
            "overlap": 128,
            "technical_threshold": 0.5,
            "min_chunk_size": 100,
            "language": "auto",
            "density_scope": "document",
            "size_unit": "characters",
            "tokenizer": None,
        },
        "input": {
            "text_field": "text",
            "id_field": "id",
            "title_field": None,
            "encoding_errors": "strict",
            "max_document_chars": 50_000_000,
            "max_file_bytes": 10_000_000_000,
            "split_bytes": 64 << 20,
            "formats": {},
            "default_format": None,
            "max_reject_rows": 1000,
        },
        "output": {
            "bucket_width": 0.1,
            "compression": "zstd",
            "max_rows_per_file": 100_000,
            "incremental": False,
            "embed_text": None,
            "table": None,
            "catalog": {},
        },
        "enrich": {"keywords": False, "top_k": 5},
    }
    assert load_settings(None) == Settings()
    assert Settings.from_dict({}) == Settings() == Settings.from_dict(None)


def test_default_yaml_spells_out_exactly_the_defaults() -> None:
    assert load_settings(REPO / "configs" / "default.yaml") == Settings()


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_every_config_in_configs_loads(config: Path) -> None:
    settings = load_settings(config)
    assert Settings.from_dict(settings.to_dict()) == settings


def test_the_named_configs_exist_and_differ_as_described() -> None:
    names = {c.name for c in CONFIGS}
    assert {"default.yaml", "technical.yaml", "prose.yaml", "dataflow.yaml", "flink.yaml"} <= names
    configs = REPO / "configs"
    default = load_settings(configs / "default.yaml").chunking
    technical = load_settings(configs / "technical.yaml").chunking
    prose = load_settings(configs / "prose.yaml").chunking
    for size in ("base_size", "min_size", "max_size"):
        assert getattr(technical, size) < getattr(default, size) < getattr(prose, size)


@pytest.mark.parametrize(
    ("config", "options"),
    [
        (
            "dataflow.yaml",
            ["--runner DataflowRunner", "--project", "--region", "--temp_location gs://", "--setup_file"],
        ),
        ("flink.yaml", ["--runner FlinkRunner", "--flink_master", "--environment_type", "PortableRunner"]),
    ],
)
def test_runner_configs_show_the_runner_options(config: str, options: list[str]) -> None:
    text = (REPO / "configs" / config).read_text(encoding="utf-8")
    comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    for option in options:
        assert option in comments


def test_to_dict_round_trips_and_pickles() -> None:
    settings = Settings.from_dict({"chunking": {"base_size": 300, "min_size": 80}, "enrich": {"keywords": True}})
    assert Settings.from_dict(settings.to_dict()) == settings
    assert pickle.loads(pickle.dumps(settings.to_dict())) == settings.to_dict()
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().chunking.base_size = 3  # type: ignore[misc]


def test_chunk_config_carries_every_chunking_setting_and_converts_back() -> None:
    """Every ChunkConfig field differs from its default: a field either direction drops or misnames fails."""
    settings = Settings.from_dict(
        {
            "chunking": {
                "base_size": 300,
                "min_size": 80,
                "max_size": 800,
                "overlap": 64,
                "technical_threshold": 0.7,
                "min_chunk_size": 50,
                "density_scope": "section",
                "size_unit": "tokens",
                "tokenizer": LLAMA_TOKENIZER,
            }
        }
    )
    config = ChunkConfig(
        base_size=300,
        min_size=80,
        max_size=800,
        overlap=64,
        technical_threshold=0.7,
        min_chunk_size=50,
        density_scope="section",
        size_unit="tokens",
        tokenizer=LLAMA_TOKENIZER,
    )
    assert all(getattr(config, f.name) != getattr(ChunkConfig(), f.name) for f in dataclasses.fields(ChunkConfig))
    assert settings.chunking.chunk_config() == config
    assert as_chunking_settings(config) == settings.chunking
    one = as_chunking_settings(ChunkConfig(technical_threshold=1))
    assert config_fingerprint(one) == config_fingerprint(ChunkingSettings(technical_threshold=1.0))  # 1 is 1.0
    assert as_chunking_settings(settings.chunking) is settings.chunking
    assert as_chunking_settings(None) == ChunkingSettings()
    with pytest.raises(TypeError, match="ChunkingSettings or a zerda_core ChunkConfig, got dict"):
        as_chunking_settings({"max_size": 800})  # type: ignore[arg-type]


def test_fingerprint_follows_settings_and_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    default = Settings().fingerprint
    assert len(default) == 16 and int(default, 16) >= 0
    assert Settings().fingerprint == default
    assert Settings.from_dict({"chunking": {"overlap": 64}}).fingerprint != default
    assert Settings.from_dict({"input": {"encoding_errors": "replace"}}).fingerprint != default
    assert Settings.from_dict({"input": {"split_bytes": 1}}).fingerprint == default  # how it is read, not the rows
    chunks = config_fingerprint(ChunkingSettings())
    monkeypatch.setattr(adaptive_chunker, "DENSITY_VERSION", adaptive_chunker.DENSITY_VERSION + 1)
    assert Settings().fingerprint != default  # a new density formula cuts other chunks
    assert config_fingerprint(ChunkingSettings()) != chunks
    monkeypatch.setattr(zerda_core, "__version__", "999.0")
    assert Settings().fingerprint != default


def test_integer_and_float_spellings_give_one_fingerprint() -> None:
    as_int = Settings.from_dict({"output": {"bucket_width": 1}, "chunking": {"technical_threshold": 0}})
    as_float = Settings.from_dict({"output": {"bucket_width": 1.0}, "chunking": {"technical_threshold": 0.0}})
    assert as_int.fingerprint == as_float.fingerprint
    assert isinstance(as_int.output.bucket_width, float)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"chunking": {"base_sise": 3}}, "unknown key in chunking: 'base_sise' (did you mean 'base_size'?)"),
        ({"chunks": {}}, "unknown section: 'chunks' (did you mean 'chunking'?)"),
        ({"zzz": 1}, "unknown section: 'zzz' (known: chunking, input, output, enrich)"),
        ({"chunking": {"base_size": "512"}}, f"chunking.base_size must be {SIZE_RULE}, got '512' (str)"),
        ({"chunking": {"max_size": 1500.0}}, f"chunking.max_size must be {SIZE_RULE}, got 1500.0 (float)"),
        ({"chunking": {"min_size": True}}, "chunking.min_size must be an integer in [1, 2147483647], got True (bool)"),
        ({"chunking": {"base_size": -5}}, "chunking.base_size must be an integer in [1, 2147483647], got -5 (int)"),
        ({"chunking": {"min_size": 0}}, "chunking.min_size must be an integer in [1, 2147483647], got 0 (int)"),
        ({"chunking": {"max_size": -1}}, "chunking.max_size must be an integer in [1, 2147483647], got -1 (int)"),
        ({"chunking": {"min_chunk_size": -1}}, "chunking.min_chunk_size must be an integer in [0, 2147483647], got -1"),
        ({"chunking": {"overlap": -1}}, "chunking.overlap must be an integer in [0, 2147483647], got -1 (int)"),
        (
            {"chunking": {"technical_threshold": 1.5}},
            "chunking.technical_threshold must be a number in [0, 1], got 1.5 (float)",
        ),
        ({"chunking": {"language": ""}}, "chunking.language must be a non-empty string, got '' (str)"),
        ({"output": {"bucket_width": 0}}, BUCKET_RULE + " got 0 (int)"),
        ({"output": {"bucket_width": 1.5}}, BUCKET_RULE + " got 1.5 (float)"),
        ({"output": {"bucket_width": -0.1}}, BUCKET_RULE + " got -0.1 (float)"),
        ({"output": {"bucket_width": "0.1"}}, BUCKET_RULE + " got '0.1' (str)"),
        ({"output": {"compression": "lzo"}}, "output.compression must be one of 'zstd', 'snappy'"),
        ({"output": {"max_rows_per_file": 0}}, "output.max_rows_per_file must be a positive integer, got 0 (int)"),
        ({"input": {"encoding_errors": "ignore"}}, "input.encoding_errors must be one of 'strict', 'replace'"),
        ({"input": {"text_field": None}}, "input.text_field must be a non-empty string, got None (NoneType)"),
        ({"input": {"max_document_chars": -1}}, "input.max_document_chars must be a positive integer, got -1"),
        ({"input": {"formats": {".html": "xml"}}}, "input.formats must be a mapping of single file suffixes ('.log'"),
        ({"input": {"formats": [".html"]}}, "input.formats must be a mapping of single file suffixes"),
        (
            {"input": {"formats": {"html": "text"}}},
            "input.formats key 'html' can never match a file: a key is one suffix",
        ),
        ({"input": {"formats": {".log.gz": "text"}}}, "input.formats key '.log.gz' can never match a file"),
        ({"input": {"formats": {".GZ": "text"}}}, "input.formats key '.GZ' can never match a file"),
        ({"input": {"formats": {".html ": "text"}}}, "input.formats key '.html ' can never match a file"),
        ({"input": {"formats": {".": "text"}}}, "input.formats key '.' can never match a file"),
        ({"input": {"formats": {".a/b": "text"}}}, "input.formats key '.a/b' can never match a file"),
        (
            {"input": {"text_field": "body", "id_field": "body"}},
            "input.text_field and input.id_field are both 'body': every id would be its whole text",
        ),
        (
            {"input": {"formats": {".log": "text", ".LOG": "jsonl"}}},
            "input.formats keys '.log', '.LOG' are one suffix (suffixes match in any case): keep one",
        ),
        ({"enrich": {"keywords": "yes"}}, "enrich.keywords must be true or false, got 'yes' (str)"),
        ({"enrich": {"top_k": 0}}, "enrich.top_k must be a positive integer, got 0 (int)"),
        ({"enrich": [1, 2]}, "enrich must be a mapping of keys, got [1, 2] (list)"),
        ({"chunking": 0}, "chunking must be a mapping of keys, got 0 (int)"),
        ([1, 2], "settings must be a mapping of sections, got [1, 2] (list)"),
    ],
)
def test_bad_settings_name_the_key(data: object, expected: str) -> None:
    assert expected in error_of(data)


def test_accepts_the_edges_of_each_range() -> None:
    settings = Settings.from_dict(
        {
            "chunking": {"min_size": 700, "max_size": 700, "overlap": 0, "min_chunk_size": 0, "technical_threshold": 1},
            "output": {"bucket_width": 1},
            "input": {"encoding_errors": "replace"},
        }
    )
    assert settings.chunking.min_size == settings.chunking.max_size == 700
    assert settings.output.bucket_width == 1.0


def test_every_problem_is_reported_at_once() -> None:
    message = error_of({"chunking": {"overlap": -1, "min_size": -2, "typo": 1}, "output": {"bucket_width": 2}})
    lines = message.splitlines()
    assert len(lines) == 4
    assert any("chunking.overlap" in line for line in lines)
    assert any("chunking.min_size must be an integer in [1, 2147483647], got -2" in line for line in lines)
    assert any("'typo'" in line for line in lines)
    assert any("output.bucket_width" in line for line in lines)


def test_sections_validate_when_built_directly() -> None:
    with pytest.raises(SettingsError, match=r"chunking\.overlap must be an integer in \[0, 2147483647\]"):
        ChunkingSettings(overlap=-3)


def test_settings_error_is_a_value_error() -> None:
    assert issubclass(SettingsError, ValueError)


def test_yaml_file_loads_with_defaults_for_missing_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "chunking:\n  base_size: 300\n  min_size: 80\noutput:\n")
    settings = load_settings(path)
    assert settings.chunking.base_size == 300
    assert settings.chunking.max_size == 1500
    assert settings.output == Settings().output


def test_empty_yaml_file_gives_defaults(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, "# nothing set\n")) == Settings()


def test_yaml_error_names_the_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "chunking:\n  overlap: -4\n")
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    assert str(path) in str(info.value)
    assert "chunking.overlap must be an integer in [0, 2147483647], got -4" in str(info.value)


def test_missing_config_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"cannot read config .*nope\.yaml"):
        load_settings(tmp_path / "nope.yaml")


def test_directory_as_config_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read config"):
        load_settings(tmp_path)


def test_unreadable_config_is_a_settings_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def deny(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(settings_module.fsspec, "open", deny)
    with pytest.raises(SettingsError, match=r"cannot read config .*: Permission denied"):
        load_settings(write(tmp_path, "chunking: {}\n"))


@pytest.mark.parametrize(
    "text",
    ["chunking: [unclosed\n", "chunking:\n  base_size: 1\n bad_indent: 2\n", "a: 1\n---\nb: 2\n", "\x00\x01"],
)
def test_invalid_yaml_is_a_settings_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(SettingsError, match="is not valid YAML"):
        load_settings(write(tmp_path, text))


def test_yaml_object_tags_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "chunking: !!python/object/apply:os.system ['echo pwned > /tmp/zerda-pwned']\n")
    with pytest.raises(SettingsError, match="is not valid YAML"):
        load_settings(path)


def test_reference_lists_every_key_once() -> None:
    keys = [doc.key for doc in settings_reference()]
    expected = [f"{section}.{key}" for section, values in Settings().to_dict().items() for key in values]
    assert keys == expected
    defaults = Settings().to_dict()
    for doc in settings_reference():
        section, key = doc.key.split(".")
        assert doc.default == defaults[section][key]
        assert doc.description and doc.allowed and doc.type in {"int", "float", "str", "bool", "map"}


def test_reference_markdown_has_a_row_per_key() -> None:
    table = settings_reference_markdown().splitlines()
    assert table[0].startswith("| key | type | default |")
    assert len(table) == 2 + len(settings_reference())
    assert "| `chunking.base_size` | int | `512` | an integer in [1, 2147483647] |" in table[2]


def test_cli_checks_configs_and_exits_2_on_a_bad_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = REPO / "configs" / "default.yaml"
    assert main([str(good)]) == 0
    assert f"ok, fingerprint {Settings().fingerprint}" in capsys.readouterr().out
    bad = write(tmp_path, "output:\n  bucket_width: 0\n")
    assert main([str(good), str(bad)]) == 2
    assert "output.bucket_width" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["--reference"]) == 0
    assert capsys.readouterr().out == settings_reference_markdown()


def test_min_size_above_max_size_follows_the_library_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rule, the reference page's: allowed, every target collapses to min_size, and a warning says so."""
    path = write(tmp_path, "chunking:\n  min_size: 2000\n  max_size: 1000\n")
    settings = load_settings(path)
    assert settings.chunking.chunk_config().size_warning() == ChunkConfig(min_size=2000, max_size=1000).size_warning()
    with caplog.at_level(logging.WARNING):
        chunker = settings.chunking.chunker()
    assert "min_size (2000) > max_size (1000): every chunk target collapses to min_size" in caplog.text
    assert chunker.target_size(0.0) == chunker.target_size(1.0) == 2000
    assert main([str(path)]) == 0
    captured = capsys.readouterr()
    assert "ok, fingerprint" in captured.out
    assert "warning: min_size (2000) > max_size (1000)" in captured.err


def test_config_fingerprint_follows_only_what_makes_the_chunks() -> None:
    """A chunk's config_fingerprint: the chunking section and the embed_text template, not how files are read or
    written (the run's fingerprint, the manifest's, covers those)."""
    default = Settings().config_fingerprint
    assert len(default) == 16 and default == config_fingerprint(ChunkingSettings())
    layout = {"output": {"bucket_width": 0.2, "compression": "zstd"}, "input": {"max_document_chars": 1000}}
    assert Settings.from_dict(layout).config_fingerprint == default
    assert Settings.from_dict(layout).fingerprint != Settings().fingerprint
    assert Settings.from_dict({"chunking": {"overlap": 64}}).config_fingerprint != default
    template = "{section}\n\n{text}"
    assert Settings.from_dict({"output": {"embed_text": template}}).config_fingerprint != default
    assert config_fingerprint(ChunkingSettings(), template) != default


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"b{i}: &b{i} [{', '.join([f'*{p}'] * 9)}]\n"
                for i, p in enumerate(["a", "b0", "b1", "b2", "b3", "b4", "b5", "b6"])
            ),
            "aliases",
        ),
        ("base: &base {base_size: 400}\nchunking:\n  <<: *base\n", "aliases"),
        ("chunking:\n  <<: {base_size: 400}\n", r"merge keys \(<<\) are not allowed"),  # "no constructor"
        ("chunking:\n  " + "k" * 2000 + ": 1\n", r"a key longer than 1024 characters\?"),
        ("chunking:\n  base_size: " + "9" * 5000 + "\n", "longer than 30 digits"),
        ("chunking:\n  base_size: -" + "1" * 4300 + "\n", "longer than 30 digits"),
        ("chunking:\n  language: 2026-02-30\n", "impossible date"),
        ("chunking:\n  overlap: 10\n  overlap: 20\n", "duplicate key 'overlap'"),
        ("chunking: {}\nchunking: {}\n", "duplicate key 'chunking'"),
        ("- chunking\n- input\n", "must be a mapping of sections"),
        ("just a string\n", "must be a mapping of sections"),
        ("42\n", "must be a mapping of sections"),
    ],
    ids=[
        "alias-bomb",
        "merge-key",
        "inline-merge-key",
        "long-key",
        "huge-int",
        "huge-negative-int",
        "impossible-date",
        "duplicate-key",
        "duplicate-section",
        "list",
        "string",
        "number",
    ],
)
def test_hostile_or_odd_yaml_is_one_line_and_exit_2(
    text: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError, match=expected) as info:
        load_settings(path)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    assert main([str(path)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_duplicate_key_error_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "chunking:\n  overlap: 10\n  base_size: 300\n  overlap: 20\n")
    with pytest.raises(SettingsError, match=r"line 4.*duplicate key 'overlap'"):
        load_settings(path)


@pytest.mark.parametrize("content", [b"\xff\xfe\x00\x01binary", bytes(range(256))], ids=["utf16-bom", "all-bytes"])
def test_binary_config_is_a_settings_error(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    with pytest.raises(SettingsError, match="not UTF-8"):
        load_settings(path)


def test_oversized_config_is_refused_unread(tmp_path: Path) -> None:
    path = write(tmp_path, "# " + "x" * 2_000_000 + "\n")
    with pytest.raises(SettingsError, match="more than a settings file needs"):
        load_settings(path)


def test_anchors_without_aliases_still_load(tmp_path: Path) -> None:
    path = write(tmp_path, "chunking: &c\n  base_size: 400\n")
    assert load_settings(path).chunking.base_size == 400


def test_a_formats_key_that_can_never_match_stops_the_job_with_exit_2(tmp_path: Path) -> None:
    """``{.log.gz: text}`` once validated and then made every ``app.log.gz`` a not_text reject."""
    from tests.test_reliability_input import run_cli

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "app.log.gz").write_bytes(b"")
    config = tmp_path / "formats.yaml"
    config.write_text("input:\n  formats: {.log.gz: text}\n", encoding="utf-8")
    output = tmp_path / "out"
    code, log = run_cli(["--input", str(corpus), "--output", str(output), "--config", str(config)])
    assert code == 2
    assert "input.formats key '.log.gz' can never match a file" in log and "'.log' also reads app.log.gz" in log
    assert not output.exists()
