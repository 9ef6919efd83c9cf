"""The README's commands, options, config files and modules stay true to the code."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.rechunk import build_parser
from pipelines.schema import CHUNK_SCHEMA, REJECT_SCHEMA
from pipelines.settings import load_settings
from tests.common import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
SHELL_BLOCKS = re.findall(r"```sh\n(.*?)```", README, flags=re.S)


def commands() -> list[list[str]]:
    """Every shell command of the README, continuation lines joined, comments dropped."""
    found = []
    for block in SHELL_BLOCKS:
        for command in block.replace("\\\n", " ").splitlines():
            words = shlex.split(command, comments=True)
            if words:
                found.append(words)
    return found


def test_readme_starts_with_the_two_commands() -> None:
    first = commands()[:2]
    assert [words[:2] for words in first] == [["make", "run"], ["make", "test"]]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run:", makefile, flags=re.M) and re.search(r"^test:", makefile, flags=re.M)
    assert "make test" in (REPO / ".ci/run").read_text(encoding="utf-8")


@pytest.mark.parametrize("module", sorted(set(re.findall(r"python -m ([\w.]+)", README))))
def test_every_module_the_readme_runs_exists(module: str) -> None:
    assert hasattr(importlib.import_module(module), "main")


def test_rechunk_options_in_the_readme_are_known() -> None:
    ours = {opt for action in build_parser()._actions for opt in action.option_strings}
    beam = set(PipelineOptions([]).get_all_options(retain_unknown_options=False))
    for words in commands():
        if "pipelines.rechunk" not in words and not words[0].endswith("zerda-rechunk"):
            continue
        for word in words:
            if word.startswith("--"):
                name = word.split("=", 1)[0]
                assert name in ours or name[2:] in beam, f"README uses unknown option {name}"


def test_console_scripts_the_readme_runs_are_installed_entry_points() -> None:
    """``zerda-rechunk``/``zerda-report`` in the README are the scripts setup.py installs, and they resolve."""
    setup_py = (REPO / "setup.py").read_text(encoding="utf-8")
    declared = dict(re.findall(r'"(zerda-[\w-]+)=([\w.]+:\w+)"', setup_py))
    used = {Path(words[0]).name for words in commands() if Path(words[0]).name.startswith("zerda-")}
    assert used == {"zerda-rechunk", "zerda-report"}
    for script in used:
        module, function = declared[script].split(":")
        assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize("config", sorted(set(re.findall(r"configs/[\w.-]+\.yaml", README))))
def test_config_files_the_readme_names_exist_and_load(config: str) -> None:
    load_settings(REPO / config)


def test_readme_lists_every_output_column() -> None:
    for name in CHUNK_SCHEMA.names + REJECT_SCHEMA.names:
        assert f"{name}" in README, name


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", README, flags=re.S), ids=lambda b: b[:40])
def test_python_blocks_run_as_written(block: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader copies a block into a Python started at the repository root: it must just work."""
    monkeypatch.chdir(REPO)
    exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})
