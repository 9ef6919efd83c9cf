"""Which files in OUTPUT's dataset folders zerda wrote: a commit deletes only those, and a run does not start
over anyone else's file where the dataset's readers would take it for zerda's.

The dataset folders are ``density_bucket=K/``, ``_rejects/``, ``_index/``, ``_ids/``, ``_changes/`` and
``_manifest/`` (the manifest's tables). A file in them is zerda's when the previous manifest lists it (or is its
table of files, ``_manifest/files.pq``), or when it has a committed file's name (``part-NNNNN.parquet``,
``.pq``) and its Parquet footer names the path a zerda run staged it as (what a commit stopped halfway
leaves, its manifest already retracted). Any other file there is foreign: ``pyarrow.dataset(OUTPUT)`` and
Spark read every file of a partition folder, and the documented ``read_parquet('OUTPUT/_rejects/*')`` every
file of that one, so a user's ``notes.txt`` breaks them and an ``extra.parquet`` would be read as chunks.
Hidden names (``.`` or ``_`` first, ``.DS_Store``), which those readers skip, are neither: kept, not refused.
"""

from __future__ import annotations

import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from pipelines.errors import ManifestError
from pipelines.output.layout import (
    CHANGES_DIR,
    CHUNK_SUFFIX,
    FILES_TABLE,
    IDS_DIR,
    INDEX_DIR,
    MANIFEST_DIR,
    PARTITION_COLUMN,
    REJECT_SUFFIX,
    REJECTS_DIR,
)
from pipelines.output.manifest import FOOTER_THREADS, Manifest

STAGED_KEY = b"zerda.staged"  # Parquet footer key: the staged path a file was written as, its run id in it
# a committed file's name: its staged name (``part-<uuid4 hex>``), an index partition's (``part-00003-of-00016``),
# or a numbered one (``part-00042``, an older zerda's)
_COMMITTED_NAME = re.compile(
    rf"part-(\d{{5,}}|\d{{5,}}-of-\d{{5,}}|[0-9a-f]{{32}})({re.escape(CHUNK_SUFFIX)}|{re.escape(REJECT_SUFFIX)})\Z"
)
_SHOWN = 3  # foreign files named in the error


def is_dataset_entry(name: str) -> bool:
    """A top-level entry of OUTPUT that belongs to a run's dataset."""
    return name.startswith(f"{PARTITION_COLUMN}=") or name in (
        REJECTS_DIR,
        INDEX_DIR,
        IDS_DIR,
        CHANGES_DIR,
        MANIFEST_DIR,
    )


def staged_as(fs: AbstractFileSystem, path: str) -> str | None:
    """The staged path a Parquet file's footer names (None: no such file, not ours, or not Parquet)."""
    try:
        with fs.open(path, "rb") as f:
            metadata = pq.read_metadata(f).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return None
    return metadata.get(STAGED_KEY, b"").decode() or None


@dataclass(frozen=True)
class DatasetFiles:
    """The files of OUTPUT's dataset folders (absolute paths): zerda's, and the foreign ones readers would read."""

    ours: frozenset[str]
    foreign: tuple[str, ...]

    def describe_foreign(self, root: str) -> str:
        shown = [posixpath.relpath(path, root) for path in self.foreign[:_SHOWN]]
        more = f" and {len(self.foreign) - _SHOWN} more" if len(self.foreign) > _SHOWN else ""
        return f"{len(self.foreign)} file(s) zerda did not write in its dataset folders ({', '.join(shown)}{more})"


def dataset_files(fs: AbstractFileSystem, root: str) -> DatasetFiles:
    """Sort the files of OUTPUT's dataset folders into zerda's and foreign ones (hidden names in neither)."""
    try:
        entries = [entry.rstrip("/") for entry in fs.ls(root, detail=False)]
    except FileNotFoundError:
        return DatasetFiles(frozenset(), ())
    found = [path for entry in entries if is_dataset_entry(posixpath.basename(entry)) for path in fs.find(entry)]
    listed = _listed(fs, root)
    ours, unlisted = set(), []
    for path in sorted(found):
        relative = posixpath.relpath(path, root)
        if path.endswith("/") or any(part.startswith((".", "_")) for part in relative.split("/")[1:]):
            continue  # an object store's folder marker (a zero-byte ``dir/``, the S3 console's), or a hidden name
        if relative in listed or relative == FILES_TABLE:  # the manifest's own table: named by it, not in it
            ours.add(path)
        else:
            unlisted.append(path)
    # No manifest (a commit stopped halfway retracted it): every file's footer, on an object store 16 at a time
    with ThreadPoolExecutor(FOOTER_THREADS) as pool:
        zerdas = list(pool.map(lambda path: _written_by_zerda(fs, path), unlisted))
    ours.update(path for path, mine in zip(unlisted, zerdas, strict=True) if mine)
    foreign = [path for path, mine in zip(unlisted, zerdas, strict=True) if not mine and not _gone(fs, path)]
    return DatasetFiles(frozenset(ours), tuple(foreign))


def _written_by_zerda(fs: AbstractFileSystem, path: str) -> bool:
    """A committed file's name and a footer naming the path a zerda run staged it as."""
    return bool(_COMMITTED_NAME.match(posixpath.basename(path))) and staged_as(fs, path) is not None


def _gone(fs: AbstractFileSystem, path: str) -> bool:
    """Deleted since it was listed (a launch checks before taking the lease, while another run's commit may be
    deleting its previous files): no file to name, nor to move out of OUTPUT. Asked of the store, not its cache."""
    fs.invalidate_cache(posixpath.dirname(path))
    return not fs.exists(path)


def _listed(fs: AbstractFileSystem, root: str) -> set[str]:
    """The paths the manifest in OUTPUT lists (none when there is none or it is not zerda's: the footers then
    tell). A manifest of a newer zerda is refused (``NewerManifestError``): what it lists may mean otherwise."""
    try:
        files = Manifest.load(fs, root).files
    except (OSError, ManifestError):
        return set()
    return {entry["path"] for entry in files or ()}
