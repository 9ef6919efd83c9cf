"""OUTPUT by another name (issue 24): an output reached through a bind mount or a symlink inside an input tree,
and a zerda output nested in another one, are refused at launch (exit 2) with nothing written.

Bind mounts are real: each test that needs one runs zerda in a private mount namespace (``unshare -m``), so
no mount is ever seen outside it, nor left behind by a failed test."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import fsspec
import pytest

from pipelines.cli.rechunk import main
from pipelines.errors import InputError, OutputError
from pipelines.input.expand import expand_inputs
from pipelines.output.write import prepare_output
from tests.common import REPO
from tests.test_reliability_ops import _finished, _snapshot

TEXT = "Plain sentences make a document long enough to be chunked by the job. " * 4


def _corpus(folder: Path) -> Path:
    """Three documents in one JSONL file below ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": f"d{n}", "text": f"Document {n}. {TEXT}"}) for n in range(3)]
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


# A script run in the namespace: each run's exit code, its error line and what OUTPUT then holds.
_RUNS = """
import contextlib, io, json, os, sys
from pipelines.cli.rechunk import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([*argv, "--quiet"])
    output = argv[argv.index("--output") + 1]
    results.append({"code": code, "error": err.getvalue(), "exists": os.path.exists(output)})
print(json.dumps(results))
"""


def _in_namespace(binds: list[tuple[Path, Path]], runs: list[list[str]]) -> list[dict[str, object]]:
    """Bind-mount each ``(source, target)``, then run zerda with each argv: in a private mount namespace, else
    (unshare refused) in this one, the mounts undone after; skipped only when the kernel refuses both."""
    runner = [sys.executable, "-c", _RUNS, json.dumps(runs)]
    mounts = " && ".join(f"mount --bind {shlex.quote(str(a))} {shlex.quote(str(b))}" for a, b in binds)
    script = ["sh", "-c", f'{mounts} && exec "$@"', "sh", *runner]
    try:
        done = subprocess.run(
            ["unshare", "-m", "--propagation", "private", *script],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=600,
        )
    except FileNotFoundError as err:  # no util-linux unshare
        done = subprocess.CompletedProcess(err.filename, 1, "", str(err))
    if done.returncode != 0 and not done.stdout and "Traceback" not in done.stderr:
        done = _in_this_namespace(binds, runner, refused=done.stderr.strip())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _in_this_namespace(
    binds: list[tuple[Path, Path]], runner: list[str], refused: str
) -> subprocess.CompletedProcess[str]:
    """The bind mounts made here (as root), the runs, then every mount undone, whatever happened."""
    mounted: list[Path] = []
    try:
        for source, target in binds:
            done = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"the kernel refuses a bind mount: unshare: {refused[:200]}; mount: {done.stderr[:200]}")
            mounted.append(target)
        return subprocess.run(runner, capture_output=True, text=True, cwd=REPO, timeout=600)
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", str(target)], check=False)


def _refused_inside_input(result: dict[str, object]) -> bool:
    return result["code"] == 2 and "is inside input" in str(result["error"]) and not result["exists"]


def test_an_output_through_a_bind_mount_of_the_input_is_refused(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    alias = tmp_path / "alias"
    alias.mkdir()
    argv = [
        ["--input", str(corpus), "--output", str(alias / "out")],  # the input's own folder by another name
        ["--input", str(corpus / "**"), "--output", str(alias / "out")],  # ... and as a glob
        ["--input", str(alias), "--output", str(corpus / "out")],  # the input by the other name
    ]
    results = _in_namespace([(corpus, alias)], argv)
    assert all(_refused_inside_input(result) for result in results), results
    assert sorted(os.listdir(corpus)) == ["a.jsonl"]


def test_a_bind_mount_of_a_folder_above_or_below_the_input_root_is_seen_through(tmp_path: Path) -> None:
    data = tmp_path / "data"
    corpus = _corpus(data / "corpus")
    above, below = tmp_path / "above", tmp_path / "below"
    above.mkdir()
    below.mkdir()
    (corpus / "sub").mkdir()
    argv = [
        ["--input", str(corpus), "--output", str(above / "corpus" / "out")],  # above = data
        ["--input", str(corpus / "**"), "--output", str(below / "out")],  # below = corpus/sub
        ["--input", str(corpus / "*.jsonl"), "--output", str(below / "out")],  # reads no file of corpus/sub
    ]
    inside_above, inside_below, beside = _in_namespace([(data, above), (corpus / "sub", below)], argv)
    assert _refused_inside_input(inside_above), inside_above
    assert _refused_inside_input(inside_below), inside_below
    assert beside["code"] == 0 and beside["exists"], beside  # a glob that cannot reach the output is run


def test_an_output_through_a_symlink_into_the_input_is_refused(tmp_path: Path, capsys) -> None:
    corpus = _corpus(tmp_path / "corpus")
    (tmp_path / "link").symlink_to(corpus, target_is_directory=True)
    for argv in (
        ["--input", str(corpus), "--output", str(tmp_path / "link" / "out")],
        ["--input", str(tmp_path / "link"), "--output", str(corpus / "out")],
        ["--input", str(tmp_path / "link" / "**"), "--output", str(corpus / "out")],
    ):
        assert main([*argv, "--quiet"]) == 2
        assert "is inside input" in capsys.readouterr().err
    assert sorted(os.listdir(corpus)) == ["a.jsonl"]


def test_a_store_url_is_compared_under_its_canonical_protocol() -> None:
    with pytest.raises(InputError, match="is inside input"):
        expand_inputs(["s3a://bucket/corpus"], output="s3://bucket/corpus/out")


def test_outputs_nested_on_an_object_store_are_refused() -> None:
    fs = fsspec.filesystem("memory")
    root = f"/nested-{uuid.uuid4().hex}"
    for output in ("outer", "other/old", "other"):
        fs.pipe(f"{root}/{output}/_SUCCESS", b"")
        fs.pipe(f"{root}/{output}/density_bucket=0/part-00000.parquet", b"")
    fs.pipe(f"{root}/hadoop/_SUCCESS", b"")  # another tool's marker, no zerda dataset beside it
    with pytest.raises(OutputError, match="is inside the zerda output 'memory:///nested-"):
        prepare_output(f"memory://{root}/outer/a/inner")
    with pytest.raises(OutputError, match=r"holds another zerda output below it \(old\)"):
        prepare_output(f"memory://{root}/other")
    prepare_output(f"memory://{root}/beside")  # a sibling of both
    prepare_output(f"memory://{root}/hadoop/zerda")
    fs.rm(root, recursive=True)


def test_an_output_inside_another_zerda_output_is_refused(tmp_path: Path, capsys) -> None:
    outer = _finished(tmp_path / "outer")
    before = _snapshot(outer)
    (tmp_path / "alias").symlink_to(outer, target_is_directory=True)
    for inner in (outer / "inner", outer / "deeper" / "inner", tmp_path / "alias" / "inner"):
        capsys.readouterr()
        assert main(["--output", str(inner), "--quiet"]) == 2
        error = capsys.readouterr().err
        assert "is inside the zerda output" in error and "read_parquet(" in error, error
        assert not inner.exists()
    assert _snapshot(outer) == before


def test_an_output_holding_another_zerda_output_below_it_is_refused(tmp_path: Path, capsys) -> None:
    outer = _finished(tmp_path / "outer")
    _finished(outer / "old" / "run")  # copied in by hand: read_parquet('outer/**/*.parquet') reads both
    before = _snapshot(outer)
    capsys.readouterr()
    assert main(["--output", str(outer), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "holds another zerda output below it (old/run)" in error, error
    assert _snapshot(outer) == before


def test_an_output_through_a_bind_mount_of_another_output_is_refused(tmp_path: Path) -> None:
    outer = _finished(tmp_path / "outer")
    alias = tmp_path / "alias"
    alias.mkdir()
    (result,) = _in_namespace([(outer, alias)], [["--output", str(alias / "inner")]])
    assert result["code"] == 2 and "is inside the zerda output" in str(result["error"]), result
    assert not (outer / "inner").exists()


def test_outputs_side_by_side_and_a_rerun_in_place_are_run(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    _finished(tmp_path / "first")
    for _ in range(2):  # the rerun keeps three documents: none read back
        assert main(["--input", str(corpus), "--output", str(tmp_path / "second"), "--quiet"]) == 0
        manifest = json.loads((tmp_path / "second" / "_manifest.json").read_text(encoding="utf-8"))
        assert manifest["counts"]["documents_chunked"] == 3
