"""A plain `tools/call` to a stdio server sent straight down its pipe, its answer taken off the
server's output before the SDK's client session sees it.

The profile of the serving process (docs/decisions/0005-direct-calls-to-stdio-servers.md) found the
SDK's client session spending, per call, more than the server itself: a pydantic round trip of the
request, an OpenTelemetry span, a cancel scope for the request's clock, a memory stream per request,
two hops through memory streams and their tasks (to the writer, from the reader to the dispatcher),
and a parse of the whole response as a JSON-RPC message before its result is parsed once more. A
call that asked for no progress needs none of it. Its request goes out as one line under an id of
its own (`gw-<n>`: a string, which the session's integer ids never are); the reader hands back the
response with that id as plain data, and the caller parses the result once, with the SDK's types
and the same checks the SDK applies (`ResultParser`). Everything else on the pipe (initialize,
pings, notifications, progress, the server's own requests, tasks) stays with the `ClientSession`.

The contract is the SDK's: a caller that gives up (its deadline, its client gone) has the server
told with `notifications/cancelled`; a connection that ends fails every call waiting on it with
`CONNECTION_CLOSED`; an error response is an `MCPError`. So is its order: the SDK resolves a
response only after its session has taken each notification the server sent before it, which is
how a log message sent during a call reaches that call's client before its answer. A direct call
keeps that order: the reader counts the notifications it hands the session (`handed`), the
session counts those it takes (`seen`), and a call answered after `n` of them returns once the
session has taken `n` (docs/decisions/0061-log-messages-of-a-2026-era-call.md).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.shared.exceptions import MCPError
from mcp_types.methods import SERVER_RESULTS
from pydantic import TypeAdapter, ValidationError

from gateway.upstreams.sdkclient import later_revision_fields

Send = Callable[[bytes], Awaitable[None]]
# The SDK's bound on the courtesy cancel written for an abandoned request.
_CANCEL_WRITE_TIMEOUT = 5.0
_CLOSED = types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")
# What a session that negotiated no version assumes (the SDK's fallback too).
_FALLBACK_VERSION = "2025-11-25"


class _Waiter:
    """One call waiting for its response: set once, with the result or the error."""

    __slots__ = ("done", "handed", "outcome")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.outcome: dict[str, Any] | types.ErrorData = _CLOSED
        self.handed = 0
        """How many notifications the session had been handed when the response was read."""


class DirectCalls:
    """The direct `tools/call` requests of one connection to a stdio server, and their waiters."""

    def __init__(self) -> None:
        self._send: Send | None = None
        self._waiting: dict[str, _Waiter] = {}
        self._count = 0
        self._handed = 0
        self._seen = 0
        self._taken: anyio.Event | None = None
        """Set when the session takes a notification, for a call that waits for it to catch up."""

    @property
    def open(self) -> bool:
        """Whether calls can be sent: the transport attached the server's input and has not closed."""
        return self._send is not None

    def attach(self, send: Send) -> None:
        """Send requests with `send` (one whole line per await) from now on."""
        self._send = send

    def close(self) -> None:
        """The connection ended: no more calls, and every call waiting fails as the SDK's would."""
        self._send = None
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.done.set()
        self._caught_up()

    def handed(self) -> None:
        """The reader handed the session a notification."""
        self._handed += 1

    def seen(self) -> None:
        """The session took a notification, in the order it was handed."""
        self._seen += 1
        self._caught_up()

    def _caught_up(self) -> None:
        taken, self._taken = self._taken, None
        if taken is not None:
            taken.set()

    async def _in_order(self, handed: int) -> None:
        """Return once the session has taken the first `handed` notifications (or the connection ended)."""
        while self._seen < handed and self._send is not None:
            if self._taken is None:
                self._taken = anyio.Event()
            await self._taken.wait()

    def take(self, line: bytes) -> bool:
        """Whether `line` is the response to a waiting call (which it then completes); any other
        line, a malformed response included, is the SDK's to read."""
        if not self._waiting:
            return False
        try:
            message = pydantic_core.from_json(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or "method" in message:
            return False
        ident = message.get("id")
        waiter = self._waiting.get(ident) if isinstance(ident, str) else None
        if waiter is None or not isinstance(ident, str):
            return False
        outcome = _outcome(message)
        if outcome is None:
            return False
        del self._waiting[ident]
        waiter.outcome = outcome
        waiter.handed = self._handed
        waiter.done.set()
        return True

    def refuse(self, ident: types.RequestId | None, error: types.ErrorData) -> bool:
        """Whether the response `ident` (one too large to read) is a waiting call's, which then fails with `error`."""
        waiter = self._waiting.pop(ident, None) if isinstance(ident, str) else None
        if waiter is None:
            return False
        waiter.outcome = error
        waiter.done.set()
        return True

    async def call(
        self, name: str, arguments: Mapping[str, Any], meta: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Call the tool `name`, with `meta` as the request's `_meta` (a trace context) when given;
        the `result` of the response as the server sent it.

        Raises `MCPError` for an error response, and with `CONNECTION_CLOSED` when the connection
        is gone or ends before the answer.
        """
        send = self._send
        if send is None:
            raise MCPError(code=_CLOSED.code, message=_CLOSED.message)
        self._count += 1
        ident = f"gw-{self._count}"
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        line = _line({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
        waiter = _Waiter()
        self._waiting[ident] = waiter
        try:
            try:
                await send(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise MCPError(code=_CLOSED.code, message=_CLOSED.message) from None
            await waiter.done.wait()
            if self._seen < waiter.handed:
                await self._in_order(waiter.handed)
        except anyio.get_cancelled_exc_class():
            # A write is one line handed to the pipe whole, so a cancelled one was sent or not at all;
            # the server ignores a cancel for an id it never saw.
            with anyio.move_on_after(_CANCEL_WRITE_TIMEOUT, shield=True):
                await self._cancel(send, ident)
            raise
        finally:
            self._waiting.pop(ident, None)
        outcome = waiter.outcome
        if isinstance(outcome, types.ErrorData):
            raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
        return outcome

    async def _cancel(self, send: Send, ident: str) -> None:
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": ident, "reason": "caller cancelled"},
        }
        # A connection already gone took the call with it.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await send(_line(notice))


class ResultParser:
    """A direct call's `CallToolResult`, checked as the SDK's `send_request` checks it: against the
    negotiated revision's shape, without the fields of later revisions. One per session: which
    fields are later than its revision is worked out once."""

    def __init__(self, version: str | None) -> None:
        self._version = version or _FALLBACK_VERSION
        self._later = later_revision_fields("tools/call", self._version)
        # The revision's shape, as `validate_server_result` checks it, without the dump that
        # function also makes and throws away on every call (an echo result parses in 11 us
        # instead of 15); None for a revision without a shape, where the SDK checks nothing either.
        shape: Any = SERVER_RESULTS.get(("tools/call", self._version))
        self._shape = None if shape is None else TypeAdapter[Any](shape)

    def parse(self, raw: dict[str, Any]) -> types.CallToolResult:
        """The result in `raw`; `pydantic.ValidationError` for one that does not conform."""
        ttl = raw.get("ttlMs")
        if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
            raw = {**raw, "ttlMs": 0}  # the SDK floors a negative time to live rather than fail the call
        if self._shape is not None:
            self._shape.validate_python(raw, by_name=False)
        if not self._later.isdisjoint(raw):
            raw = {key: value for key, value in raw.items() if key not in self._later}
        return types.CallToolResult.model_validate(raw, by_name=False)


def _outcome(message: dict[str, Any]) -> dict[str, Any] | types.ErrorData | None:
    """A response's result or error, or None when it carries neither in a form the SDK would accept."""
    result = message.get("result")
    if isinstance(result, dict):
        return result
    if "error" in message:
        try:
            return types.ErrorData.model_validate(message["error"])
        except ValidationError:
            return None
    return None


def _line(message: Mapping[str, Any]) -> bytes:
    # ASCII escapes: a lone surrogate in a string argument still makes a line the server can read.
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()
