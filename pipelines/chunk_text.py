"""ChunkText: zerda's density-adaptive chunker as a Beam transform any pipeline can use.

In: a PCollection of ``str``, of dicts or of ``zerda_core`` ``Document``s (the job's own
``SourceRecord``s too). Out: ``DocumentChunk``s, one element a chunk, or with
``per_document=True`` one list a document (cheaper downstream: Beam's cost per element is paid
once a document, not once a chunk). Every element that yields no chunk goes to the
:data:`REJECTS` output as a ``Reject`` with the job's reasons, so nothing is lost silently.

- A dict (or ``beam.Row``) holds ``text`` (another key with ``document_field``), optionally ``id``
  (or ``doc_id``) and ``source``; its other keys are carried into every chunk's ``metadata.extra``,
  or with ``metadata_fields`` only the keys named there (the chunker's own keys, such as ``density``,
  win a clash): the meaning Beam's own RAG chunkers give those two arguments. A ``SourceRecord``'s
  record number is carried as ``extra["record"]``, its title (``input.title_field``) as ``extra["title"]``.
- With ``embed_text`` (a template, see :mod:`pipelines.embed_text`) each chunk also carries its rendered
  embedding text as ``extra["embed_text"]``; its ``text`` stays the exact slice of the document.
- An element without an id gets one from its content (:func:`pipelines.records.content_id`): a PCollection has
  no order, so only the text itself gives an id that is the same on every run and retry.

    texts | ChunkText(ChunkingSettings(min_size=80, max_size=800))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows
from apache_beam.typehints.decorators import no_annotations

from pipelines.embed_text import EMBED_TEXT_KEY, TITLE_KEY, check_template, render
from pipelines.names import METRICS_NAMESPACE, REJECTS
from pipelines.records import (
    Reject,
    RejectLimit,
    SourceRecord,
    content_id,
    encodable,
    excerpt,
    lone_surrogate,
    nothing_visible,
)
from pipelines.settings import ChunkingSettings, as_chunking_settings
from zerda_core.chunks import ChunkConfig, Document

TEXT_KEY = "text"
ID_KEYS = ("id", "doc_id")
SOURCE_KEY = "source"


def reject_summaries(limit: RejectLimit) -> Iterator[TaggedOutput]:
    """A bundle's summary rows of the rejects ``limit`` left out, as the ``rejects`` output at its end (no
    element is at hand in ``finish_bundle``, so each goes to the end of the global window)."""
    for summary in limit.summaries():
        yield TaggedOutput(REJECTS, GlobalWindows.windowed_value_at_end_of_window(summary))


@dataclass(frozen=True)
class _Fields:
    """Where a dict's text is, and which of its keys its chunks carry (``None``: all but text, id and source)."""

    text: str = TEXT_KEY
    metadata: tuple[str, ...] | None = None

    @cached_property
    def own(self) -> frozenset[str]:
        """The keys zerda reads itself, never carried: the text, the source and the ids."""
        return frozenset({self.text, SOURCE_KEY, *ID_KEYS})

    def extra(self, element: Mapping[str, Any]) -> dict[str, Any]:
        """The fields carried into the chunks' metadata; a named field the element lacks is left out."""
        if self.metadata is None:
            return {key: value for key, value in element.items() if key not in self.own}
        return {key: element[key] for key in self.metadata if key in element}


@dataclass(frozen=True)
class _Input:
    """One element made ready to chunk: the document, its record number and the fields it carries."""

    document: Document
    record: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _document(text: str, doc_id: object, source: object) -> Document:
    has_id = (isinstance(doc_id, str) and doc_id != "") or (isinstance(doc_id, int) and not isinstance(doc_id, bool))
    ident = encodable(str(doc_id)) if has_id else content_id(text)
    return Document(text, ident, "" if source is None else encodable(str(source)))


def _as_input(element: object, fields: _Fields) -> _Input | Reject:
    """Whatever came in, as a document to chunk, or the reject that says why it is not one.

    Ids and sources are made encodable; a text with a lone surrogate is rejected ``invalid_utf8``, as the
    job's reader does by default: its chunks could not be written as UTF-8 (Arrow, Parquet, most coders).
    """
    item = _read_input(element, fields)
    if isinstance(item, Reject):
        return item
    doc = item.document
    where = lone_surrogate(doc.text, "text")
    if where is None:
        return item
    return Reject(doc.source, item.record, doc.doc_id, "invalid_utf8", where, encodable(excerpt(doc.text)))


def _read_input(element: object, fields: _Fields) -> _Input | Reject:
    if isinstance(element, beam.Row):
        element = element._asdict()
    if isinstance(element, str):
        return _Input(_document(element, None, None))
    if isinstance(element, SourceRecord):
        document = Document(element.text, encodable(element.doc_id), encodable(element.source))
        extra: dict[str, Any] = {"record": element.record}
        if element.title is not None:
            extra[TITLE_KEY] = element.title
        return _Input(document, element.record, extra)
    if isinstance(element, Document):
        if not isinstance(element.text, str):
            source, doc_id = encodable(str(element.source)), encodable(str(element.doc_id))
            return Reject(source, 0, doc_id, "missing_text", _not_a_string(element.text), "")
        return _Input(_document(element.text, element.doc_id, element.source))
    if isinstance(element, Mapping):
        raw_id = next((element[key] for key in ID_KEYS if element.get(key) not in (None, "")), None)
        text, source = element.get(fields.text), encodable(str(element.get(SOURCE_KEY) or ""))
        if not isinstance(text, str):
            message = f"no {fields.text!r} key" if fields.text not in element else _not_a_string(text, fields.text)
            doc_id = "" if raw_id is None else encodable(str(raw_id))
            return Reject(source, 0, doc_id, "missing_text", encodable(message), encodable(excerpt(element)))
        return _Input(_document(text, raw_id, source), 0, fields.extra(element))
    message = f"expected str, dict, beam.Row or Document, got {type(element).__name__}"
    return Reject("", 0, "", "not_text", message, encodable(excerpt(element)))


def _not_a_string(value: object, name: str = TEXT_KEY) -> str:
    return f"{name!r} is {'null' if value is None else 'a ' + type(value).__name__}, not a string"


class _ChunkTextFn(beam.DoFn):
    """Chunks one element; ``setup()`` builds the chunker once per worker from the typed settings."""

    def __init__(
        self,
        chunking: ChunkingSettings,
        per_document: bool,
        max_reject_rows: int | None,
        fields: _Fields,
        embed_text: str | None = None,
    ) -> None:
        self._chunking = chunking
        self._embed_text = embed_text
        self._fields = fields
        self._per_document = per_document
        self._max_reject_rows = max_reject_rows
        self._documents = Metrics.counter(METRICS_NAMESPACE, "documents_chunked")
        self._chunks = Metrics.counter(METRICS_NAMESPACE, "chunks_written")
        self._density = Metrics.distribution(METRICS_NAMESPACE, "density_x10000")

    def setup(self) -> None:
        self._chunker = self._chunking.chunker()

    def start_bundle(self) -> None:
        self._limit = RejectLimit(self._max_reject_rows)

    def finish_bundle(self) -> Iterator[TaggedOutput]:
        yield from reject_summaries(self._limit)

    def process(self, element: Any) -> Iterator[Any]:
        item = _as_input(element, self._fields)
        if isinstance(item, Reject):
            yield from self._reject(item)
            return
        doc = item.document
        try:
            blank = nothing_visible(doc.text)
            chunks = [] if blank else self._chunker.chunk(doc.text, doc_id=doc.doc_id, source=doc.source)
        except Exception as error:  # a bad document must not stop a 10 TB job
            yield from self._reject(_refused(item, "chunker_error", f"{type(error).__name__}: {error}"))
            return
        if blank is not None:
            yield from self._reject(_refused(item, "empty", blank))
            return
        if not chunks:
            below = _refused(item, "below_min_chunk_size", f"{len(doc.text.strip())} visible characters")
            yield from self._reject(below)
            return
        if item.extra:
            for chunk in chunks:
                chunk.metadata.extra = {**item.extra, **chunk.metadata.extra}
        if self._embed_text is not None:
            for chunk in chunks:
                chunk.metadata.extra[EMBED_TEXT_KEY] = render(self._embed_text, chunk)
        self._documents.inc()
        self._chunks.inc(len(chunks))
        self._density.update(round(chunks[0].metadata.extra["density"] * 10_000))
        if self._per_document:
            yield chunks
        else:
            yield from chunks

    def _reject(self, reject: Reject) -> Iterator[TaggedOutput]:
        Metrics.counter(METRICS_NAMESPACE, f"rejects_{reject.reason}").inc()
        if self._limit.admit(reject):
            yield TaggedOutput(REJECTS, reject)


def _refused(item: _Input, reason: str, message: str) -> Reject:
    doc = item.document
    return Reject(doc.source, item.record, doc.doc_id, reason, encodable(message), excerpt(doc.text))


class ChunkText(beam.PTransform):
    """Texts, dicts or Documents -> ``DocumentChunk``s (main output ``chunks``) and ``Reject``s (``rejects``).

    ``per_document=True`` emits one ``list[DocumentChunk]`` a document instead of one chunk an element.
    ``max_reject_rows`` (None: no limit) keeps that many rejects per source and reason in a bundle, then one
    summary ``Reject`` whose ``count`` is the rest (batch, global window): a flood of bad elements stays small.
    ``chunking`` is the YAML section (``ChunkingSettings``) or the library's ``ChunkConfig``: the same
    settings either way give the same chunks (see :func:`~pipelines.settings.as_chunking_settings`).
    ``document_field`` names a dict's text key; ``metadata_fields`` the keys copied into its chunks' metadata
    (None: all but the text, id and source). The settings are checked (and a ``min_size > max_size`` warning
    logged) when the transform is built, not later on a worker. ``embed_text`` is a template
    (:mod:`pipelines.embed_text`) rendered into each chunk's ``metadata.extra["embed_text"]``; None: none.
    """

    def __init__(
        self,
        chunking: ChunkingSettings | ChunkConfig | None = None,
        *,
        per_document: bool = False,
        max_reject_rows: int | None = None,
        document_field: str = TEXT_KEY,
        metadata_fields: Sequence[str] | None = None,
        embed_text: str | None = None,
        label: str | None = None,
    ) -> None:
        super().__init__(label)
        self.embed_text = check_template(embed_text)
        self.chunking = as_chunking_settings(chunking)
        self.chunking.chunker()
        if not isinstance(document_field, str) or not document_field:
            raise ValueError("document_field must be a non-empty string, the key that holds the text")
        if metadata_fields is not None and (
            isinstance(metadata_fields, str) or not all(isinstance(name, str) for name in metadata_fields)
        ):
            raise TypeError("metadata_fields must be a list of field names (strings), or None for every field")
        self._fields = _Fields(document_field, None if metadata_fields is None else tuple(metadata_fields))
        self._per_document = per_document
        self._max_reject_rows = max_reject_rows

    @no_annotations
    def expand(self, elements: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        chunk_fn = _ChunkTextFn(self.chunking, self._per_document, self._max_reject_rows, self._fields, self.embed_text)
        return elements | "Chunk" >> beam.ParDo(chunk_fn).with_outputs(REJECTS, main="chunks")
