"""Where OUTPUT really is: the same directory reached by another name, and other zerda outputs around it.

A path string says little about what a directory is: a bind mount, a symlink or any alias shows one directory
under two names, so OUTPUT written through one name may lie inside an input tree read through the other, and
every rerun reads its chunks back as corpus. Local paths are compared by what the kernel says they are (device
and inode, and the filesystem path behind each mount); an object store's paths are its canonical URLs already.

A zerda output nested in another one is refused too: the outer output's documented query
``read_parquet('OUT/**/*.parquet')`` would read the inner one's chunks as its own.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from pipelines.errors import OutputError
from pipelines.output.layout import MANIFEST_FILE, STAGING_DIR, SUCCESS_FILE
from pipelines.output.ownership import is_dataset_entry
from pipelines.redact import bounded, redact_url

_MOUNTINFO = "/proc/self/mountinfo"
_MARKERS = (MANIFEST_FILE, SUCCESS_FILE)  # what a finished (or finishing) zerda output holds at its root
_SHOWN = 3


def local_paths_below(root: str, path: str) -> list[str]:
    """``path`` (a local absolute path, existing or not) written as a path below the real directory ``root``,
    each way it is the same place: its real path, through an ancestor that is ``root`` itself (same device and
    inode: a bind mount or alias of ``root`` or of a folder above it), and through the filesystem path a mount
    shows (a bind mount of a folder below ``root``). The real path comes first, whether below ``root`` or not."""
    real = os.path.realpath(path)
    found = [real]
    below = _through_same_inode(root, real)
    if below is not None:
        found.append(below)
    below = _through_mounts(root, real)
    if below is not None:
        found.append(below)
    return list(dict.fromkeys(found))


def _through_same_inode(root: str, real: str) -> str | None:
    """``real`` below ``root`` when one of its existing ancestors is ``root`` by device and inode."""
    try:
        target = os.stat(root)
    except OSError:
        return None
    for ancestor in _ancestors(real):
        try:
            found = os.stat(ancestor)
        except OSError:
            continue  # the part of OUTPUT not created yet
        if (found.st_dev, found.st_ino) == (target.st_dev, target.st_ino):
            return _join(root, real[len(ancestor) :])
    return None


def _through_mounts(root: str, real: str) -> str | None:
    """``real`` below ``root`` when both lie on one filesystem and the mounts show ``real``'s place there below
    ``root``'s (Linux's mount table; None elsewhere)."""
    mounts = _mounts()  # one reading of the table for both paths
    root_place, real_place = _place(root, mounts), _place(real, mounts)
    if root_place is None or real_place is None or root_place[0] != real_place[0]:
        return None
    inside = relative_to(real_place[1], root_place[1])
    return None if inside is None else _join(root, inside)


def _place(real: str, mounts: tuple[tuple[str, str, str], ...]) -> tuple[str, str] | None:
    """A real path's filesystem (its device number) and its path within that filesystem, from the mount it lies
    on: a bind mount of ``/data/corpus`` at ``/mnt/b`` shows ``/mnt/b/x`` as ``/data/corpus/x`` on ``/data``'s."""
    best: tuple[str, str, str] | None = None
    for device, fs_root, point in mounts:
        if relative_to(real, point) is not None and (best is None or len(point) >= len(best[2])):
            best = (device, fs_root, point)  # the longest mount point; on a tie the later mount, which hides
    if best is None:
        return None
    device, fs_root, point = best
    return device, _join(fs_root, relative_to(real, point) or "")


def _mounts() -> tuple[tuple[str, str, str], ...]:
    """(device, root within its filesystem, mount point) of each mount, in mount order; empty off Linux."""
    try:
        with open(_MOUNTINFO, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return ()
    mounts = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            mounts.append((fields[2], _unescape(fields[3]), _unescape(fields[4])))
    return tuple(mounts)


def _unescape(field: str) -> str:
    r"""A mountinfo path: space, tab, newline and backslash are written in octal (``\040``)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _ancestors(path: str) -> Iterator[str]:
    """``path`` and each folder above it, up to ``/``."""
    while True:
        yield path
        parent = posixpath.dirname(path)
        if parent == path:
            return
        path = parent


def relative_to(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder`` ('' for the folder itself); None when it is not below it."""
    folder = folder.rstrip("/")
    if path == folder or (not folder and path == "/"):
        return ""
    return path[len(folder) + 1 :] if path.startswith(folder + "/") else None


def _join(folder: str, relative: str) -> str:
    relative = relative.strip("/")
    return folder.rstrip("/") + "/" + relative if relative else folder or "/"


def refuse_nested_output(fs: AbstractFileSystem, root: str, output: str) -> None:
    """OutputError when OUTPUT lies below a folder holding a zerda output (:func:`_is_zerda_output`), or holds
    one below it, outside its own dataset folders: either way the outer output's readers would read the
    inner one's chunks as their own. Local folders are walked by the name given and by their real path, so an
    alias of another output is seen through."""
    names = [root, os.path.realpath(root)] if isinstance(fs, LocalFileSystem) else [root]
    for name in dict.fromkeys(names):
        for folder in list(_ancestors(name))[1:]:
            if not folder:
                break  # above an object store's buckets
            if _is_zerda_output(fs, folder):
                raise OutputError(
                    f"output {bounded(redact_url(output))!r} is inside the zerda output"
                    f" {bounded(redact_url(fs.unstrip_protocol(folder)))!r}, whose readers"
                    f" (read_parquet('{bounded(folder)}/**/*.parquet')) would read these chunks as its own:"
                    " write it elsewhere"
                )
    inner = _outputs_below(fs, root)
    if inner:
        shown = ", ".join(bounded(posixpath.relpath(path, root)) for path in inner[:_SHOWN])
        raise OutputError(
            f"output {bounded(redact_url(output))!r} holds another zerda output below it ({shown}), whose chunks"
            " its readers (read_parquet('OUTPUT/**/*.parquet')) would read as its own: move it out of OUTPUT"
        )


def _outputs_below(fs: AbstractFileSystem, root: str) -> list[str]:
    """Folders below OUTPUT, outside its dataset folders and staging, that hold a zerda output's markers."""
    try:
        entries = fs.ls(root, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: set[str] = set()
    for entry in entries:
        name = posixpath.basename(entry["name"].rstrip("/"))
        if entry.get("type") != "directory" or is_dataset_entry(name) or name == STAGING_DIR:
            continue
        for path in fs.find(entry["name"], withdirs=False):
            if posixpath.basename(path) in _MARKERS:
                found.add(posixpath.dirname(path))
    return sorted(folder for folder in found if _is_zerda_output(fs, folder))


def _is_zerda_output(fs: AbstractFileSystem, folder: str) -> bool:
    """A folder holding a zerda output: ``_manifest.json`` or ``_SUCCESS`` beside a dataset folder (a Hadoop
    job's ``_SUCCESS`` alone is not one)."""
    if not any(fs.isfile(f"{folder}/{marker}") for marker in _MARKERS):
        return False
    try:
        names = [posixpath.basename(entry.rstrip("/")) for entry in fs.ls(folder, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return False
    return any(is_dataset_entry(name) for name in names)
