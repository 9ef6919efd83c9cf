"""A written ``OUTPUT/_manifest.json``, read back: the one type every reader of it uses.

The report, ``--verify``, the run summary, incremental runs, the ownership of OUTPUT's files and the
launcher all read the manifest through :class:`Manifest`: one parse, one shape check and one format check,
so a manifest a newer zerda wrote is refused everywhere alike rather than misread. The commit writes it with
:meth:`Manifest.dumps`. Building one during a run is ``pipelines.output.build_manifest``'s (no Beam is imported here:
``zerda-report`` reads manifests without it).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from pipelines.errors import ManifestError, NewerManifestError
from pipelines.output.layout import BUCKET_WIDTHS, MANIFEST_FILE, PARTITION_COLUMN, REJECTS_DIR, is_bucket_width
from pipelines.redact import bounded
from pipelines.settings import OutputSettings

MANIFEST_FORMAT = 1  # raised when a key changes meaning, so that an older zerda refuses rather than misreads
_MAPPINGS = ("settings", "counts", "timings", "versions", "output")
_JSON_KINDS = {"list": "an array", "str": "a string", "bool": "a boolean", "NoneType": "null"}


class Manifest(Mapping[str, Any]):
    """A written ``_manifest.json``, checked: its JSON object (read as a mapping, keys as on disk) and typed
    accessors for what readers use. :meth:`loads` refuses a manifest that is not zerda's
    (:class:`ManifestError`) or of a newer format (:class:`NewerManifestError`); a manifest without
    ``format`` reads as format 1, the first. A part an older zerda did not write reads as empty or None."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    @classmethod
    def loads(cls, text: str | bytes, where: str = MANIFEST_FILE) -> Manifest:
        """Parse and check a manifest's text; ``where`` names it in a refusal."""
        try:
            data = json.loads(text)
        except ValueError as err:  # not JSON, not UTF-8: edited by hand, cut short, or another tool's file
            raise ManifestError(where, f"not zerda's JSON ({bounded(str(err))})") from err
        if not isinstance(data, dict):
            found = _JSON_KINDS.get(type(data).__name__, "a number")
            raise ManifestError(where, f"not zerda's: its JSON is {found}, not an object")
        _check_format(data.get("format", MANIFEST_FORMAT), where)
        _check_shape(data, where)
        return cls(data)

    @classmethod
    def load(cls, fs: AbstractFileSystem, root: str) -> Manifest:
        """The manifest of the output at ``root``, named by its path in a refusal (an ``OSError`` from the
        storage is the caller's to word)."""
        path = posixpath.join(root, MANIFEST_FILE)
        with fs.open(path, "rb") as f:
            return cls.loads(f.read(), path)

    @classmethod
    def load_url(cls, output: str) -> Manifest:
        """The manifest of the output at the URL ``output``."""
        fs, root = url_to_fs(output)
        return cls.load(fs, root.rstrip("/") or root)

    def dumps(self) -> str:
        """The text the commit writes: the keys as given, indented, non-ASCII kept."""
        return json.dumps(self._data, indent=2, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Manifest({self._data!r})"

    @property
    def format(self) -> int:
        return int(self._data.get("format", MANIFEST_FORMAT))

    @property
    def fingerprint(self) -> str | None:
        return _text(self._data.get("fingerprint"))

    @property
    def settings(self) -> Mapping[str, Any]:
        return self._data.get("settings", {})

    @property
    def bucket_width(self) -> float:
        return float(self.settings.get("output", {}).get("bucket_width", OutputSettings().bucket_width))

    @property
    def counts(self) -> Mapping[str, Any]:
        return self._data.get("counts", {})

    @property
    def timings(self) -> Mapping[str, Any]:
        return self._data.get("timings", {})

    @property
    def started(self) -> str | None:
        return _text(self.timings.get("started"))

    @property
    def zerda_version(self) -> str | None:
        """The zerda that wrote the output: an incremental run reuses rows only from its own version."""
        return _text(self._data.get("versions", {}).get("zerda"))

    @property
    def root(self) -> str:
        return str(self._data.get("output", {}).get("root", ""))

    @property
    def inputs(self) -> list[Mapping[str, Any]]:
        """The input entries that are objects (an entry edited into anything else is no input)."""
        inputs = self._data.get("inputs")
        return [entry for entry in inputs if isinstance(entry, Mapping)] if isinstance(inputs, list) else []

    @property
    def files(self) -> list[Mapping[str, Any]] | None:
        """The committed files' entries (path relative to OUTPUT, rows, bytes); None for an output of a zerda
        from before it listed them."""
        return self._data.get("output", {}).get("files")

    @property
    def changes(self) -> Mapping[str, Any] | None:
        return self._data.get("changes")


def folder_rows(counts: Mapping[str, Any]) -> dict[str, int]:
    """The rows the manifest's ``counts`` say each dataset folder holds: each bucket's chunks, and the reject
    rows (a bounded flood's summary row stands for many rejects; an output from before the bound holds one row
    a reject). Folders of no rows are left out. The commit and ``--verify`` check the files against this."""
    expected = {f"{PARTITION_COLUMN}={bucket}": n for bucket, n in counts.get("chunks_by_bucket", {}).items() if n}
    reject_rows = counts.get("reject_rows", sum(counts.get("rejects", {}).values()))
    if reject_rows:
        expected[REJECTS_DIR] = reject_rows
    return expected


def _text(value: object) -> str | None:
    """A string part of the manifest; anything else (edited by hand) reads as missing."""
    return value if isinstance(value, str) else None


def _check_format(version: object, where: str) -> None:
    if type(version) is not int or version < 1:
        raise ManifestError(where, f"not zerda's: format {bounded(repr(version))} is not a format number")
    if version > MANIFEST_FORMAT:
        raise NewerManifestError(
            f"{where} was written by a newer zerda (format {version}; this zerda reads {MANIFEST_FORMAT}):"
            " read it with that zerda or a newer one"
        )


def _check_shape(data: Mapping[str, Any], where: str) -> None:
    """The parts readers rely on have the types they read them as (a missing part is allowed: older outputs)."""
    for key in _MAPPINGS:
        if not isinstance(data.get(key, {}), dict):
            raise ManifestError(where, f"not zerda's: {key!r} is not an object")
    if not isinstance(data.get("settings", {}).get("output", {}), dict):
        raise ManifestError(where, "not zerda's: 'settings.output' is not an object")
    width = data.get("settings", {}).get("output", {}).get("bucket_width", OutputSettings().bucket_width)
    if not is_bucket_width(width):
        raise ManifestError(where, f"not zerda's: bucket_width {bounded(repr(width))} is not {BUCKET_WIDTHS}")
    seconds = data.get("timings", {}).get("seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
        raise ManifestError(where, "not zerda's: timings.seconds is not a number")
    files = data.get("output", {}).get("files")
    if files is not None and (not isinstance(files, list) or not all(_is_entry(entry) for entry in files)):
        raise ManifestError(where, "not zerda's: output.files is not a list of files in the output")
    changes = data.get("changes")
    if changes is not None and not isinstance(changes, dict):
        raise ManifestError(where, "not zerda's: 'changes' is not an object")


def _is_entry(entry: object) -> bool:
    """A file entry of the manifest: a relative path inside the output, no ``..``, with an integer size."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return False
    path, size = entry["path"], entry.get("bytes")
    inside = path == posixpath.normpath(path) and not path.startswith(("/", "..")) and "://" not in path
    return inside and (size is None or (isinstance(size, int) and not isinstance(size, bool)))
