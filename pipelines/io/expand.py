"""Globs, directories and files to the sorted list of corpus files, on the driver.

fsspec lists the stored files on any protocol (local, ``s3://``, ``gs://``, ``az://``,
``memory://``). Credentials and endpoints come from the ordinary environment
(``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``GOOGLE_APPLICATION_CREDENTIALS``...), never from here.
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem


class InputError(ValueError):
    """An input pattern that matches no file; the CLI exits with code 2."""


@dataclass(frozen=True)
class InputFile:
    """A corpus file: where it is, and its path relative to the glob root (the base of its ids)."""

    url: str
    relative_path: str


def sample_corpus_glob() -> str:
    """Where the bundled sample corpus is, from a checkout or an installed package."""
    return str(resources.files("pipelines") / "sample_corpus")


def expand_inputs(patterns: Sequence[str]) -> list[InputFile]:
    """Expand globs and directories to files on the driver: sorted by URL, each file once.

    A directory (given, or matched by a glob) stands for every file below it. Below the glob
    root, names starting with ``.`` or ``_`` are skipped, as Spark and Hive do, so that
    ``.DS_Store`` or a previous output's ``_manifest.json`` is never read as a document; a
    file named explicitly is always taken. Raises :class:`InputError` for a pattern that
    matches no file.
    """
    found: dict[str, InputFile] = {}
    for pattern in patterns:
        files = _expand(pattern)
        if not files:
            raise InputError(f"input {pattern!r} matches no file")
        for file in files:
            found.setdefault(file.url, file)
    return sorted(found.values(), key=lambda f: f.url)


def _expand(pattern: str) -> list[InputFile]:
    fs, path = url_to_fs(pattern)
    if glob.has_magic(path):
        root, matches = glob_root(path), fs.glob(path, detail=True)
    elif fs.isdir(path):
        root, matches = path, {path: {"type": "directory"}}
    elif fs.isfile(path):
        return [InputFile(_url(fs, path), path.rsplit("/", 1)[-1])]
    else:
        return []
    files = []
    for match, info in matches.items():
        for file in fs.find(match) if info["type"] == "directory" else [match]:
            relative = file[len(root) :].lstrip("/")
            if not any(part.startswith((".", "_")) for part in relative.split("/")):
                files.append(InputFile(_url(fs, file), relative))
    return files


def glob_root(path: str) -> str:
    """The folder above the first path part with a wildcard: ids are relative to it."""
    parts = path.split("/")
    first_magic = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return "/".join(parts[:first_magic])


def _url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """Local files keep a plain path; others keep their protocol (``s3://bucket/key``)."""
    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)
