"""Keeping secrets out of what the gateway writes and answers: configured values, URL queries and user-info.

One `Redactor`, built from the secrets of the loaded configuration (`gateway.config.secrets`), is
applied where text leaves the gateway: the log handlers (`RedactingFilter`), the translation of
errors for clients, the audit writer, and the HTTP answers. Values shorter than
`MIN_SECRET_LENGTH` are left alone: an `env` value such as `1` or `true` is no secret, and
replacing it would mangle every message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

MIN_SECRET_LENGTH = 8
REDACTED = "[redacted]"
# The loggers of the HTTP client libraries log every request's URL at INFO.
CLIENT_LOGGERS = ("httpx2", "httpcore2")

_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#\"'<>]*@")
# A query after a path or an authority (`/mcp?token=...`, `http://host/?k=v`, `"GET /x?k=v HTTP/1.1"`).
_QUERY = re.compile(r"(/[^\s?#\"'<>]*)\?[^\s\"'<>]*")


class Redactor:
    """Replaces every configured secret value in a text with `[redacted]`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.learn(secrets)

    def learn(self, secrets: Iterable[str]) -> None:
        """Redact `secrets` too from now on (those of a server added while the gateway runs)."""
        self._secrets |= {value for value in secrets if len(value) >= MIN_SECRET_LENGTH}
        # Longest first, so that a secret containing another is replaced whole.
        values = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, values))) if values else None

    def __call__(self, text: str) -> str:
        """`text` without any secret."""
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)


NO_SECRETS = Redactor(())


def scrub_urls(text: str) -> str:
    """`text` with the query string and user-info of every URL and request path removed."""
    return _QUERY.sub(r"\1", _USERINFO.sub(r"\1", text))


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites each record without secrets, URL queries or user-info."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self._redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite `record` in place; never drops it."""
        record.msg = self._clean(record.getMessage())
        record.args = None
        if record.exc_info is not None:
            record.exc_text = self._clean(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if record.stack_info:
            record.stack_info = self._clean(record.stack_info)
        return True

    def _clean(self, text: str) -> str:
        return self._redact(scrub_urls(text))


def configure_logging(redact: Redactor, level: int) -> None:
    """Put a `RedactingFilter` on every root handler, and quiet the HTTP client loggers below DEBUG."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter(redact))
    quiet_clients(level)


def quiet_clients(level: int) -> None:
    """Let the HTTP client loggers' line per request through only at DEBUG."""
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)
