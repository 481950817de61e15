"""Redaction: which configured values count as secrets, and how texts and log records lose them."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from gateway.auth.apikeys import hash_key
from gateway.config.secrets import secrets_of
from gateway.runtime.redaction import MIN_SECRET_LENGTH, REDACTED, RedactingFilter, Redactor, scrub_urls
from tests.support.access import HS256_SECRET, access_config, auth_section


def test_values_shorter_than_the_minimum_are_left_alone_so_ordinary_text_survives() -> None:
    redact = Redactor(["1", "true", "x" * (MIN_SECRET_LENGTH - 1), "s3cr3t-value"])
    assert redact("retry 1 of 3: true, xxxxxxx") == "retry 1 of 3: true, xxxxxxx"
    assert redact("key=s3cr3t-value; again s3cr3t-value") == f"key={REDACTED}; again {REDACTED}"


def test_a_secret_containing_another_is_replaced_whole() -> None:
    redact = Redactor(["abcdefgh", "abcdefgh-ijklmnop"])
    assert redact("token abcdefgh-ijklmnop") == f"token {REDACTED}"


def test_every_secret_of_the_configuration_is_collected(tmp_path: Path) -> None:
    servers = {
        "local": {"command": "unused", "env": {"API_TOKEN": "env-token-123456", "DEBUG": "1"}},
        "remote": {
            "url": "https://user:url-password-42@api.example/mcp?api_key=query-key-987654&v=2",
            "headers": {"Authorization": "Bearer header-token-abcdef"},
        },
    }
    auth = auth_section(api_keys=[{"caller": "ci", "role": "intern", "key": "plain-api-key-0123456789"}])
    auth["api_keys"].append({"caller": "ops", "role": "admin", "key_sha256": hash_key("hashed-key-0123456789")})
    found = set(secrets_of(access_config(tmp_path, servers, auth=auth)))
    expected = {"env-token-123456", "url-password-42", "query-key-987654", "header-token-abcdef"}
    assert expected | {"Bearer header-token-abcdef", "plain-api-key-0123456789", HS256_SECRET} <= found
    assert "hashed-key-0123456789" not in found


def test_urls_and_request_lines_lose_their_query_and_user_info() -> None:
    line = 'HTTP Request: POST https://bob:pw@api.example/mcp?api_key=k1&x=2 "HTTP/1.1 200 OK"'
    assert scrub_urls(line) == 'HTTP Request: POST https://api.example/mcp "HTTP/1.1 200 OK"'
    assert scrub_urls('127.0.0.1:5 - "GET /readyz?token=t1 HTTP/1.1" 200') == '127.0.0.1:5 - "GET /readyz HTTP/1.1" 200'
    assert scrub_urls("for url 'http://h:8/x?k=v'") == "for url 'http://h:8/x'"
    assert scrub_urls("no url here, is it?") == "no url here, is it?"


def test_the_log_filter_rewrites_the_message_its_arguments_and_the_traceback() -> None:
    filter_ = RedactingFilter(Redactor(["very-secret-value"]))
    try:
        raise ValueError("failed with very-secret-value")
    except ValueError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "calling %s with %s", None, None)
        record.args = ("http://h/x?key=abc", "very-secret-value")
        record.exc_info = sys.exc_info()
    assert filter_.filter(record)
    formatted = logging.Formatter().format(record)
    assert "very-secret-value" not in formatted and "key=abc" not in formatted
    assert f"calling http://h/x with {REDACTED}" in formatted and "ValueError" in formatted
