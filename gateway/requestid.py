"""Request ids: one id per client call, linking its log lines, the upstream call and the audit row.

The front door binds a fresh id around each call it handles; everything the call runs (pipeline
steps, the upstream call, tasks it starts) sees the same id through a context variable, so no
signature needs to carry it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from uuid import uuid4

_current: ContextVar[str | None] = ContextVar("gateway_request_id", default=None)


def current() -> str | None:
    """The id of the call being handled, None outside one."""
    return _current.get()


@contextmanager
def bound() -> Iterator[str]:
    """Handle one client call under a fresh id (a uuid4 in hex), restored on the way out."""
    request_id = uuid4().hex
    token = _current.set(request_id)
    try:
        yield request_id
    finally:
        _current.reset(token)
