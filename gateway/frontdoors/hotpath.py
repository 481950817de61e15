"""`tools/call` and `tools/list` answered in the HTTP request's own task, past the SDK's plumbing.

On the SDK's way a request that needs no stream still travels: the transport validates it into a
`JSONRPCRequest` model, writes it to the session's memory stream, the session's dispatcher reads
it and spawns a task for it, the handler's answer is written back as a `JSONRPCResponse` model
through another stream to a router task, which hands it to the waiting POST, which encodes it
with pydantic. cProfile of the serving process put anyio's streams, cancel scopes and checkpoints
at a fifth of the gateway's CPU per call, and the SDK's own code at another tenth.

Here the POST's task runs the SDK's own request kernel (`ServerRunner.on_request`: the spec's
params check, the initialization gate, the server's middleware, the handler, the result shaped
for the wire) on the session's `Connection`, with a dispatch context that has no back channel, as
the SDK's JSON response mode has none. Errors take the dispatcher's shapes. A `tools/list` page
the listing cache holds goes out as the bytes it was encoded to once.

What needs the session's dispatcher stays on the SDK's way: `initialize`, notifications, other
methods, and any request whose answer needs a stream (`responsemode.needs_stream`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from starlette.requests import Request

from gateway.frontdoors.listingcache import LIST_TOOLS, Wire, wire

log = logging.getLogger(__name__)

HOT_METHODS = frozenset({"tools/call", "tools/list"})
CANCELLED = types.ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)

ConnectionOf = Callable[[str], Connection | None]


@dataclass(slots=True)
class EdgeDispatch:
    """The SDK's `DispatchContext` for one request answered with a JSON body: nothing can be asked
    on it, and its notifications have no wire (the SDK's JSON response mode drops them too)."""

    request_id: types.RequestId
    message_metadata: ServerMessageMetadata
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)

    @property
    def transport(self) -> TransportContext:
        """Streamable HTTP without a back channel for this request."""
        return _TRANSPORT

    @property
    def can_send_request(self) -> bool:
        """Never: one JSON body carries only the response."""
        return False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Refused, as the SDK refuses it in JSON response mode."""
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Dropped: a JSON body has no room for it."""

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Dropped: a request on this path carries no progress token."""


def error_body(request_id: types.RequestId | None, error: types.ErrorData) -> bytes:
    """A JSON-RPC error as the SDK writes it (`JSONRPCError`, unset fields left out)."""
    wire = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return wire.model_dump_json(by_alias=True, exclude_unset=True).encode()


def result_body(request_id: types.RequestId, result: bytes) -> bytes:
    """A JSON-RPC response around a result already encoded as JSON."""
    return b'{"jsonrpc":"2.0","id":' + pydantic_core.to_json(request_id) + b',"result":' + result + b"}"


class HotPath:
    """Answers one session's `tools/call` and `tools/list` requests in the POST's own task.

    `connection_of` finds a session's SDK `Connection` by its id (None until the gateway knows the
    session from its `notifications/initialized` or a first request on the SDK's way); `lifespan`
    gives the session manager's lifespan state, which the SDK hands every handler.
    """

    def __init__(self, server: Server[Any], connection_of: ConnectionOf, lifespan: Callable[[], Any]) -> None:
        self._server = server
        self._connection_of = connection_of
        self._lifespan = lifespan

    def connection(self, session_id: str) -> Connection | None:
        """The session's connection once the gateway knows it, else None (take the SDK's way)."""
        return self._connection_of(session_id)

    async def answer(
        self, connection: Connection, request: Request, message: Mapping[str, Any], calls: InFlight
    ) -> bytes:
        """The JSON-RPC answer to `message` (a request to one of `HOT_METHODS`), encoded."""
        request_id: types.RequestId = message["id"]
        method: str = message["method"]
        dispatch = EdgeDispatch(request_id, ServerMessageMetadata(request_context=request, can_send_request=False))
        runner = ServerRunner(self._server, connection, self._lifespan())
        if method != LIST_TOOLS:
            return await self._run(runner, dispatch, method, message.get("params"), calls, None)
        with wire() as page:
            return await self._run(runner, dispatch, method, message.get("params"), calls, page)

    @staticmethod
    async def _run(
        runner: ServerRunner[Any],
        dispatch: EdgeDispatch,
        method: str,
        params: Mapping[str, Any] | None,
        calls: InFlight,
        page: Wire | None,
    ) -> bytes:
        request_id = dispatch.request_id
        with calls.track(dispatch) as scope:
            try:
                result = await runner.on_request(dispatch, method, params)
            except Exception as error:
                if dispatch.cancel_requested.is_set():
                    return error_body(request_id, CANCELLED)
                # The dispatcher's ladder: MCPError as it is, a params ValidationError as invalid
                # params, anything else its catch-all (logged, code 0).
                data = handler_exception_to_error_data(error)
                if data is None:
                    log.exception("handler for %r raised", method)
                    data = types.ErrorData(code=0, message=str(error))
                return error_body(request_id, data)
        if scope.cancelled_caught or dispatch.cancel_requested.is_set():
            return error_body(request_id, CANCELLED)
        encoded = page.body if page is not None else None
        return result_body(request_id, encoded if encoded is not None else pydantic_core.to_json(result))


class InFlight:
    """A session's requests being answered on the hot path, by request id, so that the client's
    `notifications/cancelled` or the session's end can cancel them."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[EdgeDispatch, anyio.CancelScope]] = {}

    def track(self, dispatch: EdgeDispatch) -> _Tracked:
        """A cancel scope around the request, findable by its id while it runs."""
        return _Tracked(self._calls, dispatch)

    def cancel(self, request_id: object) -> bool:
        """Cancel the request the client gave up (its `notifications/cancelled`); whether one was found."""
        entry = self._calls.get(str(request_id))
        if entry is None:
            return False
        entry[0].cancel_requested.set()
        entry[1].cancel()
        return True

    def cancel_all(self) -> None:
        """The session ended: stop every request still running."""
        for dispatch, scope in list(self._calls.values()):
            dispatch.cancel_requested.set()
            scope.cancel()


class _Tracked:
    """One request's cancel scope, in its session's table while entered (a plain context manager:
    this runs once per call)."""

    def __init__(self, calls: dict[str, tuple[EdgeDispatch, anyio.CancelScope]], dispatch: EdgeDispatch) -> None:
        self._calls = calls
        self._dispatch = dispatch
        self._key = str(dispatch.request_id)
        self._scope = anyio.CancelScope()

    def __enter__(self) -> anyio.CancelScope:
        scope = self._scope.__enter__()
        self._calls[self._key] = (self._dispatch, scope)
        return scope

    def __exit__(self, *exc_info: Any) -> bool:
        # A reused id may have replaced this entry: leave the newer one.
        entry = self._calls.get(self._key)
        if entry is not None and entry[0] is self._dispatch:
            del self._calls[self._key]
        return bool(self._scope.__exit__(*exc_info))
