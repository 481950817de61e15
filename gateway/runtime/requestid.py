"""Request ids: one id per client call, linking its log lines, the upstream call and the audit row.

The front door binds a fresh id around each call it handles; everything the call runs (pipeline
steps, the upstream call, tasks it starts) sees the same id through a context variable, so no
signature needs to carry it. When the request is traced, its span names the id too
(`gateway.request_id`), and the log lines and audit row name the trace (`gateway.runtime.tracing`).

An id is 32 hex digits: a random prefix drawn once per process (64 bits, so replicas and restarts
do not meet), then a counter, so a process's ids sort in the order its calls began. A uuid4 per
call cost a read of the system's random source and a `UUID` object on every call.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import count

from gateway.runtime import tracing

_current: ContextVar[str | None] = ContextVar("gateway_request_id", default=None)
_parent: ContextVar[str] = ContextVar("gateway_parent_request_id", default="")
_PREFIX = secrets.token_hex(8)
_numbers = count(1)


def current() -> str | None:
    """The id of the call being handled, None outside one."""
    return _current.get()


def parent() -> str:
    """The id of the call that made the call being handled (a script's Run_Code), '' for a client's own."""
    return _parent.get()


def fresh() -> str:
    """A new id: this process's prefix and its next number, 32 hex digits in all."""
    return f"{_PREFIX}{next(_numbers):016x}"


class bound:
    """Handle one client call under a fresh id, restored on the way out.

    A class, not a generator context manager: it is entered once a call, and a generator's
    context manager costs several times as much to enter and leave.
    """

    __slots__ = ("_token",)

    def __enter__(self) -> str:
        request_id = fresh()
        self._token = _current.set(request_id)
        tracing.annotate(tracing.REQUEST_ID, request_id)
        return request_id

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)


@contextmanager
def child() -> Iterator[str]:
    """Handle a call made by the call being handled (a script's tool call) under a fresh id whose
    parent is the current one, both restored on the way out."""
    request_id = fresh()
    parent_token = _parent.set(_current.get() or "")
    token = _current.set(request_id)
    try:
        yield request_id
    finally:
        _current.reset(token)
        _parent.reset(parent_token)
