"""Reading a finished output back: manifest, chunk aggregates (streamed by Arrow), rejects, samples."""

from __future__ import annotations

import fnmatch
import posixpath
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from fsspec.core import url_to_fs
from pyarrow import acero

from pipelines.errors import OutputError
from pipelines.output.layout import (
    CHUNK_SUFFIX,
    MANIFEST_FILE,
    PARTITION_COLUMN,
    REJECT_SUFFIX,
    REJECTS_DIR,
    SUCCESS_FILE,
)
from pipelines.output.manifest import Manifest
from pipelines.redact import bounded, redact_url
from pipelines.report.model import Group, RejectedFile, Report, Sample, SourceCounts

_GROUP_KEYS = [PARTITION_COLUMN, "char_count", "language"]
SAMPLES_PER_BUCKET = 2
SAMPLE_CHARS = 280
_SAMPLE_SCAN_ROWS = 256


def open_output(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and root of a finished output; ``OutputError`` when there is none to report."""
    fs, root = url_to_fs(url)
    root = root.rstrip("/") or root
    shown = redact_url(url)
    if not fs.isdir(root):
        if fs.exists(root):
            raise OutputError(f"{shown} is a file, not an output folder: give the folder zerda-rechunk wrote")
        raise OutputError(f"no output at {shown}: the directory does not exist")
    if not fs.exists(posixpath.join(root, SUCCESS_FILE)):
        raise OutputError(
            f"{shown} has no {SUCCESS_FILE}: the run failed or is still writing, so its numbers would be partial."
            " Rerun the pipeline into it, then report."
        )
    if not fs.isfile(posixpath.join(root, MANIFEST_FILE)):
        raise OutputError(f"{shown} has {SUCCESS_FILE} but no {MANIFEST_FILE}: not a zerda output")
    return fs, root


def committed_files(fs: fsspec.AbstractFileSystem, root: str, manifest: Manifest) -> list[str] | None:
    """The data files the manifest lists (absolute paths), each checked present with its committed size.

    ``None`` for a manifest from before zerda listed its files (then the folders are globbed). A listed
    file gone or of another size means the output was changed by hand or half copied: its numbers would
    be wrong, so ``OutputError``.
    """
    entries = manifest.files
    if entries is None:
        return None
    present = {posixpath.relpath(path, root): info.get("size") for path, info in fs.find(root, detail=True).items()}
    missing = [
        entry["path"]
        for entry in entries
        if entry["path"] not in present
        or (entry.get("bytes") is not None and present[entry["path"]] not in (None, entry["bytes"]))
    ]
    if missing:
        raise OutputError(
            f"the output is incomplete: {len(missing)} file(s) its manifest lists are gone or changed"
            f" (e.g. {bounded(missing[0])}), so its numbers would be wrong. Rerun the pipeline into it, then report."
        )
    return [posixpath.join(root, entry["path"]) for entry in entries]


def _parquet_files(fs: fsspec.AbstractFileSystem, pattern: str, listed: list[str] | None = None) -> list[str]:
    """The files matching ``pattern``: of those the manifest lists when it lists them, else by glob."""
    if listed is None:
        return sorted(fs.glob(pattern))
    return sorted(path for path in listed if _matches(path, pattern))


def _matches(path: str, pattern: str) -> bool:
    """``path`` matches ``pattern`` part by part (``*`` stays inside one folder name)."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(
        part == want or ("*" in want and fnmatch.fnmatchcase(part, want))
        for part, want in zip(parts, wanted, strict=True)
    )


def chunk_files(fs: fsspec.AbstractFileSystem, root: str, listed: list[str] | None = None) -> list[str]:
    """The chunk files of a directory output: only files under ``density_bucket=K/`` count, so a stray temp
    folder in OUTPUT never adds rows."""
    return _parquet_files(fs, posixpath.join(root, f"{PARTITION_COLUMN}=*", f"*{CHUNK_SUFFIX}"), listed)


def chunk_dataset(fs: fsspec.AbstractFileSystem, files: list[str], root: str | None = None) -> ds.Dataset | None:
    """The chunk rows of ``files``, ``density_bucket`` a column: from the Hive folders below ``root`` (a
    directory output's files do not hold it), or from the files themselves (a table's data files do)."""
    if not files:
        return None
    if root is None:
        return ds.dataset(files, filesystem=fs, format="parquet")
    partitioning = ds.partitioning(pa.schema([(PARTITION_COLUMN, pa.int32())]), flavor="hive")
    return ds.dataset(files, filesystem=fs, format="parquet", partitioning=partitioning, partition_base_dir=root)


def scan_chunks(dataset: ds.Dataset | None) -> tuple[Group, ...]:
    """Chunks and first chunks (one per document) by bucket, size and language, aggregated while streaming."""
    if dataset is None:
        return ()
    is_first = pc.equal(pc.field("chunk_index"), 0).cast(pa.int64())
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("scan", acero.ScanNodeOptions(dataset, columns=[*_GROUP_KEYS, "chunk_index"])),
            acero.Declaration(
                "project",
                acero.ProjectNodeOptions([*map(pc.field, _GROUP_KEYS), is_first], [*_GROUP_KEYS, "first"]),
            ),
            acero.Declaration(
                "aggregate",
                acero.AggregateNodeOptions(
                    [([], "hash_count_all", None, "chunks"), ("first", "hash_sum", None, "documents")],
                    keys=_GROUP_KEYS,
                ),
            ),
        ]
    )
    rows = plan.to_table().to_pylist()
    return tuple(
        Group(row[PARTITION_COLUMN], row["char_count"], row["language"], row["chunks"], row["documents"])
        for row in sorted(rows, key=lambda row: (row[PARTITION_COLUMN], row["char_count"], row["language"]))
    )


def scan_sources(dataset: ds.Dataset | None) -> dict[str, tuple[int, int, int]]:
    """Per source file: (documents, chunks, characters), aggregated while streaming three columns."""
    if dataset is None:
        return {}
    is_first = pc.equal(pc.field("chunk_index"), 0).cast(pa.int64())
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("scan", acero.ScanNodeOptions(dataset, columns=["source", "chunk_index", "char_count"])),
            acero.Declaration(
                "project",
                acero.ProjectNodeOptions(
                    [pc.field("source"), is_first, pc.field("char_count").cast(pa.int64())],
                    ["source", "first", "chars"],
                ),
            ),
            acero.Declaration(
                "aggregate",
                acero.AggregateNodeOptions(
                    [
                        ("first", "hash_sum", None, "documents"),
                        ([], "hash_count_all", None, "chunks"),
                        ("chars", "hash_sum", None, "characters"),
                    ],
                    keys=["source"],
                ),
            ),
        ]
    )
    return {row["source"]: (row["documents"], row["chunks"], row["characters"]) for row in plan.to_table().to_pylist()}


def reject_files(fs: fsspec.AbstractFileSystem, root: str, listed: list[str] | None = None) -> list[str]:
    """The reject files of a directory output, in ``_rejects/`` (absent when none)."""
    return _parquet_files(fs, posixpath.join(root, REJECTS_DIR, f"*{REJECT_SUFFIX}"), listed)


def read_rejects(fs: fsspec.AbstractFileSystem, files: list[str]) -> tuple[dict[str, int], tuple[RejectedFile, ...]]:
    """Rejected records by reason, and by file (most rejects first), from the reject ``files``."""
    if not files:
        return {}, ()
    dataset = ds.dataset(files, filesystem=fs, format="parquet")
    counted = "count" in dataset.schema.names  # a summary row stands for ``count`` records (older outputs: 1 a row)
    table = dataset.to_table(columns=["source", "record", "reason", "message"] + (["count"] if counted else []))
    by_reason: Counter[str] = Counter()
    by_file: dict[str, tuple[Counter[str], tuple[int, str]]] = {}
    for row in table.to_pylist():
        records = row["count"] if counted else 1
        by_reason[row["reason"]] += records
        reasons, first = by_file.setdefault(row["source"], (Counter(), (row["record"], row["message"])))
        reasons[row["reason"]] += records
        by_file[row["source"]] = (reasons, min(first, (row["record"], row["message"])))
    rejected = [
        RejectedFile(source, sum(reasons.values()), dict(_most_first(reasons)), first[1])
        for source, (reasons, first) in by_file.items()
    ]
    return dict(_most_first(by_reason)), tuple(sorted(rejected, key=lambda f: (-f.rejects, f.source)))


def _most_first(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def read_samples(
    fs: fsspec.AbstractFileSystem, files: list[str], per_bucket: int = SAMPLES_PER_BUCKET
) -> tuple[Sample, ...]:
    """From the first rows of the first of the chunk ``files`` of each bucket (its folder,
    ``density_bucket=K``), the first chunk of ``per_bucket`` documents.

    Cheap (one batch of one file a bucket) and the same on every call.
    """
    columns = ["source", "record", "chunk_index", "language", "char_count", "text"]
    samples: list[Sample] = []
    first: dict[int, str] = {}
    for path in sorted(files):
        first.setdefault(_bucket_of(posixpath.dirname(path)), path)
    for bucket, path in sorted(first.items()):
        with fs.open(path, "rb") as f:
            parquet = pq.ParquetFile(f)
            if "text" not in parquet.schema_arrow.names:
                continue
            batch = next(parquet.iter_batches(batch_size=_SAMPLE_SCAN_ROWS, columns=columns), None)
        documents: dict[tuple[str, int], dict[str, Any]] = {}
        for row in [] if batch is None else batch.to_pylist():
            documents.setdefault((row["source"], row["record"]), row)  # one chunk a document, for variety
        rows = list(documents.values())[:per_bucket]
        samples += [Sample(bucket, **{**row, "text": _cut(row["text"])}) for row in rows]
    return tuple(samples)


def _bucket_of(folder: str) -> int:
    return int(folder.rstrip("/").rsplit("=", 1)[-1])


def _cut(text: str) -> str:
    return text if len(text) <= SAMPLE_CHARS else text[:SAMPLE_CHARS].rstrip() + "…"


@contextmanager
def reading_output(url: str) -> Iterator[None]:
    """Any error reading the output at ``url`` (opening, its manifest, listing its folders) as one
    ``OutputError`` line: the command line exits 2 with it, not with a traceback."""
    try:
        yield
    except OutputError:
        raise
    except (OSError, ValueError, ImportError, pa.ArrowException) as err:  # storage, a bad URL, a broken file
        raise OutputError(f"cannot read the output {redact_url(url)}: {redact_url(str(err))}") from err
    except Exception as err:  # a storage library's own errors: botocore's NoCredentialsError is no OSError
        raise OutputError(
            f"cannot read the output {redact_url(url)}: {type(err).__name__}: {redact_url(str(err))}"
        ) from err


def load_report(url: str) -> Report:
    """Read a finished output; ``OutputError`` (one line) if it is missing, unfinished, changed or unreadable."""
    with reading_output(url):
        return _load_report(url)


def _load_report(url: str) -> Report:
    fs, root = open_output(url)
    manifest = Manifest.load(fs, root)
    listed = committed_files(fs, root, manifest)
    chunks = chunk_files(fs, root, listed)
    return build_report(redact_url(url), manifest, fs, chunks, reject_files(fs, root, listed), root)


def build_report(
    output: str,
    manifest: Manifest,
    fs: fsspec.AbstractFileSystem,
    chunks: list[str],
    rejects: list[str],
    root: str | None = None,
) -> Report:
    """The report of an output named ``output``, from its manifest and its chunk and reject files (a
    directory's below ``root``, a table snapshot's: :func:`chunk_dataset`)."""
    dataset = chunk_dataset(fs, chunks, root)
    by_reason, rejected_files = read_rejects(fs, rejects)
    chunked = scan_sources(dataset)
    rejected = {f.source: f.rejects for f in rejected_files}
    sources = [
        SourceCounts(source, *chunked.get(source, (0, 0, 0)), rejected.get(source, 0))
        for source in set(chunked) | set(rejected)
    ]
    return Report(
        output=output,
        manifest=manifest,
        groups=scan_chunks(dataset),
        rejects=by_reason,
        sources=tuple(sorted(sources, key=lambda s: (-s.chunks, -s.rejects, s.source))),
        rejected_files=rejected_files,
        samples=read_samples(fs, chunks),
    )
