"""The ``embed_text`` template: a chunk's context (title, heading path, id, source) put before its text for embedding.

An embedder sees a chunk alone; a heading path in front of it ("Install > From source") tells it what the
chunk is about. The chunk's ``text`` stays the exact slice of its document; the rendered template is a
second text, made in one place (:func:`render`) for the job's ``embed_text`` column, ``ChunkText`` and
``ZerdaChunker``, so the three never disagree.

Placeholders: ``{title}`` (the document's title: a record's ``input.title_field``, a Beam element's ``title``
key; empty when it has none), ``{section}`` (the Markdown/rST heading path, empty when the chunk has none),
``{doc_id}``, ``{source}`` and ``{text}`` (required). ``{{`` and ``}}`` are literal braces. Nothing else is
allowed (no format specs, conversions or attribute access): a template is data from a config, never code.
"""

from __future__ import annotations

import functools
import string

from zerda_core.chunks import DocumentChunk

PLACEHOLDERS = ("title", "section", "doc_id", "source", "text")
EMBED_TEXT_KEY = "embed_text"  # the metadata.extra key (and the job's column) that holds the rendered text
TITLE_KEY = "title"  # the metadata.extra key of the document's title: a record's title field, a dict's "title" key
# What ``render`` does, by number: a template rendered another way gives other rows from the same settings,
# so the number is in every fingerprint of chunks made with a template (``identity``) and goes up with each change.
RENDERING = 2
TEMPLATE_RULE = "null or a template with {text} and no placeholder but {title}, {section}, {doc_id}, {source}"


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


def identity(template: str | None) -> dict[str, object] | None:
    """What a fingerprint holds of a template: the template and how it is rendered (None stays None, so the
    fingerprints of settings without a template do not move when the rendering does)."""
    return None if template is None else {"template": template, "rendering": RENDERING}


def render(template: str, chunk: DocumentChunk) -> str:
    """The chunk's embedding text: the template filled from the chunk and its metadata.

    Context that fills to white space only (``{section}\n\n`` before a chunk without a heading) is left out,
    so the embedder never gets blank lines for nothing; the chunk's own text is always whole.
    """
    meta = chunk.metadata
    section, title = meta.extra.get("section"), meta.extra.get(TITLE_KEY)
    values = {
        "title": title if isinstance(title, str) else "",
        "section": "" if section is None else str(section),
        "doc_id": meta.doc_id,
        "source": meta.source,
        "text": chunk.text,
    }
    parts: tuple[list[str], list[str]] = ([], [])  # what the template puts before its first {text}, and after it
    side = 0
    for literal, name in _fields(template):
        parts[side].append(literal)
        if name == "text" and side == 0:
            side = 1
        elif name is not None:
            parts[side].append(values[name])
    before, after = ("".join(p) for p in parts)
    return _context(before) + chunk.text + _context(after)


def _context(filled: str) -> str:
    return filled if filled.strip() else ""


@functools.lru_cache(maxsize=64)
def _fields(template: str) -> tuple[tuple[str, str | None], ...]:
    """The template's (literal text, placeholder name or None) pairs, parsed once per template."""
    return tuple((literal, name) for literal, name, _, _ in string.Formatter().parse(template))
