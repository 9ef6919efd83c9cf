"""A table run's steps run again after its commit. A runner may restart steps that already ran once the commit
is done: Flink restarts every task of a failed task's region, and the commit shares a region with the steps
that read the previous snapshot's files (a task of it failing after the commit, an SDK harness losing its
connection, runs them all again). So nothing those steps read may be deleted inside the job (the launcher
deletes the run's staging, listings included, once the job is over), and the commit, run again, finds the
run's snapshot current: it commits nothing more and deletes what the steps wrote again under new names."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from pipelines.output.layout import CHANGES_DIR
from pipelines.output.manifest import Manifest
from pipelines.output.write import _remove

if TYPE_CHECKING:
    from pyiceberg.table import Table


def remove_unnamed_data(table: Table, snapshot_id: int, location: str, folder: str) -> None:
    """Delete the files in ``folder`` (a run's data folder, relative to the table's ``location``) that the run's
    snapshot ``snapshot_id`` does not name. Only that run writes there; a carried file, which keeps its name, is
    found whole under the name the snapshot holds and not written again (``iceberg.write_data_file``), and stays."""
    files = table.scan(snapshot_id=snapshot_id).plan_files()
    named = {task.file.file_path.removeprefix(f"{location}/") for task in files}
    fs, root = url_to_fs(location)
    root = posixpath.normpath(root)
    _remove(fs, [path for path in _files(fs, f"{root}/{folder}") if posixpath.relpath(path, root) not in named])


def remove_unnamed_changes(side_folder: str) -> None:
    """Delete the change files in a committed run's side folder that its manifest does not name: the workers
    write them there directly, so steps run again add files a reader of ``_changes/`` would count twice."""
    fs, root = url_to_fs(side_folder)
    root = posixpath.normpath(root)
    fs.invalidate_cache()
    named = {entry["path"] for entry in Manifest.load(fs, root).files or []}
    _remove(fs, [path for path in _files(fs, f"{root}/{CHANGES_DIR}") if posixpath.relpath(path, root) not in named])


def _files(fs: AbstractFileSystem, folder: str) -> list[str]:
    try:
        return list(fs.find(folder))
    except FileNotFoundError:
        return []
