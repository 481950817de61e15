"""The server side's one seam to the internals of the `mcp` SDK and of Starlette: every private
name of theirs that the front doors use is used here, and nowhere else (`tests/test_sdk_seam.py`
fails otherwise).

What it offers the rest is the public API we propose the SDK adds (docs/sdk-seam.md): a transport
whose response mode is chosen per request (`PerRequestTransport`), a session manager with hooks
for admitting and ending sessions (`SessionManagerSeam`), the connection of a request's context
(`connection_of`), and the path a router reads (`route_path`). Each use says what it buys, the
public API that would replace it, and when to remove it. `SDK_PRIVATE` lists the names with the
signature each is used with; the same test checks them against the installed SDK, so a release
that moves or changes one fails there, by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from http import HTTPStatus
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    EventMessage,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError
from starlette._utils import get_route_path
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

SDK_PRIVATE: Final[Mapping[str, str]] = {
    # A function or method: its parameters and return as the SDK's source writes them; an
    # attribute: its annotation there, or "attribute" where it has none.
    "starlette._utils:get_route_path": "(scope: Scope) -> str",
    "mcp.server.session:ServerSession._connection": "attribute",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._handle_post_request": (
        "(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None"
    ),
    "mcp.server.streamable_http:StreamableHTTPServerTransport._check_content_type": "(self, request: Request) -> bool",
    "mcp.server.streamable_http:StreamableHTTPServerTransport._validate_request_headers": (
        "(self, request: Request, send: Send) -> bool"
    ),
    "mcp.server.streamable_http:StreamableHTTPServerTransport._create_error_response": (
        "(self, error_message: str, status_code: HTTPStatus, error_code: int=INVALID_REQUEST, "
        "headers: dict[str, str] | None=None) -> Response"
    ),
    "mcp.server.streamable_http:StreamableHTTPServerTransport._create_json_response": (
        "(self, response_message: JSONRPCMessage | None, status_code: HTTPStatus=HTTPStatus.OK, "
        "headers: dict[str, str] | None=None) -> Response"
    ),
    "mcp.server.streamable_http:StreamableHTTPServerTransport._terminate_unanswered_request": (
        "(self, request_id: RequestId) -> None"
    ),
    "mcp.server.streamable_http:StreamableHTTPServerTransport._clean_up_memory_streams": (
        "(self, request_id: RequestId) -> None"
    ),
    "mcp.server.streamable_http:StreamableHTTPServerTransport._read_stream_writer": (
        "ContextSendStream[SessionMessage | Exception] | None"
    ),
    "mcp.server.streamable_http:StreamableHTTPServerTransport._request_streams": (
        "dict[RequestId, tuple[MemoryObjectSendStream[EventMessage], MemoryObjectReceiveStream[EventMessage]]]"
    ),
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._handle_stateful_request": (
        "(self, scope: Scope, receive: Receive, send: Send) -> None"
    ),
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._serve_opening_request": (
        "(self, http_transport: StreamableHTTPServerTransport, scope: Scope, receive: Receive, send: Send) -> None"
    ),
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._discard_session": (
        "(self, session_id: str, transport: StreamableHTTPServerTransport) -> None"
    ),
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._server_instances": (
        "dict[str, StreamableHTTPServerTransport]"
    ),
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._session_owners": (
        "dict[str, AuthorizationContext]"
    ),
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._session_creation_lock": "attribute",
    "mcp.server.streamable_http_manager:StreamableHTTPSessionManager._lifespan_state": "Any",
}


def route_path(scope: Scope) -> str:
    """The path of an HTTP request below the app's root, as Starlette's router matches it.

    Buys: `/mcp` and `/mcp/g/<group>` are recognised in front of Starlette's router exactly as the
    router would (`httpapp.McpFront`), which spares every call Starlette's exception middleware,
    router and route matching (28 function calls and about 55 us of profiled time a call,
    docs/performance.md).
    Public replacement: Starlette has none (`get_route_path` is what its routing uses).
    Remove when Starlette makes it public, or McpFront goes.
    """
    return get_route_path(scope)


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The SDK connection of the client that sent a request.

    Buys: the gateway keeps each client's session context on the SDK's `Connection` (its state and
    its exit stack, which ends the session context with the connection); handlers get it only as
    the private attribute of the request's session proxy. Public replacement: a `connection` on
    the request context (as the SDK's `mcp.server.context.Context` has). Remove when the SDK has it.
    """
    connection: Connection = ctx.session._connection
    return connection


class PerRequestTransport(StreamableHTTPServerTransport):
    """The SDK's handshake-era transport, with the response mode of each request chosen per request.

    The SDK fixes the mode per transport (`is_json_response_enabled`). A subclass overrides
    `handle_post` and, per request, answers with one JSON body (`answer_with_json`), or hands the
    request to the SDK's way (`sdk_post`): an event stream, or JSON when the transport is in
    JSON mode.

    Buys: an event stream costs about 0.9 ms more of the gateway's CPU per call than a JSON body
    (docs/decisions/0011), and a request needs one only when something can travel on it before its
    answer. Public replacement: a per-request response mode on the transport (docs/sdk-seam.md).
    Remove when the SDK has it. Private to the SDK: `_handle_post_request` (overridden),
    `_check_content_type`, `_validate_request_headers`, `_create_error_response`, and for the JSON
    branch `_read_stream_writer`, `_request_streams`, `_terminate_unanswered_request`,
    `_create_json_response`, `_clean_up_memory_streams`.
    """

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        await self.handle_post(scope, request, receive, send)

    async def handle_post(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        """Answer one POST (a subclass chooses how); the SDK's way unless overridden."""
        await self.sdk_post(scope, request, receive, send)

    async def sdk_post(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        """The SDK's own handling of a POST, in the transport's own response mode."""
        await super()._handle_post_request(scope, request, receive, send)

    def takes_json(self, request: Request) -> bool:
        """Whether a POST accepts a JSON answer and carries a JSON body, as the SDK checks both."""
        has_json, _ = check_accept_headers(request)
        return has_json and self._check_content_type(request)

    async def session_checked(self, request: Request, send: Send) -> bool:
        """The SDK's check of a request's session header; False once it has answered the refusal."""
        return await self._validate_request_headers(request, send)

    def error_response(self, message: str, status: HTTPStatus, code: int) -> Response:
        """A JSON-RPC error without a request id, as the SDK's transport answers one."""
        return self._create_error_response(message, status, code)

    def session_header(self) -> list[tuple[bytes, bytes]]:
        """The session id header of an answer, as ASGI headers (none without a session)."""
        if not self.mcp_session_id:
            return []
        return [(MCP_SESSION_ID_HEADER.lower().encode(), self.mcp_session_id.encode())]

    def stream_headers(self) -> list[tuple[bytes, bytes]]:
        """The head of an answer sent as an event stream."""
        return [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache, no-transform"),
            *self.session_header(),
        ]

    async def answer_with_json(
        self, scope: Scope, request: Request, receive: Receive, send: Send, raw: Mapping[str, Any], keepalive: float
    ) -> None:
        """The SDK's JSON-response branch for one request `raw` (its JSON-RPC message), on a transport
        otherwise in stream mode; a request still running after `keepalive` seconds is answered
        with a stream kept alive by a comment line every `keepalive` seconds until its answer, as the
        SDK's 2026-era path answers."""
        writer = self._read_stream_writer
        if writer is None:
            raise RuntimeError("the transport is not connected")
        try:
            message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValidationError as error:
            response = self.error_response(f"Validation error: {error}", HTTPStatus.BAD_REQUEST, types.INVALID_PARAMS)
            await response(scope, receive, send)
            return
        if not isinstance(message, types.JSONRPCRequest):
            await self.sdk_post(scope, request, receive, send)
            return
        if not await self.session_checked(request, send):
            return
        request_id = str(message.id)
        inbox = _Inbox()
        # The SDK's router sends the request's messages to the first of the pair; its clean-up closes both.
        self._request_streams[request_id] = (inbox, inbox)  # type: ignore[assignment]
        metadata = ServerMessageMetadata(
            request_context=request,
            on_request_unanswered=partial(self._terminate_unanswered_request, message.id),
            # One JSON body carries only the response: nothing can be asked on it.
            can_send_request=False,
        )
        await writer.send(SessionMessage(message, metadata=metadata))
        try:
            answer = await inbox.response_within(keepalive)
            if answer is None:
                # Still running: an idle body would run into the client's read timeout, so the answer
                # becomes a stream after all, kept alive by comment lines until the response comes.
                await self._answer_with_keepalive_stream(send, inbox, keepalive)
                return
            response = self._create_json_response(answer)
        except anyio.EndOfStream:
            response = self.error_response(
                "Session terminated before the request completed",
                HTTPStatus.INTERNAL_SERVER_ERROR,
                types.INTERNAL_ERROR,
            )
        finally:
            await self._clean_up_memory_streams(request_id)
        await response(scope, receive, send)

    async def _answer_with_keepalive_stream(self, send: Send, inbox: _Inbox, keepalive: float) -> None:
        await send({"type": "http.response.start", "status": HTTPStatus.OK, "headers": self.stream_headers()})
        try:
            answer = None
            while answer is None:
                await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
                answer = await inbox.response_within(keepalive)
        except anyio.EndOfStream:
            # The session ended with the request in flight: the stream ends without an answer.
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        data = answer.model_dump_json(by_alias=True, exclude_unset=True).encode()
        await send({"type": "http.response.body", "body": event(data), "more_body": False})


def event(data: bytes) -> bytes:
    """One JSON-RPC message as a server-sent event."""
    return b"event: message\r\ndata: " + data + b"\r\n\r\n"


class _Inbox:
    """Where the SDK's router delivers one JSON-answered request's messages: keeps the response, drops
    the rest (a log line has no wire in a JSON body). Waiting on it with a timeout loses nothing, as a
    cancelled receive from a memory stream could."""

    def __init__(self) -> None:
        self._answer: types.JSONRPCResponse | types.JSONRPCError | None = None
        self._closed = False
        self._settled = anyio.Event()

    async def send(self, event: EventMessage) -> None:
        """Take one message the router sends for the request."""
        if isinstance(event.message, types.JSONRPCResponse | types.JSONRPCError):
            self._answer = event.message
            self._settled.set()

    async def aclose(self) -> None:
        """The request is over, or its session: wake a waiter."""
        self._closed = True
        self._settled.set()

    async def response_within(self, seconds: float) -> types.JSONRPCResponse | types.JSONRPCError | None:
        """The response, or None when it has not come within `seconds`; EndOfStream when none will."""
        with anyio.move_on_after(seconds):
            await self._settled.wait()
        if self._answer is not None:
            return self._answer
        if self._closed:
            raise anyio.EndOfStream
        return None


class SessionManagerSeam(StreamableHTTPSessionManager):
    """The SDK's streamable HTTP session manager, with its admission and ending of sessions open to
    a subclass.

    A subclass overrides `handle_stateful` to decide which requests reach the SDK's handling
    (`sdk_stateful`) and opens sessions itself: under `creation_lock`, `open_session` makes and
    registers a session's transport (`new_transport`) and `serve_opening` serves the request that
    opened it; `end_session` ends one as its client's DELETE would, and `session_ending` is told
    of every session that ends, however it ends.

    Buys: per-caller session limits instead of the SDK's one global cap, sessions kept to the
    endpoint that opened them, an operator ending a session, the hot path's lifespan state, and a
    transport of our own (`PerRequestTransport`): behaviour the SDK has no way to ask for. One
    speed: `transport_for` lets a known session's POST reach its transport past the SDK's body
    limit, era routing and session look-up (0.14 ms of CPU a call, docs/decisions/0160). Public
    replacement: an admission and eviction hook, a transport factory, a session look-up and a
    public end-session on the session manager (docs/sdk-seam.md). Remove when the SDK has them.
    Private to the SDK: `_handle_stateful_request` and `_discard_session` (overridden),
    `_serve_opening_request`, `_server_instances`, `_session_owners`, `_session_creation_lock`,
    `_lifespan_state`.
    """

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle_stateful(scope, receive, send)

    async def handle_stateful(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a handshake-era request (a subclass chooses how); the SDK's way unless overridden."""
        await self.sdk_stateful(scope, receive, send)

    async def sdk_stateful(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's own handling of a request of a stateful session."""
        await super()._handle_stateful_request(scope, receive, send)

    @property
    def creation_lock(self) -> anyio.Lock:
        """The lock under which the SDK admits new sessions."""
        lock: anyio.Lock = self._session_creation_lock
        return lock

    @property
    def lifespan_state(self) -> Any:
        """What the server's lifespan yielded (the SDK hands it to every handler); None while not running."""
        return self._lifespan_state

    def new_transport(self, session_id: str) -> StreamableHTTPServerTransport:
        """The transport of a new session: the SDK's, with the manager's settings, unless overridden."""
        return StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )

    def open_session(self, session_id: str, scope: Scope) -> StreamableHTTPServerTransport:
        """Register a new session for the request `scope` and return its transport (under `creation_lock`);
        its later requests must come with the credential of this one, as the SDK requires."""
        transport = self.new_transport(session_id)
        user = scope.get("user")
        if isinstance(user, AuthenticatedUser):
            self._session_owners[session_id] = authorization_context(user)
        self._server_instances[session_id] = transport
        return transport

    async def serve_opening(
        self, transport: StreamableHTTPServerTransport, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Start the session's server and let its transport answer the request that opened it; a
        session whose opening request fails is ended again."""
        await self._serve_opening_request(transport, scope, receive, send)

    def transport_for(self, session_id: str, scope: Scope) -> StreamableHTTPServerTransport | None:
        """The transport of a session open here, when the request `scope` carries the credential that
        opened it, as the SDK's handling of a stateful request looks both up; else None."""
        transport = self._server_instances.get(session_id)
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        if transport is None or requestor != self._session_owners.get(session_id):
            return None
        return transport

    def is_open(self, session_id: str) -> bool:
        """Whether the session is open here."""
        return session_id in self._server_instances

    async def end_session(self, session_id: str) -> None:
        """End a session as its client's DELETE would: its id answers 404 from now on, its transport
        stops; nothing when it is not open."""
        transport = self._server_instances.get(session_id)
        if transport is not None:
            await self._discard_session(session_id, transport)

    async def session_ending(self, session_id: str) -> None:
        """Told before the SDK forgets a session, however it ends (DELETE, idle timeout, a failed
        opening request, `end_session`), possibly more than once; nothing unless overridden."""

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        await self.session_ending(session_id)
        await super()._discard_session(session_id, transport)
