"""Credentials out of what zerda prints, logs and stores, and untrusted text kept short in messages.

One place for the rules, used by the reader (sources, ids, reject messages), the manifest, the CLI's
error lines and every log record (:func:`install`, in the launcher and in worker processes):

- a URL loses its ``user:password@`` part, in any scheme (``s3://key:secret@bucket``, ``https``,
  ``scheme:///user:secret@`` as fsspec spells some);
- a field whose name says it holds a credential loses its value, in every spelling a message, a log or
  a stored file gives it: a signed URL's query (``?sig=``, ``&X-Amz-Signature=``, ``&X-Goog-Credential=``,
  ``?access_token=``, ``?api_key=``; in a query any ``…key=`` and ``auth=`` too), an option
  (``--s3_secret_access_key=``), a dict or JSON key (Beam's ``Pipeline_options`` line, botocore's
  headers, escaped again when a worker's line is relayed), a connection string (``;AccountKey=``) and a
  ``Bearer`` token (:func:`is_secret_name` says which names);
- the password of every URL zerda was given, and its user when as long as an access key id, the values of
  secret query fields and of secret options on the command line (:func:`remember_credentials`,
  :func:`remember_arguments`; shorter values would blank ordinary words), and the values of the storage
  credentials in the environment (AWS, Azure) are replaced wherever they appear: a library may echo
  ``key:secret@bucket`` as a bucket name, argparse and Beam echo option values in their messages.

Every pattern runs in linear time on untrusted text: each starts with a literal or at a word start, its
repeats are possessive (no backtracking) over classes that stop at the next delimiter, so a 200,000-character
column name costs one pass, not minutes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Iterator
from types import TracebackType
from typing import Any
from urllib.parse import unquote

MESSAGE_CHARS = 300
ELLIPSIS = "…"
SECRET_ENVIRONMENT = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
)
_HIDDEN = "***"
_MIN_SECRET_CHARS = 8  # shorter "secrets" (a user called "zerda") would blank ordinary words
_MIN_USER_CHARS = 16  # a URL's user is a name unless it is as long as an access key id (20)
_USERINFO = re.compile(r"(:/{2,}+)[^/@\s]*+@")
# A name (an option's leading dashes included) at a word start and its separator (``=``, ``:``, quoted as a
# dict's repr quotes it, escaped again in a relayed line); a quoted value runs to its closing quote (a secret
# key holds ``/`` and ``+``), a query's to the next ``&`` (or ``;``, ``#``, a space), another to the next
# delimiter, ``/`` among them (``Credential=AKIA…/date/…``, a folder ``token=x/`` in a path). A name that is
# no secret's consumes no value: a field may start inside it (``https://host/?sig=``).
_FIELD = re.compile(r"(?<![\w.-])(-{0,2}+[A-Za-z][\w.-]*+)((?:\\?['\"])?\s{0,3}[:=]\s{0,3}(?:b?\\?['\"])?)")
_VALUE = re.compile(r"[^\s'\"\\,;&#}<>/]++")
_QUOTED_VALUE = re.compile(r"[^'\"\\\n]++")
_QUERY_VALUE = re.compile(r"[^\s'\"\\,;&#}<>]++")
_BEARER = re.compile(r"(Bearer\s{1,3})[\w.~+/=-]++")
_QUERY_DELIMITERS = "?&;"  # a name after one of these is a query's or a connection string's
# Flattened names (lower case, letters and digits) ending so are credentials wherever they appear ...
_SECRET_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "signature",
    "credential",
    "credentials",
    "apikey",
    "accesskey",
    "accesskeyid",
    "secretkey",
    "accountkey",
    "privatekey",
    "sharedkey",
    "connectionstring",
    "authorization",
)
# ... and in a query any key (Google's ``?key=``, Azure's ``subscription-key``), ``auth`` and Azure's ``sig``
# (elsewhere these are ordinary names: a folder ``sig=1/`` in a path).
_QUERY_SECRET_ENDINGS = (*_SECRET_ENDINGS, "key", "auth", "sig")
_SECRET_PARTS = ("secret", "password")  # anywhere in the name: ``client_secret_value``
_remembered: set[str] = set()


def redact_url(text: str) -> str:
    """The URL, or every URL and known secret in a message, without credentials."""
    text = _hide_secret_fields(_BEARER.sub(rf"\1{_HIDDEN}", _USERINFO.sub(r"\1", text)))
    for secret in _secrets():
        text = text.replace(secret, _HIDDEN)
    return text


def is_secret_name(name: str, in_query: bool = False) -> bool:
    """Whether a field, option or query parameter of this name holds a credential."""
    flat = "".join(c for c in name.lower() if c.isalnum())
    endings = _QUERY_SECRET_ENDINGS if in_query else _SECRET_ENDINGS
    return flat.endswith(endings) or any(part in flat for part in _SECRET_PARTS)


def _secret_fields(text: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of each secret field's value in ``text``, in order, none inside another."""
    after = 0
    for found in _FIELD.finditer(text):
        start = found.start()
        in_query = start > 0 and text[start - 1] in _QUERY_DELIMITERS
        if start >= after and is_secret_name(found.group(1), in_query):
            quoted = found.group(2).endswith(("'", '"'))
            value = (_QUOTED_VALUE if quoted else _QUERY_VALUE if in_query else _VALUE).match(text, found.end())
            if value is not None:
                after = value.end()
                yield found.end(), after


def _hide_secret_fields(text: str) -> str:
    parts, kept = [], 0
    for start, end in _secret_fields(text):
        parts += [text[kept:start], _HIDDEN]
        kept = end
    return "".join([*parts, text[kept:]])


def remember_credentials(url: str) -> None:
    """Keep the user and password of ``url`` and the values of its secret query fields (if it has them) to
    scrub them from every later message, whatever shape a library gives them."""
    found = re.match(r"[^:/]*+:/{2,}+([^/@\s]*+)@", url)
    if found:
        userinfo = found.group(1)
        user, _, password = userinfo.partition(":")
        _remember(userinfo, password)
        if len(user) >= _MIN_USER_CHARS:
            _remembered.add(user)
    for start, end in _secret_fields(url):
        _remember(url[start:end], unquote(url[start:end]))


def remember_arguments(argv: list[str]) -> None:
    """Keep the credentials the command line holds: in its URLs, and the values of options named as secrets
    (``--s3_secret_access_key X``, ``--azure_connection_string=…``), before anything parses and echoes them."""
    for index, argument in enumerate(argv):
        remember_credentials(argument)
        name, equals, value = argument.partition("=")
        following = argv[index + 1] if index + 1 < len(argv) else "-"
        if name.startswith("-") and is_secret_name(name):
            _remember(value if equals else "" if following.startswith("-") else following)  # not the next option


def _remember(*secrets: str) -> None:
    _remembered.update(s for s in secrets if len(s) >= _MIN_SECRET_CHARS)


_held = threading.local()  # the environment's credentials, read once by :func:`environment_held` on this thread


@contextlib.contextmanager
def environment_held() -> Iterator[None]:
    """Within, :func:`redact_url` on this thread reads the environment's credentials once, on entry, not at each
    call: a launch redacts the path of every file it lists, and the lookups were most of a listing's time.
    Credentials remembered meanwhile count at once; other threads (a pipeline's) read the environment as ever."""
    outer = getattr(_held, "environment", None)
    _held.environment = _environment_secrets()
    try:
        yield
    finally:
        _held.environment = outer


def _environment_secrets() -> set[str]:
    return {os.environ.get(name, "") for name in SECRET_ENVIRONMENT}


def _secrets() -> list[str]:
    """Remembered credentials and the environment's, longest first (a secret may hold another)."""
    held = getattr(_held, "environment", None)
    values = (_environment_secrets() if held is None else held) | _remembered
    return sorted((v for v in values if len(v) >= _MIN_SECRET_CHARS), key=len, reverse=True)


def bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis: messages echo untrusted names and values."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def redact_record(record: logging.LogRecord) -> None:
    """Redact a log record in place: its message and the traceback it carries."""
    try:
        message = record.getMessage()
    except Exception:  # a broken record: leave it to the handler's own error report
        return
    redacted = redact_url(message)
    if redacted != message:
        record.msg, record.args = redacted, None
    if record.exc_info and not record.exc_text:
        record.exc_text = redact_url(logging.Formatter().formatException(record.exc_info))


class RedactCredentials(logging.Filter):
    """A handler filter applying :func:`redact_record` (with --verbose, fsspec logs each URL it opens)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def install() -> None:
    """Redact every log record this process creates, whatever handler prints or ships it, and the
    traceback of an uncaught error.

    A record factory, not a handler filter: Beam's worker processes log through handlers of their
    own (to stderr and to the runner), set up before any zerda code runs there. Idempotent.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "zerda_redacts", False):
        return
    sys.excepthook = _redacted_excepthook

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        redact_record(record)
        return record

    factory.zerda_redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def _redacted_excepthook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
    """Python's report of an uncaught error, redacted: error messages quote URLs and bucket names."""
    sys.stderr.write(redact_url("".join(traceback.format_exception(kind, error, trace))))
