"""``--incremental`` against a full run over random edit sequences: the class, not a handful of examples.

A seeded corpus (JSONL with and without ids, duplicate ids and identical copies, a gzip JSONL file, a Parquet
file, Markdown files, lines that are rejects) is edited at random for several rounds: records edited,
deleted, inserted, swapped and moved between files, files touched without a change, renamed, added and
deleted. After each round an incremental run of the output must equal a full run of the new corpus (rows,
index, rejects, counts), list as ``_changes`` exactly the chunk ids the dataset gained and lost, and count
documents by identity: a model of the corpus, independent of zerda's code, gives the expected
``documents_added/changed/removed/unchanged`` (within a source and an id, copies are paired by text).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pipelines.cli.rechunk import run
from pipelines.records import content_id
from tests.common import MULTI_PROCESS, REPO

_WORDS = (
    "the fennec fox sleeps by day in a burrow under the dunes and hunts by night while caravans cross "
    "salt flats where wells are rare and every traveller counts the stars to find the way home"
).split()
_CODE = "SELECT id, name FROM t{n} WHERE age > {n} AND city = 'Tunis';\n"
_JSONL = ("a.jsonl", "b.jsonl", "c.jsonl.gz")
_ROUNDS = 4


def _text(rng: random.Random) -> str:
    """A document long enough to be chunked (over ``min_chunk_size``), prose or code, of varied length."""
    if rng.random() < 0.3:
        return "".join(_CODE.format(n=rng.randrange(1000)) for _ in range(rng.randrange(4, 30)))
    words = [rng.choice(_WORDS) for _ in range(rng.randrange(30, 400))]
    return " ".join(words).capitalize() + "."


@dataclass
class _Line:
    """One line of a JSONL file: a document (``doc_id`` None: it has no id) or, with ``bad``, a reject."""

    text: str
    doc_id: str | None
    bad: bool = False

    def encoded(self) -> str:
        if self.bad:
            return '{"id": "broken", "text": ' + json.dumps(self.text)[:20] + "\n"  # invalid JSON
        return json.dumps({"text": self.text} if self.doc_id is None else {"id": self.doc_id, "text": self.text}) + "\n"


@dataclass
class _Corpus:
    """The corpus as a model: its files' records, written to disk with the times a scheduled user's files have."""

    root: Path
    rng: random.Random
    jsonl: dict[str, list[_Line]] = field(default_factory=dict)
    parquet: list[tuple[str, str]] = field(default_factory=list)  # (id, text) rows of rows.parquet
    markdown: dict[str, str] = field(default_factory=dict)  # name -> text
    clock: float = field(default_factory=lambda: time.time() - 3600)
    ids: int = 0

    def new_line(self) -> _Line:
        roll = self.rng.random()
        if roll < 0.1:
            return _Line("not json at all", None, bad=True)
        if roll < 0.35:
            return _Line(_text(self.rng), None)
        if roll < 0.45 and self.documents():
            return _Line(_text(self.rng), self.rng.choice(self.documents())[1])  # a duplicate id
        self.ids += 1
        return _Line(_text(self.rng), f"d{self.ids}")

    def documents(self) -> list[tuple[str, str]]:
        return [(n, line.doc_id) for n, lines in self.jsonl.items() for line in lines if line.doc_id and not line.bad]

    def model(self) -> Counter[tuple[str, str, str]]:
        """(file, id, text) of every document the corpus holds: what a run must chunk."""
        found: Counter[tuple[str, str, str]] = Counter()
        for name, lines in self.jsonl.items():
            for line in lines:
                if not line.bad:
                    found[(name, line.doc_id or content_id(line.text), line.text)] += 1
        found.update((("rows.parquet", i, t) for i, t in self.parquet))
        found.update(((name, name, text) for name, text in self.markdown.items()))
        return found

    def write(self, changed: set[str]) -> None:
        """Every file to disk; the ``changed`` ones get a newer time (a minute apart), the others keep theirs."""
        self.clock += 60
        for name, lines in self.jsonl.items():
            data = "".join(line.encoded() for line in lines).encode()
            self._put(name, gzip.compress(data, mtime=0) if name.endswith(".gz") else data, name in changed)
        if self.parquet:
            ids, texts = zip(*self.parquet, strict=True)
            sink = pa.BufferOutputStream()
            pq.write_table(pa.table({"id": list(ids), "text": list(texts)}), sink, row_group_size=3)
            self._put("rows.parquet", sink.getvalue().to_pybytes(), "rows.parquet" in changed)
        for name, text in self.markdown.items():
            self._put(name, text.encode(), name in changed)
        for path in self.root.iterdir():
            if path.name not in {*self.jsonl, *self.markdown, *(("rows.parquet",) if self.parquet else ())}:
                path.unlink()

    def _put(self, name: str, data: bytes, changed: bool) -> None:
        path = self.root / name
        if changed or not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
            os.utime(path, (self.clock, self.clock))

    def edit(self) -> set[str]:
        """A random round of edits; the names of the files whose times change."""
        changed: set[str] = set()
        for _ in range(self.rng.randrange(2, 7)):
            changed |= self.rng.choice(
                [self._edit_line, self._delete_line, self._insert_line, self._swap, self._move, self._edit_file]
            )()
        return changed

    def _pick(self) -> tuple[str, list[_Line]]:
        name = self.rng.choice([n for n in _JSONL if self.jsonl[n]] or list(_JSONL))
        return name, self.jsonl[name]

    def _edit_line(self) -> set[str]:
        name, lines = self._pick()
        if lines:
            line = self.rng.choice(lines)
            line.text = _text(self.rng) if line.bad else line.text + " An edited sentence at the end."
            line.bad = False  # a reject fixed: now a document without an id
        return {name}

    def _delete_line(self) -> set[str]:
        name, lines = self._pick()
        if lines:
            lines.pop(self.rng.randrange(len(lines)))
        return {name}

    def _insert_line(self) -> set[str]:
        name, lines = self._pick()
        if lines and self.rng.random() < 0.3:
            copy = self.rng.choice(lines)
            lines.insert(self.rng.randrange(len(lines) + 1), _Line(copy.text, copy.doc_id, copy.bad))  # a twin
        else:
            lines.insert(self.rng.randrange(len(lines) + 1), self.new_line())
        return {name}

    def _swap(self) -> set[str]:
        name, lines = self._pick()
        if len(lines) > 1:
            i, j = self.rng.sample(range(len(lines)), 2)
            lines[i], lines[j] = lines[j], lines[i]
        return {name}

    def _move(self) -> set[str]:
        """A record moved to another file: it leaves one source and joins another."""
        name, lines = self._pick()
        other = self.rng.choice([n for n in _JSONL if n != name])
        if lines:
            self.jsonl[other].append(lines.pop(self.rng.randrange(len(lines))))
        return {name, other}

    def _edit_file(self) -> set[str]:
        roll = self.rng.random()
        if roll < 0.2:  # touched: a new time, the same bytes
            return {self.rng.choice(list(self.jsonl))}
        if roll < 0.4 and self.markdown:  # renamed
            old = self.rng.choice(list(self.markdown))
            new = f"renamed-{self.rng.randrange(10**6)}.md"
            self.markdown[new] = self.markdown.pop(old)
            return {new}
        if roll < 0.55:  # a new Markdown file
            name = f"note-{self.rng.randrange(10**6)}.md"
            self.markdown[name] = "# A note\n\n" + _text(self.rng)
            return {name}
        if roll < 0.7 and self.markdown:  # a file deleted
            self.markdown.pop(self.rng.choice(list(self.markdown)))
            return set()
        rows = self.parquet
        if rows and self.rng.random() < 0.5:
            rows.pop(self.rng.randrange(len(rows)))
        else:
            self.ids += 1
            rows.insert(self.rng.randrange(len(rows) + 1), (f"p{self.ids}", _text(self.rng)))
        return {"rows.parquet"}


def _seeded(root: Path, seed: int) -> _Corpus:
    corpus = _Corpus(root, random.Random(seed))
    root.mkdir()
    for name in _JSONL:
        corpus.jsonl[name] = [corpus.new_line() for _ in range(corpus.rng.randrange(3, 9))]
    corpus.parquet = [(f"p{n}", _text(corpus.rng)) for n in range(5)]
    corpus.markdown = {"guide.md": "# Guide\n\n" + _text(corpus.rng), "keep.md": "# Keep\n\n" + _text(corpus.rng)}
    corpus.write(set())
    return corpus


def _expected_changes(before: Counter[tuple[str, str, str]], after: Counter[tuple[str, str, str]]) -> dict[str, int]:
    """Documents counted by identity (file, id); copies of one identity paired by equal text first."""
    identities = {(f, i) for f, i, _ in before} | {(f, i) for f, i, _ in after}
    counts = dict.fromkeys(("documents_added", "documents_changed", "documents_removed", "documents_unchanged"), 0)
    for f, i in identities:
        old = Counter({t: n for (ff, ii, t), n in before.items() if (ff, ii) == (f, i)})
        new = Counter({t: n for (ff, ii, t), n in after.items() if (ff, ii) == (f, i)})
        same = sum((old & new).values())
        gone, came = sum((old - new).values()), sum((new - old).values())
        counts["documents_unchanged"] += same
        counts["documents_changed"] += min(gone, came)
        counts["documents_removed"] += gone - min(gone, came)
        counts["documents_added"] += came - min(gone, came)
    return counts


def _rows(output: Path) -> list[tuple[Any, ...]]:
    table = ds.dataset(str(output), format="parquet", partitioning="hive").to_table()
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _side(output: Path, folder: str, drop: str = "") -> list[tuple[Any, ...]]:
    rows = pq.read_table(output / folder).to_pylist()
    return sorted(tuple(str(v) for k, v in row.items() if k != drop) for row in rows)


def _chunk_ids(output: Path) -> set[tuple[str, str]]:
    return {(r["chunk_id"], r["doc_id"]) for r in pq.read_table(output, columns=["chunk_id", "doc_id"]).to_pylist()}


@pytest.mark.parametrize(
    ("seed", "parallel"), [(7, False), (1234, True)], ids=["in-memory", "2-worker-processes-split-files"]
)
def test_incremental_runs_over_random_edits_equal_full_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, parallel: bool
) -> None:
    """``parallel``: the incremental runs use two worker processes and read files in parts of a few lines."""
    corpus = _seeded(tmp_path / "corpus", seed)
    output = tmp_path / "out"
    argv = ["--input", str(corpus.root), "--quiet"]
    options: list[str] = []
    if parallel:
        monkeypatch.setenv("PYTHONPATH", str(REPO))  # the worker processes import pipelines from the checkout
        config = tmp_path / "split.yaml"
        config.write_text("input:\n  split_bytes: 2000\n", encoding="utf-8")
        options = [*MULTI_PROCESS, "--config", str(config)]
    run([*argv, "--output", str(output), *options])
    model = corpus.model()
    for round_number in range(_ROUNDS):
        before_ids = _chunk_ids(output)
        corpus.write(corpus.edit())
        fresh = tmp_path / f"fresh-{round_number}"
        manifest = run([*argv, "--output", str(output), "--incremental", *options])
        full = run([*argv, "--output", str(fresh)])
        where = f"seed {seed}, round {round_number}"
        assert manifest["changes"]["incremental"] is True, (where, manifest["changes"]["reason"])
        assert _rows(output) == _rows(fresh), where
        assert _side(output, "_rejects") == _side(fresh, "_rejects"), where
        assert _side(output, "_index", drop="chunk_file") == _side(fresh, "_index", drop="chunk_file"), where
        assert manifest["counts"] == full["counts"], where
        after_ids = _chunk_ids(fresh)
        listed = {(r["chunk_id"], r["doc_id"], r["change"]) for r in pq.read_table(output / "_changes").to_pylist()}
        assert listed == {(*c, "added") for c in after_ids - before_ids} | {
            (*c, "removed") for c in before_ids - after_ids
        }, where
        now = corpus.model()
        counted = {k: v for k, v in manifest["changes"].items() if k.startswith("documents_")}
        assert counted == _expected_changes(model, now), where
        model = now
