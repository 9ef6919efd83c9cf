"""Inputs matched on the workers (pipelines.input.match): the same files as a listing at launch, each once; the
launch's check of each pattern, which stops at its first file; and which patterns may match a compressed file."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from pipelines.errors import InputError
from pipelines.input.expand import InputFile, expand_inputs
from pipelines.input.match import JudgeInputs, MatchInputs, check_inputs, may_spread
from pipelines.records import FileReport


def _write(path: Path, text: str = '{"text": "x"}\n') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_workers_match_the_files_a_launch_listing_gave(tmp_path: Path) -> None:
    """Overlapping patterns, a file reached by a symlink and by ``..``, hidden names below a root: the files
    matched in the job are those :func:`expand_inputs` lists, with the same paths, sizes and stamps."""
    corpus = tmp_path / "d"
    for name in ["a.jsonl", "b.md", "sub/c.jsonl", ".hidden.jsonl", "_SUCCESS", "sub/_x/e.jsonl"]:
        _write(corpus / name)
    (corpus / "link.jsonl").symlink_to(corpus / "a.jsonl")
    (tmp_path / "alias").symlink_to(corpus)
    patterns = [f"{corpus}/*.jsonl", str(corpus), f"{corpus}/../d/a.jsonl", f"{tmp_path}/alias", f"{corpus}/**/*.md"]
    listed = [(f.url, f.relative_path, f.size, f.stamp) for f in expand_inputs(patterns)]
    assert len(listed) == 3
    with beam.Pipeline() as pipeline:
        matched = pipeline | MatchInputs(patterns) | beam.Map(lambda f: (f.url, f.relative_path, f.size, f.stamp))
        assert_that(matched, equal_to(listed))


@pytest.mark.parametrize("pattern", ["nothing-*.jsonl", "missing.jsonl", "missing-dir", "hidden", "empty", "h*/*"])
def test_a_pattern_matching_no_file_stops_the_launch(tmp_path: Path, pattern: str) -> None:
    """A pattern with no file it would read (none at all, or only ``.``/``_`` names below its root) is a usage
    error at launch, as the launch's full listing made it."""
    _write(tmp_path / "a.jsonl")
    _write(tmp_path / "hidden" / ".DS_Store")
    _write(tmp_path / "hidden" / "_SUCCESS")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=re.escape(f"{pattern}' matches no file")):
        check_inputs([str(tmp_path / "a.jsonl"), str(tmp_path / pattern)])


def test_the_launch_check_stops_at_the_first_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A glob over 3 folders of 200 files each: the check lists the folders it walks until one holds a match, and
    stats no file; a glob whose first folders hold no match walks on to the one that does."""
    for n in range(600):
        _write(tmp_path / f"f{n % 3}" / f"x{n:04d}.{'md' if n % 3 < 2 else 'jsonl'}")
    calls: Counter[str] = Counter()
    scandir, stat = os.scandir, os.stat

    def listed(path: Any) -> Any:
        calls["scandir"] += 1
        return scandir(path)

    def stated(path: Any, *args: Any, **kwargs: Any) -> Any:
        calls["stat"] += str(path).startswith(str(tmp_path))
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", listed)
    monkeypatch.setattr(os, "stat", stated)
    check_inputs([str(tmp_path / "*" / "*.md")])
    assert calls["scandir"] == 2 and calls["stat"] <= 2, calls  # the root, the first folder (a stat each): no file
    calls.clear()
    check_inputs([str(tmp_path / "*" / "*.jsonl")])
    assert calls["scandir"] == 4 and calls["stat"] <= 4, calls  # the root and the three folders, in order


@pytest.mark.parametrize(
    ("pattern", "spread"),
    [
        ("*.jsonl", False),
        ("a.jsonl", False),
        ("*.parquet", False),
        ("corpus/*.md", False),
        ("*.jsonl.gz", True),
        ("*.gz", True),
        ("*z", True),
        ("*", True),
        ("**", True),
        ("a.jsonl.zst", True),
        ("dir", True),
        ("*/dir", True),
    ],
)
def test_a_pattern_may_match_a_compressed_file(tmp_path: Path, pattern: str, spread: bool) -> None:
    """Whether the job builds the branch that spreads a large compressed file's records, told from the patterns."""
    (tmp_path / "dir").mkdir()
    _write(tmp_path / "a.jsonl")
    assert may_spread([str(tmp_path / "a.jsonl"), str(tmp_path / pattern)]) is spread


def test_files_are_judged_unchanged_by_their_stamp_and_never_when_a_source_is_shared() -> None:
    """A file whose stamp is its source's previous stamp is not read (its report carried); a changed stamp, a
    new file, or two files of one source (redaction made them one) are read."""
    files = [
        InputFile("/c/same.jsonl", "same.jsonl", 1, "s1"),
        InputFile("/c/edited.jsonl", "edited.jsonl", 1, "s2-new"),
        InputFile("/c/new.jsonl", "new.jsonl", 1, "s3"),
        InputFile("/c/unstamped.jsonl", "unstamped.jsonl", 1, None),
    ]
    reports = [
        FileReport("/c/same.jsonl", 1, 1, "", "s1"),
        FileReport("/c/edited.jsonl", 1, 1, "", "s2"),
        FileReport("/c/unstamped.jsonl", 1, 1, "", "s4"),
        FileReport("/c/gone.jsonl", 1, 1, "", "s5"),
    ]
    with beam.Pipeline() as pipeline:
        previous = pipeline | "Reports" >> beam.Create([(r.source, r) for r in reports])
        judged = pipeline | beam.Create(files) | JudgeInputs(previous)
        assert_that(judged.to_read | beam.Map(lambda f: f.url), equal_to([f.url for f in files[1:]]), "read")
        assert judged.unchanged is not None
        assert_that(judged.unchanged, equal_to(reports[:1]), "unchanged")
    shared = [InputFile("/c/a.jsonl", "a.jsonl", 1, "s1"), InputFile("/c/a.jsonl", "b/a.jsonl", 1, "s1")]
    with beam.Pipeline() as pipeline:
        previous = pipeline | "Reports" >> beam.Create([("/c/a.jsonl", FileReport("/c/a.jsonl", 1, 1, "", "s1"))])
        judged = pipeline | beam.Create(shared) | JudgeInputs(previous)
        assert_that(judged.to_read | beam.Map(lambda f: f.relative_path), equal_to(["a.jsonl", "b/a.jsonl"]))
