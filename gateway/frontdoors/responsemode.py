"""JSON body or event stream, chosen per request: a stream only when it can carry something; and a
known session's `tools/call` and `tools/list` so answered in the POST's own task (the hot path).

The SDK fixes the response mode per transport (`json_response`). An event stream costs the gateway
about 0.9 ms of CPU per call (framing, extra tasks, and a new TCP connection per call from the SDK
client) and is needed only to carry messages that belong to the request before its response:
progress notifications, log messages, and requests put to the client (sampling, elicitation,
roots). So a request gets a stream only when one of those can happen:

- it carries `_meta.progressToken` (the client asked for progress);
- handshake era: the client declared sampling, elicitation or roots at `initialize` (an upstream,
  or the gateway's confirmation of a risky call, may ask it something), or it set a log level
  (it asked for log messages, which travel on the request's stream).

Otherwise it is answered with one JSON body, as `http_json_responses: true` answers everything,
unless it runs past `KEEPALIVE_INTERVAL`: then a stream after all, kept alive until the answer comes,
so that a long call does not run into the client's read timeout. The transport that answers so is
the SDK's, through `gateway.frontdoors.sdkserver` (the SDK offers no per-request mode).

The hot path. On the SDK's way a request that needs no stream still travels: the transport
validates it into a `JSONRPCRequest` model, writes it to the session's memory stream, the session's
dispatcher reads it and spawns a task for it, the handler's answer is written back as a
`JSONRPCResponse` model through another stream to a router task, which hands it to the waiting
POST, which encodes it with pydantic. cProfile of the serving process put anyio's streams, cancel
scopes and checkpoints at a fifth of the gateway's CPU per call, and the SDK's own code at another
tenth. A `tools/call` or `tools/list` of a session the gateway already knows is answered instead in
the POST's own task, which runs the SDK's own request kernel (`ServerRunner.on_request`: the spec's
params check, the initialization gate, the server's middleware, the handler, the result shaped for
the wire) on the session's `Connection`, with a dispatch context that has no back channel, as the
SDK's JSON response mode has none. Errors take the dispatcher's shapes. A `tools/list` page the
listing cache holds goes out as the bytes it was encoded to once. What needs the session's
dispatcher stays on the SDK's way: `initialize`, notifications, other methods, and any request
whose answer needs a stream.

The 2026-07-28 era needs nothing of this: the SDK already answers a request with a JSON body unless
the handler emits a notification first (requests for the user travel as `InputRequiredResult`).
What it keeps per call there is a task watching the connection, so that a client abandoning a call
(closing its stream, that era's cancellation) has it cancelled on the upstream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from http import HTTPStatus
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
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params, handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from gateway.frontdoors.listingcache import LIST_TOOLS, Wire, wire
from gateway.frontdoors.sdkserver import PerRequestTransport, event

log = logging.getLogger(__name__)

KEEPALIVE_INTERVAL = 15.0
"""Seconds a request answered without a stream may run before its answer becomes a stream kept alive
by comment lines (as the SDK does in the 2026 era), and between those lines."""

MESSAGE_STATE = "gateway.message"
"""Where the envelope check leaves a POST's parsed JSON-RPC message in the request's state."""

HOT_METHODS = frozenset({"tools/call", "tools/list"})
CANCELLED = types.ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)

ConnectionOf = Callable[[str], Connection | None]


def progress_requested(message: Mapping[str, Any]) -> bool:
    """Whether a JSON-RPC request asks for progress notifications (`params._meta.progressToken`)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and meta.get("progressToken") is not None


def can_be_asked(capabilities: Mapping[str, Any]) -> bool:
    """Whether a client declaring `capabilities` at `initialize` can be put a request: sampling,
    elicitation or roots (what an upstream, or the gateway's confirmation, may ask of it)."""
    return any(capabilities.get(name) is not None for name in ("sampling", "elicitation", "roots"))


def needs_stream(message: Mapping[str, Any], *, askable: bool, logs_wanted: bool) -> bool:
    """Whether a handshake-era request must be answered with an event stream: it asks for progress,
    its client can be asked something, or its client asked for log messages."""
    return askable or logs_wanted or progress_requested(message)


class ResponseModeTransport(PerRequestTransport):
    """The SDK's handshake-era transport in stream mode, answering with one JSON body each request
    that `needs_stream` says needs none; what it learns of its client comes from the messages it
    carries (`initialize`'s capabilities, `logging/setLevel`)."""

    _askable = False
    _logs_wanted = False

    def __init__(self, *args: Any, hot: HotPath | None = None, **options: Any) -> None:
        super().__init__(*args, **options)
        self._hot = hot
        self._hot_calls = InFlight()

    async def terminate(self) -> None:
        """End the session, and the requests still running on the hot path with it."""
        self._hot_calls.cancel_all()
        await super().terminate()

    async def handle_post(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        """A POST answered with JSON unless it needs a stream; on a known session, a `tools/call`
        or `tools/list` so answered takes the hot path."""
        message = _parsed(scope)
        method = message.get("method") if message is not None and "id" in message else None
        if message is not None and method is None and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            self._hot_calls.cancel(cancelled_request_id_from_params(params if isinstance(params, Mapping) else None))
        if method == "initialize":
            params = message.get("params") if message is not None else None
            capabilities = params.get("capabilities") if isinstance(params, Mapping) else None
            self._askable = isinstance(capabilities, Mapping) and can_be_asked(capabilities)
        elif method == "logging/setLevel":
            self._logs_wanted = True
        # Notifications, the client's answers and `initialize` take the SDK's own way.
        if message is None or not isinstance(method, str) or method == "initialize":
            await self.sdk_post(scope, request, receive, send)
            return
        if not self.takes_json(request) or (
            not self.is_json_response_enabled
            and needs_stream(message, askable=self._askable, logs_wanted=self._logs_wanted)
        ):
            await self.sdk_post(scope, request, receive, send)
            return
        try:
            connection = self._hot_connection(method, message)
            if connection is not None:
                if await self.session_checked(request, send):
                    await self._answer_hot(scope, request, receive, send, connection, message)
            elif self.is_json_response_enabled:
                await self.sdk_post(scope, request, receive, send)
            else:
                await self.answer_with_json(scope, request, receive, send, message, KEEPALIVE_INTERVAL)
        except Exception:
            log.exception("Error handling POST request")
            response = self.error_response(
                "Error handling POST request", HTTPStatus.INTERNAL_SERVER_ERROR, types.INTERNAL_ERROR
            )
            await response(scope, receive, send)

    def _hot_connection(self, method: str, message: Mapping[str, Any]) -> Connection | None:
        """The session's connection when this request can be answered on the hot path, else None."""
        if self._hot is None or method not in HOT_METHODS or self.mcp_session_id is None:
            return None
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return None
        return self._hot.connection(self.mcp_session_id)

    async def _answer_hot(
        self,
        scope: Scope,
        request: Request,
        receive: Receive,
        send: Send,
        connection: Connection,
        message: Mapping[str, Any],
    ) -> None:
        """Answer on the hot path with one JSON body, or with a kept-alive stream once it outlasts
        `KEEPALIVE_INTERVAL`, as `answer_with_json` does."""
        assert self._hot is not None
        keepalive = _Keepalive(send, self.stream_headers())
        # A timer rather than a watching task: nearly every call ends long before it fires.
        timer = asyncio.get_running_loop().call_later(KEEPALIVE_INTERVAL, keepalive.start)
        body: bytes | None = None
        try:
            body = await self._hot.answer(connection, request, message, self._hot_calls)
        finally:
            timer.cancel()
            if self.is_terminated:
                body = None
            if keepalive.started:
                await keepalive.finish(body)
        if keepalive.started:
            return
        if body is None:
            response = self.error_response(
                "Session terminated before the request completed",
                HTTPStatus.INTERNAL_SERVER_ERROR,
                types.INTERNAL_ERROR,
            )
            await response(scope, receive, send)
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += self.session_header()
        await send({"type": "http.response.start", "status": HTTPStatus.OK, "headers": headers})
        await send({"type": "http.response.body", "body": body})


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
    """A JSON-RPC response around a result already encoded as JSON: copied once (a kept page of
    500 tools is a few hundred kilobytes, which each `+` would copy again)."""
    return b"".join((b'{"jsonrpc":"2.0","id":', pydantic_core.to_json(request_id), b',"result":', result, b"}"))


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


class _Keepalive:
    """The kept-alive stream of a hot-path answer that outlasted `KEEPALIVE_INTERVAL`: started by a
    timer, it sends the stream's head and a comment line each interval until `finish` sends the answer."""

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]]) -> None:
        self._send = send
        self._headers = headers
        self._done: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        """Whether the answer has become a stream."""
        return self._task is not None

    def start(self) -> None:
        """Turn the answer into a stream (the timer's callback)."""
        # Made here, not per answer: nearly every answer is done before the timer fires. Plain
        # asyncio, as the timer is: a loop callback runs outside any task anyio could look at.
        done = self._done = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._ping(done))

    async def _ping(self, done: asyncio.Event) -> None:
        await self._send({"type": "http.response.start", "status": HTTPStatus.OK, "headers": self._headers})
        while not done.is_set():
            await self._send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
            with suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), KEEPALIVE_INTERVAL)

    async def finish(self, body: bytes | None) -> None:
        """Stop the comment lines and end the stream with the answer (None: end it without one)."""
        assert self._task is not None and self._done is not None
        self._done.set()
        try:
            await self._task
        except Exception:
            # The client went away while the stream was kept alive: nobody is left to answer.
            log.debug("a kept-alive answer lost its client", exc_info=True)
            return
        await self._send({"type": "http.response.body", "body": event(body) if body else b"", "more_body": False})


def _parsed(scope: Scope) -> Mapping[str, Any] | None:
    """The POST's JSON-RPC message as the envelope check parsed it (None: not there)."""
    message = scope.get("state", {}).get(MESSAGE_STATE)
    return message if isinstance(message, Mapping) else None
