"""Packaging: ``python setup.py sdist`` (what Dataflow runs for ``--setup_file``), installed and run.

The sdist is built from a copy of the working tree as git sees it (tracked and new files, not ignored
ones), so a stale ``*.egg-info`` or ``build/`` in the checkout cannot hide a missing file, and
concurrent runs do not race on the checkout. It is installed into a new, empty venv. Runtime
dependencies and the build backend are taken from the environment running the tests (a ``.pth`` line
naming its site-packages; no index is used, nothing is downloaded): what is under test is zerda's
own package, not pip's resolver. The console script then runs from a folder outside the checkout,
without ``PYTHONPATH``, so only the installed copy can be imported.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.common import DATA, REPO
from tests.output_checks import read_manifest

SAMPLE_CORPUS = "pipelines/sample_corpus"
TIMEOUT = 300


def _git(*args: str) -> list[str]:
    result = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"not a git checkout ({result.stderr.strip()})")
    return [line for line in result.stdout.split("\0") if line]


def tracked(under: str = "") -> list[str]:
    """Files git tracks (under a folder), as relative POSIX paths, that exist in the working tree."""
    return [path for path in _git("ls-files", "-z", "--", under or ".") if (REPO / path).is_file()]


def working_tree() -> list[str]:
    """Tracked and new files, without the ignored ones (.venv, out/, *.egg-info...)."""
    files = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return [path for path in files if (REPO / path).is_file()]


def copy_tree(files: list[str], destination: Path) -> Path:
    for path in files:
        target = destination / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, target)
    return destination


def build_sdist(source: Path, dist: Path) -> Path:
    """``python setup.py sdist`` in ``source``; returns the one archive it made."""
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(dist)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    archives = list(dist.glob("zerda-*.tar.gz"))
    assert len(archives) == 1, archives
    return archives[0]


def members(archive: Path) -> set[str]:
    """The archive's files, relative to its top folder (``zerda-0.2.2/``)."""
    with tarfile.open(archive) as tar:
        return {name.split("/", 1)[1] for name in tar.getnames() if "/" in name and tar.getmember(name).isfile()}


def clean_env() -> dict[str, str]:
    """This environment without anything that would let the checkout be imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(PYTHONNOUSERSITE="1", PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sdist")
    return build_sdist(copy_tree(working_tree(), root / "src"), root / "dist")


def new_venv(target: Path, visible: list[str]) -> Path:
    """A new venv without pip that also sees the packages in the ``visible`` folders; returns its python."""
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(target)
    python = target / ("Scripts" if os.name == "nt" else "bin") / "python"
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site_packages) / "_zerda_test_dependencies.pth").write_text("\n".join(visible) + "\n")
    return python


@pytest.fixture(scope="module")
def installed(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the sdist installed (no deps, no index); returns its bin folder."""
    can_build_wheels = importlib.util.find_spec("setuptools.command.bdist_wheel") or importlib.util.find_spec(
        "wheel.bdist_wheel"
    )
    assert can_build_wheels, "pip builds a wheel from the sdist: needs setuptools>=70.1 (or wheel<0.46) here"
    target = tmp_path_factory.mktemp("venv") / "venv"
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    python = new_venv(target, sorted(ours))
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    result = subprocess.run(
        [*install, "--no-deps", "--no-build-isolation", "--no-index", str(sdist)],
        cwd=target.parent,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return python.parent


def run_installed(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_sdist_holds_the_packages_their_data_and_the_sample_corpus(sdist: Path) -> None:
    files = members(sdist)
    modules = [p for p in tracked("zerda_core") + tracked("pipelines") if p.endswith(".py")]
    assert "zerda_core/chunks/adaptive_chunker.py" in modules and "pipelines/cli/rechunk.py" in modules
    assert set(modules) <= files, sorted(set(modules) - files)
    assert {"setup.py", "README.md", "zerda_core/py.typed", "pipelines/py.typed"} <= files
    sample = tracked(SAMPLE_CORPUS)
    assert set(sample) <= files, sorted(set(sample) - files)


def test_any_file_put_in_the_sample_corpus_ships(tmp_path: Path) -> None:
    """package_data covers the sample corpus at any depth, whatever its file types."""
    source = copy_tree(working_tree(), tmp_path / "src")
    probes = [f"{SAMPLE_CORPUS}/probe.md", f"{SAMPLE_CORPUS}/zz_probe/deeper/notes.jsonl.gz"]
    for probe in probes:
        (source / probe).parent.mkdir(parents=True, exist_ok=True)
        (source / probe).write_bytes(b"probe")
    assert set(probes) <= members(build_sdist(source, tmp_path / "dist"))


def test_installed_package_is_imported_from_the_venv_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    code = "import pipelines, zerda_core; print(pipelines.__file__); print(zerda_core.__file__)"
    result = run_installed(installed, "python", "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    venv_root = installed.parent.resolve()
    for module_file in result.stdout.split():
        assert Path(module_file).resolve().is_relative_to(venv_root), module_file


def test_console_script_help(installed: Path, tmp_path: Path) -> None:
    result = run_installed(installed, "zerda-rechunk", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--input" in result.stdout and "--output" in result.stdout and "--config" in result.stdout


def test_console_script_runs_the_pipeline_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    """With the sample corpus tracked, the default run chunks it; before that, a copy of tests/data."""
    bundled = bool(tracked(SAMPLE_CORPUS))
    inputs = [] if bundled else ["--input", str(shutil.copytree(DATA, tmp_path / "corpus"))]
    result = run_installed(installed, "zerda-rechunk", *inputs, "--output", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    output = tmp_path / "out"
    assert (output / "_SUCCESS").exists()
    manifest = read_manifest(output)
    counts = manifest["counts"]
    assert counts["documents_chunked"] > 0
    expected_root = installed.parent.resolve() if bundled else (tmp_path / "corpus").resolve()
    for source in manifest["inputs"]:
        assert Path(source["source"]).resolve().is_relative_to(expected_root), source
    table = ds.dataset(output, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == counts["chunks"] > 0
    assert "documents chunked" in result.stdout, "the end-of-run summary is printed"


def test_the_console_scripts_print_the_installed_distributions_version(installed: Path, tmp_path: Path) -> None:
    """One version source: the package metadata pip records and the CLIs' ``--version`` agree."""
    code = "import importlib.metadata as m; print(m.version('zerda'))"
    metadata = run_installed(installed, "python", "-c", code, cwd=tmp_path)
    assert metadata.returncode == 0, metadata.stderr
    version = metadata.stdout.strip()
    assert version
    for script in ("zerda-rechunk", "zerda-report", "zerda-eval"):
        result = run_installed(installed, script, "--version", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [script, version]


def test_setup_py_takes_its_version_from_zerda_core(tmp_path: Path) -> None:
    """A version changed in ``zerda_core/__init__.py`` alone reaches the built distribution's name."""
    source = copy_tree(working_tree(), tmp_path / "src")
    init = source / "zerda_core" / "__init__.py"
    init.write_text(init.read_text(encoding="utf-8").replace('__version__ = "', '__version__ = "9.8.7+t'), "utf-8")
    version = init.read_text(encoding="utf-8").split('__version__ = "')[1].split('"')[0]
    assert build_sdist(source, tmp_path / "dist").name == f"zerda-{version}.tar.gz"


def test_zerda_core_installs_and_chunks_alone_with_numpy_only(tmp_path: Path) -> None:
    """``pip install ./packaging/zerda-core``: the chunker library without Beam, pyarrow or fsspec. The venv
    sees numpy from this environment and nothing else, so an import of anything more fails the test."""
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels)]
    built = subprocess.run(
        [*build, str(REPO / "packaging" / "zerda-core")],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("zerda_core-*.whl")
    numpy_only = tmp_path / "numpy_only"
    numpy_only.mkdir()
    import numpy

    numpy_root = Path(numpy.__file__).parent
    for entry in numpy_root.parent.iterdir():
        if entry.name == "numpy" or entry.name.startswith(("numpy-", "numpy.libs")):
            (numpy_only / entry.name).symlink_to(entry)
    python = new_venv(tmp_path / "venv", [str(numpy_only)])
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index"]
    result = subprocess.run(
        [*install, str(wheel)], env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    code = (
        "import importlib.util, importlib.metadata as m\n"
        "from zerda_core.chunks import AdaptiveChunker\n"
        "import zerda_core\n"
        "text = 'The fennec fox sleeps by day. ' * 80\n"
        "chunks = AdaptiveChunker().chunk(text, doc_id='d', source='s')\n"
        "assert chunks and all(c.text == text[c.metadata.start_char:c.metadata.end_char] for c in chunks)\n"
        "assert m.version('zerda-core') == zerda_core.__version__\n"
        "print([name for name in ('apache_beam', 'pyarrow', 'fsspec', 'smart_open') if importlib.util.find_spec(name)])"
    )
    ran = subprocess.run([str(python), "-c", code], cwd=tmp_path, env=clean_env(), capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]", "the pipeline's packages are visible: the check would prove nothing"


def test_make_run_in_a_fresh_copy_chunks_the_sample_corpus(tmp_path: Path) -> None:
    """The README's first command from a fresh copy of the checkout: it makes its own venv from nothing but
    python3, installs zerda into it and chunks the bundled sample corpus into ./out/chunks."""
    source = copy_tree(working_tree(), tmp_path / "clone")
    env = {k: v for k, v in clean_env().items() if k not in ("VIRTUAL_ENV",)}
    result = subprocess.run(
        ["make", "run", f"PYTHON={shutil.which('python3') or 'python3'}"],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = source / "out" / "chunks"
    assert (output / "_SUCCESS").exists()
    assert "documents chunked" in result.stdout
    assert (source / ".venv" / "bin" / "zerda-rechunk").exists()
