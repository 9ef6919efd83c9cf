"""Settings that would pass a plain range check and then make work explode: refused at validation, exit 2."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from pipelines.cli.rechunk import main as rechunk_main
from pipelines.errors import SettingsError
from pipelines.output.layout import MAX_BUCKETS, n_buckets
from pipelines.report import main as report_main
from pipelines.settings import Settings
from pipelines.settings import main as check_config
from tests.test_report import write_output

TOO_NARROW = [1e-9, 1e-300, 5e-324, 0.000999, math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("width", TOO_NARROW)
def test_a_bucket_width_giving_more_than_max_buckets_is_refused(width: float) -> None:
    rule = rf"output.bucket_width must be a number in \[0.001, 1\] \(at most {MAX_BUCKETS} density buckets\)"
    with pytest.raises(SettingsError, match=rule):
        Settings.from_dict({"output": {"bucket_width": width}})


def test_the_narrowest_width_allowed_gives_max_buckets() -> None:
    assert n_buckets(Settings.from_dict({"output": {"bucket_width": 0.001}}).output.bucket_width) == MAX_BUCKETS


@pytest.mark.parametrize("text", ["1.0e-9", "1.0e-300", ".nan", ".inf"])
def test_a_config_with_a_tiny_bucket_width_exits_2_before_touching_output(tmp_path: Path, text: str, capsys) -> None:
    """YAML reads ``1e-9`` as a string (no dot), which is refused already; ``1.0e-9`` is the float."""
    config = tmp_path / "run.yaml"
    config.write_text(f"output:\n  bucket_width: {text}\n", encoding="utf-8")
    assert check_config([str(config)]) == 2
    assert "at most 1000 density buckets" in capsys.readouterr().err
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "A sentence of text. " * 20}) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    started = time.monotonic()
    assert rechunk_main(["--input", str(corpus), "--output", str(out), "--config", str(config)]) == 2
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert "at most 1000 density buckets" in err and len(err.splitlines()) <= 3  # one message, no traceback
    assert not out.exists()


def test_the_report_refuses_a_manifest_with_a_tiny_bucket_width_at_once(tmp_path: Path, capsys) -> None:
    url = write_output(str(tmp_path / "out"))
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    manifest["settings"]["output"]["bucket_width"] = 1e-9
    (tmp_path / "out" / "_manifest.json").write_text(json.dumps(manifest))
    started = time.monotonic()
    assert report_main([url]) == 2
    assert time.monotonic() - started < 30
    assert "bucket_width 1e-09 is not a number in [0.001, 1]" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("chunking", "technical_threshold", math.nan),
        ("chunking", "technical_threshold", math.inf),
        ("chunking", "base_size", 2**40),
        ("chunking", "overlap", 2**40),
        ("chunking", "base_size", 512.0),
        ("output", "max_rows_per_file", 0),
        ("input", "split_bytes", 0),
        ("input", "max_document_chars", math.inf),
        ("enrich", "top_k", 0),
    ],
)
def test_other_numbers_out_of_range_or_not_integers_are_refused(section: str, key: str, value: float) -> None:
    with pytest.raises(SettingsError, match=f"{section}.{key} must be"):
        Settings.from_dict({section: {key: value}})
