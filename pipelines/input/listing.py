"""Lists the launcher knows (input files, unchanged files, previous chunk files) handed to the workers as
files, not inside the job graph: the graph then holds a few paths whatever the number of files. A graph
that held every file (a few hundred bytes each) would pass Dataflow's 20 MiB limit at about 10^5 files.

The launcher writes the items as JSON lines, ``per_file`` to a file, in a folder of its run's staging (the
commit deletes it with the staging); the workers read one file each and emit its items.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import apache_beam as beam
from apache_beam.pvalue import PBegin
from fsspec.core import url_to_fs

from pipelines.output.layout import LISTING_DIR, STAGING_DIR
from pipelines.output.write import absolute_url

T = TypeVar("T")
PER_FILE = 10_000  # items a listing file holds: a worker's share, and few files for the graph to name


def listing_folder(output: str, run_id: str, name: str) -> str:
    """Where run ``run_id`` writes its list ``name`` for the workers: ``OUTPUT/_staging/<run_id>/listing/<name>``
    (an absolute URL: workers may not share the launcher's cwd), deleted with the run's staging."""
    return f"{absolute_url(output)}/{STAGING_DIR}/{run_id}/{LISTING_DIR}/{name}"


class Listed(beam.PTransform, Generic[T]):
    """``items`` (known at launch) -> a PCollection of them, read by the workers from files under ``folder``
    (a URL the workers can read), written when the transform is applied. ``encode`` makes an item a JSON
    value and ``decode`` makes it again."""

    def __init__(
        self,
        items: Sequence[T],
        folder: str,
        encode: Callable[[T], Any],
        decode: Callable[[Any], T],
        per_file: int = PER_FILE,
    ) -> None:
        super().__init__()
        self._items, self._folder = items, folder
        self._encode, self._decode, self._per_file = encode, decode, per_file

    def expand(self, pbegin: PBegin) -> beam.PCollection:
        fs, folder = url_to_fs(self._folder)
        fs.makedirs(folder, exist_ok=True)
        paths = []
        for number, start in enumerate(range(0, len(self._items), self._per_file)):
            path = posixpath.join(folder, f"{number:05d}.jsonl")
            lines = (json.dumps(self._encode(item)) + "\n" for item in self._items[start : start + self._per_file])
            fs.pipe_file(path, "".join(lines).encode("utf-8"))
            paths.append(fs.unstrip_protocol(path))
        return (
            pbegin
            | "ListingFiles" >> beam.Create(paths, reshuffle=False)
            | "SpreadListings" >> beam.Reshuffle()
            | "ReadListing" >> beam.FlatMap(_read_listing, self._decode)
        )


def _read_listing(url: str, decode: Callable[[Any], T]) -> Iterator[T]:
    fs, path = url_to_fs(url)
    with fs.open(path, "rb") as f:
        for line in f:
            yield decode(json.loads(line))
