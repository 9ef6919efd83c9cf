"""The README and docs/ stay true to the code: links and anchors resolve, runnable blocks run, the settings
reference is the generated one, and the commands, options, config files and columns they name exist."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.cli.rechunk import build_parser
from pipelines.evaluation.cli import build_parser as build_eval_parser
from pipelines.output.schema import CHUNK_SCHEMA, REJECT_SCHEMA
from pipelines.settings import load_settings, settings_reference_markdown
from tests.common import REPO

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
TEXT = {page: page.read_text(encoding="utf-8") for page in PAGES}
README = TEXT[REPO / "README.md"]

# A fenced block: its info string (```python runnable) and its body. "runnable" marks a block the tests run.
FENCE = re.compile(r"^(`{3,}|~{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", flags=re.S | re.M)
RUNNABLE = "runnable"
BIN = Path(sys.executable).parent


def blocks(page: Path) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of a page."""
    return [(m.group(2).strip(), m.group(3)) for m in FENCE.finditer(TEXT[page])]


def blocks_of(language: str, runnable_only: bool = False) -> list[tuple[Path, str]]:
    found = []
    for page in PAGES:
        for info, body in blocks(page):
            words = info.split()
            if words[:1] == [language] and (not runnable_only or RUNNABLE in words[1:]):
                found.append((page, body))
    return found


def block_id(item: object) -> str:
    if isinstance(item, tuple):
        page, body = item
        return f"{page.relative_to(REPO)}:{body.strip().splitlines()[0][:40]}"
    return str(item)


def commands() -> list[list[str]]:
    """Every shell command of the README and docs, continuation lines joined, comments dropped."""
    found = []
    for _page, body in blocks_of("sh"):
        for command in body.replace("\\\n", " ").splitlines():
            words = shlex.split(command, comments=True)
            if words:
                found.append(words)
    return found


# ---- links and anchors -------------------------------------------------------------------------------------


def prose(text: str) -> str:
    """A page without its fenced blocks and inline code, where links cannot be."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lowercased, punctuation removed, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links() -> Iterator[tuple[Path, str]]:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(TEXT[page])):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked
                yield page, target


def test_the_pages_have_links_to_check() -> None:
    assert len(list(links())) > 30


@pytest.mark.parametrize(("page", "target"), list(links()), ids=lambda x: block_id(x) if isinstance(x, Path) else x)
def test_every_relative_link_and_anchor_resolves(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    assert resolved.exists(), f"{page.relative_to(REPO)}: {target} names no file"
    assert REPO in resolved.parents or resolved == REPO, f"{page.relative_to(REPO)}: {target} leaves the repository"
    if anchor:
        assert resolved.suffix == ".md", f"{page.relative_to(REPO)}: an anchor into a file that is not Markdown"
        assert anchor in anchors(resolved), f"{page.relative_to(REPO)}: no heading gives #{anchor} in {path or 'it'}"


def test_slugs_follow_githubs_rules() -> None:
    assert slug("Verifying an output: `--verify`") == "verifying-an-output---verify"
    assert slug("Scheduled runs: `--incremental`") == "scheduled-runs---incremental"
    assert slug("What a 10 TB corpus costs, on paper") == "what-a-10-tb-corpus-costs-on-paper"
    assert slug("zerda in [Beam](beam.md)") == "zerda-in-beam"


def test_the_readme_links_every_docs_page() -> None:
    linked = {(REPO / target.partition("#")[0]).resolve() for page, target in links() if page.name == "README.md"}
    assert {page.resolve() for page in DOCS.glob("*.md")} <= linked


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 200


HISTORY = re.compile(
    r"\b20\d\d-\d\d-\d\d\b|\b(?:this|that|the|last|previous|earlier) session\b"
    r"|\b[Ii]ssue \d|\bused to\b|\bbefore:|\(it was\b"
)


@pytest.mark.parametrize("page", [*PAGES, REPO / "Makefile"], ids=lambda p: str(p.relative_to(REPO)))
def test_no_dated_figures_or_history(page: Path) -> None:
    """Figures belong in the generated benchmarks/results/ files, which carry their date; history in git."""
    text = page.read_text(encoding="utf-8")
    if page.name == "Makefile":
        text = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    found = [m.group(0) for m in HISTORY.finditer(text)]
    assert not found, f"{page.relative_to(REPO)}: {found}"


# ---- runnable blocks -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as a clone after ``make run``: the repository's sources and configs, and out/chunks."""
    root = tmp_path_factory.mktemp("checkout")
    for name in ("configs", "pipelines", "zerda_core", "examples", "setup.py"):
        (root / name).symlink_to(REPO / name)
    run = [str(BIN / "zerda-rechunk"), "--output", "out/chunks", "--quiet"]
    subprocess.run(run, cwd=root, check=True, timeout=300)
    return root


def test_every_python_block_is_runnable() -> None:
    """A reader copies a Python block as written: every one is marked runnable, so every one is run."""
    assert blocks_of("python") == blocks_of("python", runnable_only=True)


@pytest.mark.parametrize("block", blocks_of("python", runnable_only=True), ids=block_id)
def test_python_blocks_run_as_written(block: tuple[Path, str], checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader copies a block into a Python started at the root of a clone: it must just work."""
    page, body = block
    monkeypatch.chdir(checkout)
    exec(compile(body, str(page.relative_to(REPO)), "exec"), {"__name__": "__docs__"})


def test_the_tour_runs_in_the_readme() -> None:
    shell = [body for info, body in blocks(REPO / "README.md") if info.split()[:2] == ["sh", RUNNABLE]]
    assert shell and "zerda-report --verify" in shell[0]


@pytest.mark.parametrize("block", blocks_of("sh", runnable_only=True), ids=block_id)
def test_runnable_shell_blocks_run(block: tuple[Path, str], tmp_path: Path) -> None:
    """Each in a fresh folder laid out as a clone, the venv's commands on PATH (as after ``. .venv/bin/activate``)."""
    page, body = block
    for name in ("configs", "pipelines", "zerda_core", "examples", "setup.py"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{page.relative_to(REPO)}:\n{body}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


# ---- what the pages name exists -----------------------------------------------------------------------------


def test_the_settings_reference_is_the_generated_one() -> None:
    text = TEXT[DOCS / "settings.md"]
    begin, end = "<!-- settings-reference:begin -->\n", "<!-- settings-reference:end -->"
    assert begin in text and end in text
    table = text.split(begin, 1)[1].split(end, 1)[0]
    assert table == settings_reference_markdown(), "regenerate with: python -m pipelines.settings --reference"


def test_readme_starts_with_the_two_commands() -> None:
    first = [words for words in commands_of(REPO / "README.md")][:2]
    assert [words[:2] for words in first] == [["make", "run"], ["make", "test"]]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run:", makefile, flags=re.M) and re.search(r"^test:", makefile, flags=re.M)
    assert "make test" in (REPO / ".ci/run").read_text(encoding="utf-8")


def commands_of(page: Path) -> list[list[str]]:
    found = []
    for info, body in blocks(page):
        if info.split()[:1] == ["sh"]:
            for command in body.replace("\\\n", " ").splitlines():
                words = shlex.split(command, comments=True)
                if words:
                    found.append(words)
    return found


MODULES = sorted({m for text in TEXT.values() for m in re.findall(r"python -m ([\w.]+)", text)})


@pytest.mark.parametrize("module", MODULES)
def test_every_module_the_docs_run_exists(module: str) -> None:
    if module.startswith("apache_beam."):
        importlib.import_module(module)
    else:
        assert hasattr(importlib.import_module(module), "main")


def test_rechunk_options_in_the_docs_are_known() -> None:
    ours = {opt for action in build_parser()._actions for opt in action.option_strings}
    beam = set(PipelineOptions([]).get_all_options(retain_unknown_options=False))
    for words in commands():
        if "pipelines.cli.rechunk" not in words and not any(w.endswith("zerda-rechunk") for w in words[:6]):
            continue
        for word in words:
            if word.startswith("--"):
                name = word.split("=", 1)[0]
                assert name in ours or name[2:] in beam, f"the docs use unknown option {name}"


def test_eval_options_in_the_docs_are_known() -> None:
    ours = {opt for action in build_eval_parser()._actions for opt in action.option_strings}
    used = [words for words in commands() if any(Path(w).name == "zerda-eval" for w in words[:3])]
    assert used
    for words in used:
        for word in words:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in ours, f"the docs use unknown zerda-eval option {word}"


def test_console_scripts_the_docs_run_are_installed_entry_points() -> None:
    """``zerda-rechunk``/``zerda-report``/``zerda-eval`` in the docs are the scripts setup.py installs, and they
    resolve."""
    setup_py = (REPO / "setup.py").read_text(encoding="utf-8")
    declared = dict(re.findall(r'"(zerda-[\w-]+)=([\w.]+:\w+)"', setup_py))
    used = {Path(word).name for words in commands() for word in words if Path(word).name.startswith("zerda-")}
    assert used == {"zerda-rechunk", "zerda-report", "zerda-eval"}
    for script in used:
        module, function = declared[script].split(":")
        assert callable(getattr(importlib.import_module(module), function))


CONFIGS = sorted({c for text in TEXT.values() for c in re.findall(r"configs/[\w.-]+\.yaml", text)})


@pytest.mark.parametrize("config", CONFIGS)
def test_config_files_the_docs_name_exist_and_load(config: str) -> None:
    load_settings(REPO / config)


def test_the_output_page_lists_every_column() -> None:
    text = TEXT[DOCS / "output.md"]
    for name in CHUNK_SCHEMA.names + REJECT_SCHEMA.names:
        assert f"`{name}" in text or f" {name}," in text or f"{name}`" in text, name


SOURCES = sorted(p for root in ("pipelines", "zerda_core") for p in (REPO / root).rglob("*.py"))
# As HISTORY, but "before:" only where it opens a remark (a parameter may be named before).
CODE_HISTORY = re.compile(HISTORY.pattern.replace(r"\bbefore:", r"[#(]\s*before:"))


def test_no_dated_figures_or_history_in_the_code() -> None:
    """Docstrings and comments say what and why; the git log holds the history."""
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in SOURCES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if CODE_HISTORY.search(line)
    ]
    assert not found, "\n".join(found)
