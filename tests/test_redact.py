"""Credentials never reach what zerda prints, logs or stores (pipelines.redact)."""

from __future__ import annotations

import logging

from pipelines.redact import RedactCredentials, redact_url


def test_urls_lose_their_credentials() -> None:
    assert redact_url("s3://AKIA:secret@bucket/key@1.jsonl") == "s3://bucket/key@1.jsonl"
    assert redact_url("ftp://user@host/a") == "ftp://host/a"
    assert redact_url("/local/a@b.txt") == "/local/a@b.txt"


def test_the_logging_filter_redacts_formatted_messages() -> None:
    record = logging.LogRecord("zerda", logging.INFO, __file__, 1, "opening %s", ("s3://k:secret@b/a",), None)
    assert RedactCredentials().filter(record)
    assert record.getMessage() == "opening s3://b/a"
