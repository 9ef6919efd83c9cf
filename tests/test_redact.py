"""Credentials never reach what zerda prints, logs or stores (pipelines.redact)."""

from __future__ import annotations

import logging
import threading

import pytest

from pipelines.redact import RedactCredentials, environment_held, redact_url, remember_credentials


def test_urls_lose_their_credentials() -> None:
    assert redact_url("s3://AKIA:secret@bucket/key@1.jsonl") == "s3://bucket/key@1.jsonl"
    assert redact_url("ftp://user@host/a") == "ftp://host/a"
    assert redact_url("/local/a@b.txt") == "/local/a@b.txt"


def test_the_logging_filter_redacts_formatted_messages() -> None:
    record = logging.LogRecord("zerda", logging.INFO, __file__, 1, "opening %s", ("s3://k:secret@b/a",), None)
    assert RedactCredentials().filter(record)
    assert record.getMessage() == "opening s3://b/a"


def test_credentials_held_for_a_listing_are_the_environments_and_what_is_remembered_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within ``environment_held`` the environment's credentials are read once, on entry; one remembered
    meanwhile counts at once; another thread, and this one afterwards, read the environment again."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first-secret-value")
    with environment_held():
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "second-secret-value")
        assert redact_url("/a/first-secret-value/b") == "/a/***/b"
        remember_credentials("s3://user:remembered-password@bucket/a")
        assert redact_url("x remembered-password y") == "x *** y"
        other: list[str] = []
        thread = threading.Thread(target=lambda: other.append(redact_url("/second-secret-value")))
        thread.start()
        thread.join()
        assert other == ["/***"]
    assert redact_url("/a/second-secret-value/b") == "/a/***/b"
