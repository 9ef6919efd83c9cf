"""A seeded, mixed-content corpus so the benchmark covers text the real corpus lacks.

The Debian docs are mostly English reStructuredText; zerda is meant for corpora that mix
English and Arabic prose with code, SQL and Markdown. This module writes such documents
deterministically (same seed, same bytes), so runs on different machines compare.
"""

from __future__ import annotations

import random
from collections.abc import Callable

EN_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an had "
    "they you were their one all we can her has there been if more when will would who so no she other its may "
    "these about them than some time only into could new first any people very after over most years what many "
    "river morning village letter window market garden winter summer journey harbour mountain teacher evening "
    "quietly slowly together almost nearly often rather perhaps although because before during without between "
    "remember understand consider describe carry follow explain gather notice wonder travel listen return "
    "library history museum season weather kitchen neighbour festival bridge forest island valley meadow"
).split()

AR_WORDS = (
    "في من إلى على عن مع هذا هذه ذلك التي الذي كان كانت قد لقد ثم بعد قبل عند حتى لكن أيضا كل بعض بين "
    "الكتاب المدرسة الطالب المعلم المدينة القرية البيت الشارع السوق الصباح المساء الليل النهار الشمس القمر "
    "البحر النهر الجبل الطريق الرحلة الحديقة الشتاء الصيف الربيع الخريف الأسرة الأصدقاء الجيران الأطفال "
    "يكتب يقرأ يذهب يعود يسافر يعمل يتعلم يفكر يتذكر يشرح يسمع ينظر يجلس يمشي يحب يعرف "
    "جميل كبير صغير طويل قصير جديد قديم سعيد هادئ بعيد قريب واسع "
    "المعلومات البيانات الحاسوب البرمجيات الشبكة النظام المستخدم الخادم التطبيق الخوارزمية "
    "الاستراتيجية المستخدمين الاجتماعية الاقتصادية التكنولوجيا المستشفيات الجامعات الحكومية"
).split()

IDENTIFIERS = (
    "user order item record batch window buffer offset token score index cache queue payload config "
    "result total count limit cursor session request response parser writer reader shard region"
).split()

SQL_TABLES = ("users", "orders", "line_items", "products", "events", "sessions", "invoices", "regions")


def _sentence(rng: random.Random, words: list[str], end_marks: str, comma: str = ",") -> str:
    """One sentence of 6-24 words, with the occasional comma, ending in one of ``end_marks``."""
    n = rng.randint(6, 24)
    picked = [rng.choice(words) for _ in range(n)]
    if n > 10 and rng.random() < 0.5:
        picked[rng.randint(3, n - 3)] += comma
    return " ".join(picked) + rng.choice(end_marks)


def english_prose(rng: random.Random, n_chars: int) -> str:
    """Paragraphs of capitalised English-like sentences: low density, large chunks expected."""
    paragraphs: list[str] = []
    size = 0
    while size < n_chars:
        sentences = [_sentence(rng, EN_WORDS, "...?!") for _ in range(rng.randint(3, 7))]
        para = " ".join(s[0].upper() + s[1:] for s in sentences)
        paragraphs.append(para)
        size += len(para) + 2
    return "\n\n".join(paragraphs)


def arabic_prose(rng: random.Random, n_chars: int) -> str:
    """Arabic paragraphs ending in '.', '؟' or '!', exercising the Arabic sentence split and long-word scoring."""
    paragraphs: list[str] = []
    size = 0
    while size < n_chars:
        para = " ".join(_sentence(rng, AR_WORDS, "...؟!", comma="،") for _ in range(rng.randint(3, 7)))
        paragraphs.append(para)
        size += len(para) + 2
    return "\n\n".join(paragraphs)


def _python_function(rng: random.Random) -> str:
    """A small, plausible Python function with a loop, a branch and a docstring."""
    name = f"{rng.choice(IDENTIFIERS)}_{rng.choice(IDENTIFIERS)}"
    args = rng.sample(IDENTIFIERS, rng.randint(1, 3))
    acc, var = rng.sample(IDENTIFIERS, 2)
    threshold = rng.randint(2, 500)
    return (
        f"def {name}({', '.join(args)}):\n"
        f'    """Return the {acc} of {args[0]} above {threshold}."""\n'
        f"    {acc} = []\n"
        f"    for {var} in {args[0]}:\n"
        f"        if {var} > {threshold} and {var} % {rng.randint(2, 9)} == 0:\n"
        f"            {acc}.append({var} * {rng.random():.3f})\n"
        f"        elif {var} is None:\n"
        f'            raise ValueError(f"missing {var} in {{{args[0]}!r}}")\n'
        f"    return {{'{acc}': {acc}, 'n': len({acc})}}\n"
    )


def python_code(rng: random.Random, n_chars: int) -> str:
    """Functions and the odd class: dense, punctuation-heavy text that should be cut small."""
    blocks: list[str] = []
    size = 0
    while size < n_chars:
        if rng.random() < 0.2:
            cls = rng.choice(IDENTIFIERS).capitalize() + rng.choice(("Store", "Client", "Parser"))
            block = f"class {cls}:\n    def __init__(self, {rng.choice(IDENTIFIERS)}: int = {rng.randint(0, 99)}):\n"
            block += f"        self._items: dict[str, int] = {{}}\n        self.limit = {rng.randint(1, 1000)}\n"
        else:
            block = _python_function(rng)
        blocks.append(block)
        size += len(block) + 1
    return "\n\n".join(blocks)


def sql(rng: random.Random, n_chars: int) -> str:
    """DDL, joins and inserts with numbers: the other dense kind zerda expects."""
    statements: list[str] = []
    size = 0
    while size < n_chars:
        a, b = rng.sample(SQL_TABLES, 2)
        col = rng.choice(IDENTIFIERS)
        kind = rng.random()
        if kind < 0.2:
            stmt = f"CREATE TABLE {a} (\n  id BIGINT PRIMARY KEY,\n  {col}_id BIGINT REFERENCES {b}(id),\n"
            stmt += "  amount DECIMAL(12, 2) NOT NULL DEFAULT 0.00,\n  created_at TIMESTAMP\n);"
        elif kind < 0.7:
            stmt = (
                f"SELECT {a}.id, COUNT(*) AS n, SUM({b}.amount) AS total\nFROM {a}\n"
                f"JOIN {b} ON {b}.{col}_id = {a}.id\nWHERE {b}.amount > {rng.uniform(0, 999):.2f}\n"
                f"GROUP BY {a}.id\nHAVING COUNT(*) >= {rng.randint(1, 50)}\n"
                f"ORDER BY total DESC\nLIMIT {rng.randint(5, 100)};"
            )
        else:
            rows = ", ".join(f"({rng.randint(1, 99999)}, {rng.uniform(0, 5000):.2f})" for _ in range(rng.randint(2, 8)))
            stmt = f"INSERT INTO {a} (id, amount) VALUES {rows};"
        statements.append(stmt)
        size += len(stmt) + 2
    return "\n\n".join(statements)


def markdown(rng: random.Random, n_chars: int) -> str:
    """Headings, lists, a table, links and fenced code: the shape of a typical README."""
    parts: list[str] = []
    size = 0
    while size < n_chars:
        title = " ".join(rng.choice(EN_WORDS) for _ in range(rng.randint(2, 5))).title()
        lines = [f"{'#' * rng.randint(1, 3)} {title}", "", english_prose(rng, rng.randint(150, 500)), ""]
        for _ in range(rng.randint(2, 5)):
            link = f"[{rng.choice(IDENTIFIERS)}](https://example.org/{rng.choice(IDENTIFIERS)})"
            lines.append(f"- {_sentence(rng, EN_WORDS, '.')} See {link}.")
        if rng.random() < 0.4:
            lines += ["", "| name | value | unit |", "| --- | ---: | --- |"]
            rows = rng.randint(2, 6)
            lines += [f"| {rng.choice(IDENTIFIERS)} | {rng.uniform(0, 100):.1f} | ms |" for _ in range(rows)]
        if rng.random() < 0.4:
            lines += ["", "```python", _python_function(rng).rstrip(), "```"]
        part = "\n".join(lines)
        parts.append(part)
        size += len(part) + 2
    return "\n\n".join(parts)


Section = Callable[[random.Random, int], str]
SECTIONS: dict[str, Section] = {
    "english": english_prose,
    "arabic": arabic_prose,
    "python": python_code,
    "sql": sql,
    "markdown": markdown,
}

# Each document leans on one kind of content but mixes in others, as real corpora do.
PROFILES: dict[str, dict[str, float]] = {
    "prose-en": {"english": 0.8, "markdown": 0.1, "python": 0.1},
    "prose-ar": {"arabic": 0.75, "english": 0.15, "markdown": 0.1},
    "code": {"python": 0.6, "markdown": 0.25, "english": 0.15},
    "sql": {"sql": 0.6, "english": 0.2, "markdown": 0.2},
    "mixed": {"english": 0.3, "arabic": 0.2, "python": 0.2, "sql": 0.15, "markdown": 0.15},
}


def document(rng: random.Random, n_chars: int) -> str:
    """One document of about ``n_chars`` characters, built from sections drawn from one profile."""
    profile = PROFILES[rng.choice(sorted(PROFILES))]
    kinds, weights = zip(*sorted(profile.items()), strict=True)
    sections: list[str] = []
    size = 0
    while size < n_chars:
        kind = rng.choices(kinds, weights)[0]
        section = SECTIONS[kind](rng, min(rng.randint(300, 6000), n_chars - size + 300))
        sections.append(section)
        size += len(section) + 2
    return "\n\n".join(sections)


def generate(total_bytes: int, seed: int = 20240601) -> list[str]:
    """Documents of log-uniform size (1 KB to 256 KB) until ``total_bytes`` of UTF-8 are written."""
    rng = random.Random(seed)
    docs: list[str] = []
    written = 0
    while written < total_bytes:
        n_chars = int(2 ** rng.uniform(10, 18))
        doc = document(rng, n_chars)
        docs.append(doc)
        written += len(doc.encode("utf-8"))
    return docs
