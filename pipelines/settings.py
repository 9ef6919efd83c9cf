"""Run settings: one reviewed YAML file, validated in full before the pipeline starts.

Every key is optional and has a default; an unknown key, a wrong type or an impossible
value is a :class:`SettingsError` naming the key, so a typo in a scheduled job's config
stops the launch instead of silently running with defaults. ``python -m pipelines.settings
CONFIG...`` checks config files (exit code 2 on the first bad one) and
``--reference`` prints the settings table of docs/settings.md.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import fsspec
import yaml

import zerda_core
from pipelines.embed_text import TEMPLATE_RULE, template_problem
from pipelines.embed_text import identity as embed_text_identity
from pipelines.errors import SettingsError
from pipelines.output.layout import BUCKET_WIDTHS, is_bucket_width
from pipelines.terminal_table import visible
from zerda_core.chunks import AdaptiveChunker, adaptive_chunker
from zerda_core.chunks.config import DENSITY_SCOPES, MAX_SIZE, SIZE_UNITS, ChunkConfig, is_size


class _Rule(NamedTuple):
    """What a key accepts: its type name (for the reference), a check and the words for errors."""

    type: str
    check: Callable[[Any], bool]
    expected: str


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _one_of(*choices: str) -> _Rule:
    return _Rule("str", lambda v: v in choices, "one of " + ", ".join(repr(c) for c in choices))


POSITIVE_INT = _Rule("int", lambda v: _is_int(v) and v > 0, "a positive integer")
NON_NEGATIVE_INT = _Rule("int", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
SIZE = _Rule("int", lambda v: is_size(v, 1), f"an integer in [1, {MAX_SIZE}]")  # the library's rule for sizes
LENGTH = _Rule("int", lambda v: is_size(v, 0), f"an integer in [0, {MAX_SIZE}]")
UNIT_INTERVAL = _Rule("float", lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]")
BUCKET_WIDTH = _Rule("float", is_bucket_width, BUCKET_WIDTHS)
NAME = _Rule("str", lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string")
OPTIONAL_NAME = _Rule("str", lambda v: v is None or NAME.check(v), "a non-empty string or null")
BOOL = _Rule("bool", lambda v: isinstance(v, bool), "true or false")
CORPUS_FORMATS = ("jsonl", "text", "parquet")
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".xz")  # a file's last suffix; its format is the one before
SUFFIX_FORMATS = _Rule(
    "map",
    lambda v: isinstance(v, dict) and all(isinstance(k, str) and f in CORPUS_FORMATS for k, f in v.items()),
    "a mapping of single file suffixes ('.log', no compression suffix) to "
    + ", ".join(repr(f) for f in CORPUS_FORMATS),
)
OPTIONAL_FORMAT = _Rule(
    "str", lambda v: v is None or v in CORPUS_FORMATS, "null or one of " + ", ".join(repr(f) for f in CORPUS_FORMATS)
)
_SUFFIX = re.compile(r"\.[^\s./\\]+")  # one dot, then no dot, separator or space: what split_suffixes can find
PARQUET_COMPRESSIONS = ("zstd", "snappy", "gzip", "brotli", "lz4", "none")
CATALOG_PROPERTIES = _Rule(
    "map",
    lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(p, (str, int, bool)) for k, p in v.items()),
    "a mapping of pyiceberg catalog property names to strings",
)


def _setting(default: Any, rule: _Rule, description: str) -> Any:
    metadata = {"rule": rule, "description": description}
    if isinstance(default, dict):  # a mutable default: each settings object gets its own copy
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


class _Section:
    """Shared validation of one YAML section; subclasses are frozen dataclasses."""

    SECTION: ClassVar[str]

    def __post_init__(self) -> None:
        problems = [
            f"{self.SECTION}.{f.name} must be {f.metadata['rule'].expected}, got {_describe(getattr(self, f.name))}"
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if not f.metadata["rule"].check(getattr(self, f.name))
        ]
        problems += self._cross_checks()
        if problems:
            raise SettingsError("\n".join(problems))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.metadata["rule"].type == "float":  # 1 and 1.0 must give the same fingerprint
                object.__setattr__(self, f.name, float(getattr(self, f.name)))

    def _cross_checks(self) -> list[str]:
        """Rules between keys; each guards its own types, as it runs even when a key is wrong."""
        return []


_LIBRARY = ChunkConfig()  # the library's defaults are the YAML's


@dataclass(frozen=True)
class ChunkingSettings(_Section):
    """How documents are cut; the sizes become zerda_core's ``ChunkConfig``."""

    SECTION: ClassVar[str] = "chunking"
    base_size: int = _setting(_LIBRARY.base_size, SIZE, "Target chunk size (in `size_unit`) at neutral density.")
    min_size: int = _setting(_LIBRARY.min_size, SIZE, "Target size for the densest text (density 1).")
    max_size: int = _setting(_LIBRARY.max_size, SIZE, "Target size for the most narrative text (density 0).")
    overlap: int = _setting(_LIBRARY.overlap, LENGTH, "Characters (or tokens) carried from one chunk into the next.")
    technical_threshold: float = _setting(
        _LIBRARY.technical_threshold,
        UNIT_INTERVAL,
        "Kept as in the reference API; density is continuous, so it does not move the cuts.",
    )
    min_chunk_size: int = _setting(
        _LIBRARY.min_chunk_size,
        LENGTH,
        "Documents shorter than this (in characters) are rejected; shorter tails join the chunk before.",
    )
    language: str = _setting("auto", NAME, "Language stored with each chunk; `auto` resolves it per document.")
    density_scope: str = _setting(
        _LIBRARY.density_scope,
        _one_of(*DENSITY_SCOPES),
        "`document`: one density and target per document; `section`: the paragraphs around each chunk set its target.",
    )
    size_unit: str = _setting(
        _LIBRARY.size_unit,
        _one_of(*SIZE_UNITS),
        "Unit of base/min/max size and overlap; `tokens` counts `tokenizer`'s tokens, a hard bound per chunk.",
    )
    tokenizer: str | None = _setting(
        _LIBRARY.tokenizer,
        OPTIONAL_NAME,
        "With `size_unit: tokens`: a `tokenizer.json` path, or `package:NAME/PATH` for one a package ships.",
    )

    def _cross_checks(self) -> list[str]:
        """The library's own size rule (``ChunkConfig``), once every key has the right type."""
        if any(not f.metadata["rule"].check(getattr(self, f.name)) for f in dataclasses.fields(self)):
            return []
        try:
            self.chunk_config()
        except ValueError as err:
            return [f"chunking: {err}"]
        return []

    def chunk_config(self) -> ChunkConfig:
        """The library's chunking config for these settings."""
        return ChunkConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(ChunkConfig)})

    def chunker(self) -> AdaptiveChunker:
        """The chunker these settings describe (logs the library's warning when ``min_size > max_size``)."""
        return AdaptiveChunker(self.chunk_config(), language=self.language)

    def identity(self) -> dict[str, Any]:
        """What the chunks depend on: every key, and the tokenizer file's SHA-256 (a path alone may change)."""
        values = dataclasses.asdict(self)
        counter = self.chunk_config().token_counter()
        if counter is not None:
            values["tokenizer_sha256"] = counter.digest
        return values


def as_chunking_settings(chunking: ChunkingSettings | ChunkConfig | None) -> ChunkingSettings:
    """The chunking settings given as the YAML section or as the library's ``ChunkConfig`` (``None``: defaults).

    ``ChunkConfig`` and this section share their names; ``language`` is not part of ``ChunkConfig``
    (``AdaptiveChunker`` takes it apart), so it is ``auto``, as for ``AdaptiveChunker(config)``; a fixed
    language needs ``ChunkingSettings``.
    """
    if chunking is None:
        return ChunkingSettings()
    if isinstance(chunking, ChunkingSettings):
        return chunking
    if isinstance(chunking, ChunkConfig):
        return ChunkingSettings(**dataclasses.asdict(chunking))
    raise TypeError(f"chunking must be a ChunkingSettings or a zerda_core ChunkConfig, got {type(chunking).__name__}")


@dataclass(frozen=True)
class InputSettings(_Section):
    """How corpus files are read (see ``pipelines.input.formats``)."""

    SECTION: ClassVar[str] = "input"
    text_field: str = _setting("text", NAME, "JSONL field / Parquet column holding the document text.")
    id_field: str = _setting("id", NAME, "JSONL field / Parquet column holding the document id (optional).")
    title_field: str | None = _setting(
        None,
        OPTIONAL_NAME,
        "JSONL field / Parquet column holding the document title, for `output.embed_text`'s `{title}`; null: none."
        " A string value is the title (cut to 200 characters), anything else none.",
    )
    encoding_errors: str = _setting(
        "strict",
        _one_of("strict", "replace"),
        "Invalid UTF-8 or a lone surrogate in what zerda reads (text, id): `strict` rejects the record,"
        " `replace` turns it into U+FFFD; other fields may hold anything.",
    )
    max_document_chars: int = _setting(50_000_000, POSITIVE_INT, "Longer documents are rejected as `too_large`.")
    max_file_bytes: int = _setting(
        10_000_000_000,
        POSITIVE_INT,
        "Bytes a compressed file may decompress to (a Parquet file is spooled to temp disk); past it, "
        "the rest of the file is a `too_large` reject, the records before it kept.",
    )
    split_bytes: int = _setting(
        64 << 20,
        POSITIVE_INT,
        "Uncompressed JSONL (by lines) and Parquet (by row groups) files larger than this are read in parts of"
        " about this size by several workers; a compressed file this large has its documents spread across them.",
    )
    formats: Mapping[str, str] = _setting(
        {}, SUFFIX_FORMATS, "Other file suffixes read as a known format, e.g. `{.html: text}`; others are `not_text`."
    )
    default_format: str | None = _setting(
        None,
        OPTIONAL_FORMAT,
        "Format of a file whose suffix is neither known nor in `formats`, or that has none (`README`, `NEWS.gz`,"
        " `changelog.Debian.gz`); null: such a file is a `not_text` reject.",
    )
    max_reject_rows: int = _setting(
        1000,
        POSITIVE_INT,
        "Reject rows kept per reason for each file part read (a file is one part unless split by `split_bytes`);"
        " past it one summary row per reason carries the count of the rest, so the manifest counts every record.",
    )

    def _cross_checks(self) -> list[str]:
        """One field for both text and id; each ``formats`` key that could never match a file, and keys
        that name one suffix twice (suffixes match in any case: ``.log`` and ``.LOG``, which would win?)."""
        problems = []
        if self.text_field == self.id_field:
            problems.append(
                f"input.text_field and input.id_field are both {self.text_field!r}: every id would be its whole text"
            )
        if self.title_field in (self.text_field, self.id_field):
            problems.append(f"input.title_field is {self.title_field!r}, a field read as the text or the id")
        if not SUFFIX_FORMATS.check(self.formats):
            return problems
        problems += [
            f"input.formats key {key!r} can never match a file: a key is one suffix such as '.log' (a dot, no"
            " other dot, no space, not a compression suffix); a compressed file is matched by the suffix before"
            " its compression suffix, so '.log' also reads app.log.gz"
            for key in self.formats
            if not _SUFFIX.fullmatch(key) or key.lower() in COMPRESSION_SUFFIXES
        ]
        spellings: dict[str, list[str]] = {}
        for key in self.formats:
            spellings.setdefault(key.lower(), []).append(key)
        problems += [
            f"input.formats keys {', '.join(map(repr, keys))} are one suffix (suffixes match in any case): keep one"
            for keys in spellings.values()
            if len(keys) > 1
        ]
        return problems


@dataclass(frozen=True)
class OutputSettings(_Section):
    """How the chunk dataset is written."""

    SECTION: ClassVar[str] = "output"
    bucket_width: float = _setting(0.1, BUCKET_WIDTH, "Width of a density bucket: 0.1 gives density_bucket=0..9.")
    compression: str = _setting("zstd", _one_of(*PARQUET_COMPRESSIONS), "Parquet compression codec.")
    max_rows_per_file: int = _setting(100_000, POSITIVE_INT, "Rows at most in one Parquet file.")
    incremental: bool = _setting(
        False, BOOL, "Like `--incremental`: unchanged documents keep their rows from the previous output."
    )
    embed_text: str | None = _setting(
        None,
        _Rule("str", lambda v: v is None or isinstance(v, str), TEMPLATE_RULE),
        'Fills the `embed_text` column, e.g. `"{section}\\n\\n{text}"`; null: the column is null.',
    )
    table: str | None = _setting(
        None,
        OPTIONAL_NAME,
        "`NAMESPACE.TABLE`: write an Apache Iceberg table, like `--output iceberg://NAMESPACE.TABLE`"
        " (docs/iceberg.md); null: `--output` says where.",
    )
    catalog: Mapping[str, str] = _setting(
        {},
        CATALOG_PROPERTIES,
        "The Iceberg catalog: pyiceberg catalog properties (`name`, `type`, `uri`, `warehouse`, ...);"
        " `{}`: an SQLite catalog and warehouse in `out/warehouse`.",
    )

    def _cross_checks(self) -> list[str]:
        if not isinstance(self.embed_text, str):
            return []  # null, or a wrong type the rule already reported
        problem = template_problem(self.embed_text)
        return [] if problem is None else [f"output.embed_text {problem}"]


@dataclass(frozen=True)
class EnrichSettings(_Section):
    """Optional metadata added to each chunk."""

    SECTION: ClassVar[str] = "enrich"
    keywords: bool = _setting(False, BOOL, "Add a `keywords` column (MetadataEnricher).")
    top_k: int = _setting(5, POSITIVE_INT, "Keywords kept per chunk.")


SECTIONS: dict[str, type] = {
    "chunking": ChunkingSettings,
    "input": InputSettings,
    "output": OutputSettings,
    "enrich": EnrichSettings,
}


@dataclass(frozen=True)
class Settings:
    """All run settings: frozen, and a plain dict (``to_dict``) for Beam workers and the manifest."""

    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    input: InputSettings = field(default_factory=InputSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    enrich: EnrichSettings = field(default_factory=EnrichSettings)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Settings:
        """Build and validate settings from nested mappings; every problem is reported at once."""
        data = {} if data is None else data
        if not isinstance(data, Mapping):
            raise SettingsError(f"settings must be a mapping of sections, got {_describe(data)}")
        problems = _unknown(data, SECTIONS, "section")
        sections: dict[str, Any] = {}
        for name, section_cls in SECTIONS.items():
            values = {} if data.get(name) is None else data[name]
            if not isinstance(values, Mapping):
                problems.append(f"{name} must be a mapping of keys, got {_describe(values)}")
                continue
            known = {f.name: f for f in dataclasses.fields(section_cls)}
            problems += _unknown(values, known, f"key in {name}")
            try:
                sections[name] = section_cls(**{k: v for k, v in values.items() if k in known})
            except SettingsError as err:
                problems.append(str(err))
        if problems:
            raise SettingsError("\n".join(problems))
        return cls(**sections)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict of every setting (defaults included): JSON-able and picklable."""
        return dataclasses.asdict(self)

    @property
    def fingerprint(self) -> str:
        """Short hash of the run's settings and the zerda and density versions, the manifest's ``fingerprint``: an
        incremental run carries rows only from an output of an equal one.
        Each chunk's own is :attr:`config_fingerprint`.

        ``output.incremental``, ``input.split_bytes`` and where the rows go (``output.table``,
        ``output.catalog``) are left out: they change how the rows are made or where they are kept, not the rows.
        """
        settings = self.to_dict()
        for key in ("incremental", "table", "catalog"):
            del settings["output"][key]
        settings["chunking"] = self.chunking.identity()
        settings["output"]["embed_text"] = embed_text_identity(self.output.embed_text)
        del settings["input"]["split_bytes"]
        if self.input.title_field is None:  # unset, as before the setting existed: an output's fingerprint stays
            del settings["input"]["title_field"]
        return _fingerprint(settings)

    @property
    def config_fingerprint(self) -> str:
        """The ``config_fingerprint`` of the chunks these settings make (:func:`config_fingerprint`)."""
        return config_fingerprint(self.chunking, self.output.embed_text)


def config_fingerprint(chunking: ChunkingSettings, embed_text: str | None = None) -> str:
    """A chunk's ``config_fingerprint``, one meaning wherever a chunk is made (the job's rows and index,
    ``ZerdaChunker``'s metadata): a short hash of what cuts a document and renders its chunks' text, the
    chunking settings and the ``embed_text`` template, with the zerda and density versions. Equal fingerprints, equal
    chunks of equal documents; how files are read and written (``input``, the output's layout) is not in it."""
    return _fingerprint({"chunking": chunking.identity(), "embed_text": embed_text_identity(embed_text)})


def _fingerprint(settings: Mapping[str, Any]) -> str:
    versioned = {"settings": settings, "zerda": zerda_core.__version__, "density": adaptive_chunker.DENSITY_VERSION}
    canonical = json.dumps(versioned, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _unknown(values: Mapping[Any, Any], known: Mapping[str, Any], what: str) -> list[str]:
    problems = []
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"
            problems.append(f"unknown {what}: {key!r}{hint}")
    return problems


MAX_CONFIG_BYTES = 1_000_000  # a reviewed settings file is a few hundred bytes
MAX_INT_DIGITS = 30  # no setting needs more; Python would spend quadratic time on thousands of digits


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader, stricter: no aliases (so no "billion laughs" expansion), no duplicate key,
    no integer longer than ``MAX_INT_DIGITS`` digits; each refusal is a YAMLError with the line."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "aliases (*name) are not allowed in a config", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # else: "could not determine a constructor for the tag"
                raise yaml.constructor.ConstructorError(
                    None, None, "merge keys (<<) are not allowed in a config: write the keys out", key_node.start_mark
                )
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # an unhashable key is PyYAML's own error below
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {str(key)[:80]!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if sum(c.isdigit() for c in str(node.value)) > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"integer longer than {MAX_INT_DIGITS} digits", node.start_mark
            )
        return super().construct_yaml_int(node)

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as err:  # a February 30 matches the timestamp pattern, then datetime refuses it
            raise yaml.constructor.ConstructorError(None, None, f"impossible date: {err}", node.start_mark) from err


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _ConfigLoader.construct_yaml_int)
_ConfigLoader.add_constructor("tag:yaml.org,2002:timestamp", _ConfigLoader.construct_yaml_timestamp)


_MAX_SIMPLE_KEY = 1024  # YAML's limit on an implicit key's length: past it, its ':' is read as a value's


def _parse_config(raw: bytes, path: str | Path) -> Any:
    """The YAML document in ``raw``; SettingsError in one line for anything that is not a plain, small config."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise SettingsError(
            f"config {path} is {len(raw):,} bytes, more than a settings file needs ({MAX_CONFIG_BYTES:,})"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SettingsError(f"config {path} is not UTF-8 text (byte {err.start}): is it the right file?") from err
    try:
        return yaml.load(text, Loader=_ConfigLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = str(getattr(err, "problem", None) or str(err))[:200]
        if problem == "mapping values are not allowed here" and mark is not None and mark.column >= _MAX_SIMPLE_KEY:
            problem += f" (a key longer than {_MAX_SIMPLE_KEY} characters? YAML allows no longer one)"
        raise SettingsError(f"config {path} is not valid YAML{where}: {problem}") from err


def load_settings(path: str | Path | None = None) -> Settings:
    """Read and validate a YAML config (any fsspec URL); ``None`` gives the defaults.

    Only a safe loader: a config is data, never code (``!!python/...`` tags are refused), and never
    big (no aliases, no huge integers, a size cap), so a hostile file costs no time or memory.
    """
    if path is None:
        return Settings()
    try:
        with fsspec.open(str(path), "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise SettingsError(f"cannot read config {path}: {err.strerror or err}") from err
    data = _parse_config(raw, path)
    if data is not None and not isinstance(data, Mapping):
        raise SettingsError(
            f"config {path} must be a mapping of sections (chunking:, input:, ...), got {_describe(data)[:80]}"
        )
    try:
        return Settings.from_dict(data)
    except SettingsError as err:
        raise SettingsError(f"config {path}:\n{err}") from err


class SettingDoc(NamedTuple):
    """One row of the settings reference."""

    key: str
    type: str
    default: Any
    allowed: str
    description: str


def settings_reference() -> list[SettingDoc]:
    """Every key with its type, default, allowed values and meaning, in file order."""
    return [
        SettingDoc(
            f"{section}.{f.name}",
            f.metadata["rule"].type,
            f.default_factory() if f.default is dataclasses.MISSING else f.default,  # type: ignore[operator]
            f.metadata["rule"].expected,
            f.metadata["description"],
        )
        for section, section_cls in SECTIONS.items()
        for f in dataclasses.fields(section_cls)
    ]


def settings_reference_markdown() -> str:
    """The settings reference as a Markdown table (docs/settings.md's table is checked against it)."""
    rows = ["| key | type | default | allowed | description |", "| --- | --- | --- | --- | --- |"]
    rows += [
        f"| `{d.key}` | {d.type} | `{json.dumps(d.default)}` | {d.allowed} | {d.description} |"
        for d in settings_reference()
    ]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Check config files (exit 2 on a bad one) or print the reference with ``--reference``."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--reference"]:
        print(settings_reference_markdown(), end="")
        return 0
    if not args:
        print("usage: python -m pipelines.settings CONFIG.yaml... | --reference", file=sys.stderr)
        return 2
    for path in args:
        try:
            settings = load_settings(path)
            print(visible(f"{path}: ok, fingerprint {settings.fingerprint}"))
            warning = settings.chunking.chunk_config().size_warning()
            if warning is not None:
                print(visible(f"{path}: warning: {warning}"), file=sys.stderr)
        except SettingsError as err:
            print(visible(f"error: {err}"), file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
