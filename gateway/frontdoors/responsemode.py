"""JSON body or event stream, chosen per request: a stream only when it can carry something.

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
so that a long call does not run into the client's read timeout.

A `tools/call` or `tools/list` answered with JSON on a session the gateway already knows is answered
in the POST's own task (`gateway.frontdoors.hotpath`), past the session's streams and dispatcher.

The 2026-07-28 era needs nothing of this: the SDK already answers a request with a JSON body unless
the handler emits a notification first (requests for the user travel as `InputRequiredResult`).
What it keeps per call there is a task watching the connection, so that a client abandoning a call
(closing its stream, that era's cancellation) has it cancelled on the upstream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from contextlib import suppress
from functools import partial
from http import HTTPStatus
from typing import Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    EventMessage,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from gateway.frontdoors.hotpath import HOT_METHODS, HotPath, InFlight

log = logging.getLogger(__name__)

KEEPALIVE_INTERVAL = 15.0
"""Seconds a request answered without a stream may run before its answer becomes a stream kept alive
by comment lines (as the SDK does in the 2026 era), and between those lines."""

MESSAGE_STATE = "gateway.message"
"""Where the envelope check leaves a POST's parsed JSON-RPC message in the request's state."""


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


class ResponseModeTransport(StreamableHTTPServerTransport):
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

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
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
            await super()._handle_post_request(scope, request, receive, send)
            return
        has_json, _ = check_accept_headers(request)
        if (
            not has_json
            or not self._check_content_type(request)
            or (
                not self.is_json_response_enabled
                and needs_stream(message, askable=self._askable, logs_wanted=self._logs_wanted)
            )
        ):
            await super()._handle_post_request(scope, request, receive, send)
            return
        try:
            connection = self._hot_connection(method, message)
            if connection is not None:
                if await self._validate_request_headers(request, send):
                    await self._answer_hot(scope, request, receive, send, connection, message)
            elif self.is_json_response_enabled:
                await super()._handle_post_request(scope, request, receive, send)
            else:
                await self._answer_with_json(scope, request, receive, send, message)
        except Exception:
            log.exception("Error handling POST request")
            response = self._create_error_response(
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
        `KEEPALIVE_INTERVAL`, as `_answer_with_json` does."""
        assert self._hot is not None
        keepalive = _Keepalive(send, self._stream_headers())
        # A timer rather than a watching task: nearly every call ends long before it fires.
        timer = asyncio.get_running_loop().call_later(KEEPALIVE_INTERVAL, keepalive.start)
        body: bytes | None = None
        try:
            body = await self._hot.answer(connection, request, message, self._hot_calls)
        finally:
            timer.cancel()
            if self._terminated:
                body = None
            if keepalive.started:
                await keepalive.finish(body)
        if keepalive.started:
            return
        if body is None:
            response = self._create_error_response(
                "Session terminated before the request completed",
                HTTPStatus.INTERNAL_SERVER_ERROR,
                types.INTERNAL_ERROR,
            )
            await response(scope, receive, send)
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += self._session_header()
        await send({"type": "http.response.start", "status": HTTPStatus.OK, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _session_header(self) -> list[tuple[bytes, bytes]]:
        if not self.mcp_session_id:
            return []
        return [(MCP_SESSION_ID_HEADER.lower().encode(), self.mcp_session_id.encode())]

    def _stream_headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache, no-transform"),
            *self._session_header(),
        ]

    async def _answer_with_json(
        self, scope: Scope, request: Request, receive: Receive, send: Send, raw: Mapping[str, Any]
    ) -> None:
        """The SDK's JSON-response branch for one request, on a transport otherwise in stream mode."""
        writer = self._read_stream_writer
        if writer is None:
            raise RuntimeError("the transport is not connected")
        try:
            message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValidationError as error:
            response = self._create_error_response(
                f"Validation error: {error}", HTTPStatus.BAD_REQUEST, types.INVALID_PARAMS
            )
            await response(scope, receive, send)
            return
        if not isinstance(message, types.JSONRPCRequest):
            await super()._handle_post_request(scope, request, receive, send)
            return
        if not await self._validate_request_headers(request, send):
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
            answer = await inbox.response_within(KEEPALIVE_INTERVAL)
            if answer is None:
                # Still running: an idle body would run into the client's read timeout, so the answer
                # becomes a stream after all, kept alive by comment lines until the response comes.
                await self._answer_with_keepalive_stream(send, inbox)
                return
            response = self._create_json_response(answer)
        except anyio.EndOfStream:
            response = self._create_error_response(
                "Session terminated before the request completed",
                HTTPStatus.INTERNAL_SERVER_ERROR,
                types.INTERNAL_ERROR,
            )
        finally:
            await self._clean_up_memory_streams(request_id)
        await response(scope, receive, send)

    async def _answer_with_keepalive_stream(self, send: Send, inbox: _Inbox) -> None:
        await send({"type": "http.response.start", "status": HTTPStatus.OK, "headers": self._stream_headers()})
        try:
            answer = None
            while answer is None:
                await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
                answer = await inbox.response_within(KEEPALIVE_INTERVAL)
        except anyio.EndOfStream:
            # The session ended with the request in flight: the stream ends without an answer.
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        data = answer.model_dump_json(by_alias=True, exclude_unset=True).encode()
        await send({"type": "http.response.body", "body": _frame(data), "more_body": False})


def _frame(data: bytes) -> bytes:
    """One JSON-RPC message as a server-sent event."""
    return b"event: message\r\ndata: " + data + b"\r\n\r\n"


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
        await self._send({"type": "http.response.body", "body": _frame(body) if body else b"", "more_body": False})


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


def _parsed(scope: Scope) -> Mapping[str, Any] | None:
    """The POST's JSON-RPC message as the envelope check parsed it (None: not there)."""
    message = scope.get("state", {}).get(MESSAGE_STATE)
    return message if isinstance(message, Mapping) else None
