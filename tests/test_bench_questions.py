"""The retrieval benchmark's gold spans: section bodies found in rST and HTML, headings kept out of them."""

from benchmarks.questions import Doc, candidate_questions, html_document, rst_sections

BODY = "Words about the topic that go on for a while. " * 8  # 368 characters

RST = f"""=========
The title
=========

Intro text.

Install from source
-------------------

{BODY}

.. note:: still the same section

Tables and *more*
~~~~~~~~~~~~~~~~~

Short.
"""


def test_rst_sections_span_each_body_without_its_heading() -> None:
    sections = rst_sections(RST)
    assert [s.title for s in sections] == ["The title", "Install from source", "Tables and more"]
    install = sections[1]
    body = RST[install.body_start : install.body_end]
    assert body.startswith("Words about") and body.endswith("still the same section")
    assert "Install from source" not in body and "---" not in body
    assert RST[install.heading_start :].startswith("Install from source\n")
    assert sections[0].heading_start == 0  # the overline belongs to the heading


def test_html_sections_match_the_extracted_text() -> None:
    html = (
        "<html><head><title>x</title></head><body><h1>Chapter 6. APT Tools</h1><p>Lead.</p>"
        f"<h2>6.1.\xa0Filling in the <code>sources.list</code> File</h2><p>{BODY}</p><pre>deb http://x stable</pre>"
        "<h3>6.1.1. Syntax</h3><p>End.</p></body></html>"
    )
    text, sections = html_document(html)
    assert [s.title for s in sections] == ["APT Tools", "Filling in the sources.list File", "Syntax"]
    second = sections[1]
    assert text[second.heading_start : second.body_start] == "6.1. Filling in the sources.list File\n\n"
    assert text[second.body_start : second.body_end] == BODY.strip() + "\n\ndeb http://x stable"
    assert "\x02" not in text and "\x03" not in text


def test_questions_follow_the_rules() -> None:
    leaky = f"Leaky heading\n=============\n\n{BODY} The leaky heading is named here.\n"
    short = "Short section\n=============\n\nToo short.\n"
    dup = f"Install from source\n===================\n\n{BODY}\n"
    docs = [Doc(name, text, rst_sections(text)) for name, text in (("a", RST), ("b", leaky + short), ("c", dup))]
    assert candidate_questions(docs) == []  # duplicated, stub, one word, query inside its gold span
    docs = [Doc("a", RST, rst_sections(RST))]
    (question,) = candidate_questions(docs)
    assert question.query == "Install from source"
    assert RST[question.start : question.end].startswith("Words about")
