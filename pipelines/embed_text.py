"""The ``embed_text`` template: a chunk's context (heading path, id, source) put before its text for embedding.

An embedder sees a chunk alone; a heading path in front of it ("Install > From source") tells it what the
chunk is about. The chunk's ``text`` stays the exact slice of its document; the rendered template is a
second text, made in one place (:func:`render`) for the job's ``embed_text`` column, ``ChunkText`` and
``ZerdaChunker``, so the three never disagree.

Placeholders: ``{section}`` (the Markdown/rST heading path, empty when the chunk has none), ``{doc_id}``,
``{source}`` and ``{text}`` (required). ``{{`` and ``}}`` are literal braces. Nothing else is allowed (no
format specs, conversions or attribute access): a template is data from a config, never code.
"""

from __future__ import annotations

import string

from zerda_core.chunks import DocumentChunk

PLACEHOLDERS = ("section", "doc_id", "source", "text")
EMBED_TEXT_KEY = "embed_text"  # the metadata.extra key (and the job's column) that holds the rendered text
TEMPLATE_RULE = "null or a template with {text} and no placeholder but {section}, {doc_id}, {source}"


def template_problem(template: object) -> str | None:
    """Why ``template`` is not a usable template (one line), or None when it is."""
    if not isinstance(template, str):
        return f"must be a string, got {type(template).__name__}"
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as error:  # an unmatched brace
        return f"is not a template: {error}"
    names = set()
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            return f"has an unknown placeholder {{{name}}} (known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})"
        if spec or conversion:
            return f"placeholder {{{name}}} takes no format spec or conversion"
        names.add(name)
    if "text" not in names:
        return "must contain {text}, the chunk's own text"
    return None


def check_template(template: str | None) -> str | None:
    """The template itself when valid (None stays None); ValueError with the problem otherwise."""
    if template is None:
        return None
    problem = template_problem(template)
    if problem is not None:
        raise ValueError(f"embed_text {problem}")
    return template


def render(template: str, chunk: DocumentChunk) -> str:
    """The chunk's embedding text: the template filled from the chunk and its metadata."""
    meta = chunk.metadata
    section = meta.extra.get("section")
    values = {
        "section": "" if section is None else str(section),
        "doc_id": meta.doc_id,
        "source": meta.source,
        "text": chunk.text,
    }
    return template.format_map(values)
