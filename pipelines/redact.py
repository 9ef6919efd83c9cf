"""Credentials out of what zerda prints, logs and stores, and untrusted text kept short in messages.

One place for the rules, used by the reader (sources, reject messages), the manifest, the CLI's
error line and every log record (:func:`install`, in the launcher and in worker processes):

- a URL loses its ``user:password@`` part, in any scheme (``s3://key:secret@bucket``, ``https``,
  ``scheme:///user:secret@`` as fsspec spells some);
- the password of every URL zerda was given, and its user when as long as an access key id
  (:func:`remember_credentials`; shorter values would blank ordinary words), and the values
  of the storage credentials in the environment (AWS, Azure) are replaced wherever they appear:
  a library may echo ``key:secret@bucket`` as a bucket name, and botocore's debug log prints
  access key ids and session tokens;
- signed-request fields (``Credential=``, ``Signature=``, security tokens) lose their values.

Every pattern runs in linear time on untrusted text: each starts with a literal, its repeats are
possessive (no backtracking) over classes that stop at the next delimiter, so a 200,000-character
column name costs one pass, not minutes.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import traceback
from types import TracebackType
from typing import Any

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
_SIGNED_FIELDS = re.compile(
    r"((?:Credential|Signature|(?i:security[-_]token|session[-_]token|secret[-_]access[-_]key))"
    r"['\"]?\s{0,3}[:=]\s{0,3}b?['\"]?)[^'\"\s,;}&/]++"
)
_remembered: set[str] = set()


def redact_url(text: str) -> str:
    """The URL, or every URL and known secret in a message, without credentials."""
    text = _SIGNED_FIELDS.sub(rf"\1{_HIDDEN}", _USERINFO.sub(r"\1", text))
    for secret in _secrets():
        text = text.replace(secret, _HIDDEN)
    return text


def remember_credentials(url: str) -> None:
    """Keep the user and password of ``url`` (if it has them) to scrub them from every later message."""
    found = re.match(r"[^:/]*+:/{2,}+([^/@\s]*+)@", url)
    if found:
        userinfo = found.group(1)
        user, _, password = userinfo.partition(":")
        _remembered.update(s for s in (userinfo, password) if len(s) >= _MIN_SECRET_CHARS)
        if len(user) >= _MIN_USER_CHARS:
            _remembered.add(user)


def _secrets() -> list[str]:
    """Remembered credentials and the environment's, longest first (a secret may hold another)."""
    values = {os.environ.get(name, "") for name in SECRET_ENVIRONMENT} | _remembered
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
