"""Credentials out of what zerda prints, logs and stores: URLs lose their ``user:password@`` part.

One place for the rule, used by the reader (sources, reject messages), the manifest, the CLI's
error line and :class:`RedactCredentials`, the logging filter the launcher installs on its handlers.
"""

from __future__ import annotations

import logging
import re

_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://+)[^/@\s]*@")


def redact_url(text: str) -> str:
    """The URL, or every URL in a message, without credentials (``scheme://user:secret@host/...``).

    ``scheme:///user:secret@`` too: fsspec's error messages spell some URLs that way.
    """
    return _CREDENTIALS.sub(r"\1", text)


class RedactCredentials(logging.Filter):
    """Drops ``user:password@`` from URLs in log lines (with --verbose, fsspec logs each URL it opens)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record: leave it to the handler's own error report
            return True
        redacted = redact_url(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
