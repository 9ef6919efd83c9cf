"""``zerda-report --verify OUTPUT``: read every byte of a finished output's data and check it.

A run checks what it commits from the files' footers (rows, the staged path), and an incremental run keeps the
previous chunk files where they are, reading only their footers: a byte flipped inside a page (a bad sector, a
copy gone wrong) keeps the size and the footer, and nothing would see it. Here every chunk and reject file the
manifest lists is decoded whole with each page's CRC checked (zerda writes one per page), its rows, size and
footer (its digest, which no page CRC covers: another file put in its place) compared with the manifest's entry,
and the rows of each folder with the manifest's counts.
"""

from __future__ import annotations

import os
import posixpath
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow.parquet as pq

from pipelines.errors import OutputError
from pipelines.output.layout import CHANGES_DIR, FILES_TABLE, IDS_DIR, INDEX_DIR, MANIFEST_DIR, MANIFEST_FILE
from pipelines.output.manifest import Manifest, folder_rows, footer_digest
from pipelines.output.ownership import dataset_files
from pipelines.redact import bounded
from pipelines.report.scan import open_output, reading_output

_BATCH_ROWS = 4096  # rows decoded at once: memory follows a batch, not a file


@dataclass(frozen=True)
class Verification:
    """What ``--verify`` found: the files and rows read, and one line per problem (the file first)."""

    files: int
    rows: int
    problems: tuple[str, ...]


def verify_output(url: str) -> Verification:
    """Read and check a finished output; ``OutputError`` (one line) when there is none, its manifest lists no
    files, or it cannot be opened or listed. A file that cannot be read is a problem named in the result."""
    with reading_output(url):
        return _verify_output(url)


def _verify_output(url: str) -> Verification:
    fs, root = open_output(url)
    manifest = Manifest.load(fs, root)
    listed = manifest.files
    if listed is None:
        raise OutputError(f"{MANIFEST_FILE} lists no files (an output of an older zerda): rerun into it to verify")
    entries = {entry["path"]: entry for entry in listed}
    problems: list[str] = []
    rows: dict[str, int] = defaultdict(int)
    total = 0
    for relative, entry in sorted(entries.items()):
        read, problem = _read_whole(fs, f"{root}/{relative}", entry)
        if problem is not None:
            problems.append(f"{relative}: {problem}")
        rows[relative.split("/", 1)[0]] += read
        total += read
    problems += _count_problems(rows, manifest)
    problems += [f"{relative}: not listed in {MANIFEST_FILE}" for relative in _unlisted(fs, root, entries)]
    return Verification(len(entries), total, tuple(problems))


def _read_whole(fs: fsspec.AbstractFileSystem, path: str, entry: Mapping[str, Any]) -> tuple[int, str | None]:
    """The rows of one listed file, decoded whole with page checksums checked, and what is wrong with it."""
    try:
        with fs.open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)  # known from opening it: no request of its own on an object store
            f.seek(0)
            footer = footer_digest(f) if entry.get("footer") else None
            f.seek(0)
            parquet = pq.ParquetFile(f, page_checksum_verification=True)
            read = sum(batch.num_rows for batch in parquet.iter_batches(batch_size=_BATCH_ROWS))
    except FileNotFoundError:
        return 0, "missing"
    except Exception as err:  # Arrow's checksum, decoding and thrift errors, or the storage's own
        return 0, f"unreadable ({type(err).__name__}: {bounded(str(err), 200)})"
    if entry.get("bytes") is not None and size != entry["bytes"]:
        return read, f"{size:,} bytes, the manifest says {entry['bytes']:,}"
    if entry.get("rows") is not None and read != entry["rows"]:
        return read, f"{read:,} rows, the manifest says {entry['rows']:,}"
    if footer is not None and footer != entry["footer"]:  # whole pages, the size and rows: another file in its place
        return read, "its footer is not the one committed (another file put in its place, or changed in place)"
    return read, None


def _count_problems(rows: Mapping[str, int], manifest: Manifest) -> list[str]:
    """Each bucket folder's rows and the reject rows against what the manifest counts (:func:`folder_rows`), and
    the rows of its table of input files against the files it counts read."""
    expected = folder_rows(manifest.counts)
    if manifest.format >= 2 and manifest.counts.get("files_read"):
        expected[MANIFEST_DIR] = manifest.counts["files_read"]
    found = {folder: n for folder, n in rows.items() if folder not in (INDEX_DIR, IDS_DIR, CHANGES_DIR)}
    return [
        f"{folder}/: {found.get(folder, 0):,} rows, the manifest counts {expected.get(folder, 0):,}"
        for folder in sorted({*found, *expected})
        if found.get(folder, 0) != expected.get(folder, 0)
    ]


def _unlisted(fs: fsspec.AbstractFileSystem, root: str, entries: Mapping[str, Any]) -> list[str]:
    """Files in the dataset folders the manifest does not list, which the dataset's readers would read too, as
    the commit finds them (:func:`dataset_files`: hidden names and an object store's folder markers left out)."""
    found = dataset_files(fs, root)
    relatives = (posixpath.relpath(path, root) for path in (*found.ours, *found.foreign))
    return sorted(relative for relative in relatives if relative not in entries and relative != FILES_TABLE)


def render_verification(url: str, result: Verification) -> str:
    """The lines ``--verify`` prints: one ``verified`` line, or each problem."""
    if not result.problems:
        return f"verified {url}: {result.files:,} files, {result.rows:,} rows; page checksums, sizes and counts match\n"
    lines = [f"damaged {url}: {len(result.problems):,} problem(s)", *(f"  {p}" for p in result.problems)]
    return "\n".join(lines) + "\n"
