"""Logging a misbehaving upstream without amplifying it: each kind of fault once, then a count.

A server that writes 6,000 garbage lines must not write 6,000 lines (or tracebacks) into the
gateway's log. `FaultLog` logs the first fault of each kind of one server at once, counts the
repeats, and logs one summary ("<kind>, N more in the last M s") at most once per period and when
the connection ends. The SDK logs some faults of its own (a notification that does not
validate, with its traceback) from tasks the connection started: `SdkFaultFilter` sends those
records through the `FaultLog` of the upstream whose connection logged them, found through a
context variable that every task of a connection inherits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

log = logging.getLogger(__name__)

SUMMARY_PERIOD = 60.0
# Where the SDK's client side logs faults of the server it talks to.
SDK_LOGGERS = ("client", "mcp.shared.jsonrpc_dispatcher", "mcp.client.streamable_http", "mcp.client.sse")

current: ContextVar[FaultLog | None] = ContextVar("gateway_upstream_faults", default=None)


@dataclass
class _Kind:
    since: float
    repeats: int = 0
    latest: str = ""


class FaultLog:
    """The faults of one upstream server, logged once per kind and then counted."""

    def __init__(
        self, server: str, clock: Callable[[], float] = time.monotonic, period: float = SUMMARY_PERIOD
    ) -> None:
        self._server = server
        self._clock = clock
        self._period = period
        self._kinds: dict[str, _Kind] = {}

    def report(self, kind: str, detail: str) -> bool:
        """Note one fault; True when it was logged now (the first of its kind), False when only counted."""
        now = self._clock()
        seen = self._kinds.get(kind)
        if seen is None:
            self._kinds[kind] = _Kind(since=now)
            log.warning(
                "upstream %s: %s: %s (repeats are counted and summarised every %g s)",
                self._server,
                kind,
                detail,
                self._period,
            )
            return True
        seen.repeats += 1
        seen.latest = detail
        if now - seen.since >= self._period:
            self._summarise(kind, seen, now)
        return False

    def flush(self) -> None:
        """Log the counts not yet summarised (the connection ended)."""
        now = self._clock()
        for kind, seen in self._kinds.items():
            if seen.repeats:
                self._summarise(kind, seen, now)

    def _summarise(self, kind: str, seen: _Kind, now: float) -> None:
        log.warning(
            "upstream %s: %s, %d more in the last %.0f s; latest: %s",
            self._server,
            kind,
            seen.repeats,
            now - seen.since,
            seen.latest,
        )
        seen.since, seen.repeats = now, 0


class SdkFaultFilter(logging.Filter):
    """Lets through the SDK's first record of each kind per upstream; counts the rest in its `FaultLog`."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether `record` is logged: always outside an upstream's connection or below WARNING."""
        faults = current.get()
        if faults is None or record.levelno < logging.WARNING:
            return True
        kind = f"SDK warning {record.msg!r}" if isinstance(record.msg, str) else "SDK warning"
        first = faults.report(kind, record.getMessage())
        # The fault log has said it; the SDK's own record adds its traceback, worth once.
        return first


_FILTER = SdkFaultFilter()


def contain_sdk_faults() -> None:
    """Route the SDK client's fault records through the upstreams' fault logs (idempotent)."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
