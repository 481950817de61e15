"""The JSON-RPC envelope of what reaches `/mcp`, checked before the SDK sees it.

The SDK lets some malformed messages through or answers them badly: a request whose id is not a
string or an integer is taken for a notification (202, never answered), a batch or a bare value
gets a multi-line validation dump as an invalid-params error, `initialize` on a live session
starts it again, and an unknown `MCP-Protocol-Version` is sent down the 2026 path, whose answer
speaks of `params._meta`. Each is answered here with HTTP 400 and a one-line JSON-RPC error.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import clip

MCP_PATH = "/mcp"
VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
VERSION_HEADER = "MCP-Protocol-Version"
SESSION_HEADER = "mcp-session-id"


class Refusal(Exception):
    """A message answered at the edge: a JSON-RPC error code, one line of text, the request id if usable."""

    def __init__(self, message: str, *, code: int = types.INVALID_REQUEST, id: Any = None, data: Any = None) -> None:
        super().__init__(message)
        self.body: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}
        if data is not None:
            self.body["error"]["data"] = data

    def response(self) -> Response:
        """The refusal as an HTTP 400 answer."""
        return Response(json.dumps(self.body, separators=(",", ":")), status_code=400, media_type="application/json")


def check_version(value: str | None) -> None:
    """Refuse an `MCP-Protocol-Version` header naming no revision the SDK serves."""
    if value is not None and value not in VERSIONS:
        requested = clip(value)
        raise Refusal(
            f"Unsupported {VERSION_HEADER} header {requested!r}: supported versions are {', '.join(VERSIONS)}",
            code=types.UNSUPPORTED_PROTOCOL_VERSION,
            data={"supported": list(VERSIONS), "requested": requested},
        )


def check_message(body: bytes, *, in_session: bool) -> None:
    """Refuse a POST body that is not one well-formed JSON-RPC message, or that re-initializes a session."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        raise Refusal("Parse error: the body is not JSON", code=types.PARSE_ERROR) from None
    if isinstance(message, list):
        raise Refusal("Batches are not supported: send one JSON-RPC message per request")
    if not isinstance(message, dict):
        raise Refusal("The body must be one JSON-RPC message object")
    if message.get("jsonrpc") != "2.0":
        raise Refusal('The "jsonrpc" member must be "2.0"')
    request_id = message.get("id")
    has_id = "id" in message
    # bool is an int to Python, never to JSON-RPC.
    if has_id and type(request_id) is not str and type(request_id) is not int:
        raise Refusal("The id must be a string or an integer")
    method = message.get("method")
    is_response = has_id and "method" not in message and ("result" in message or "error" in message)
    if not is_response and not isinstance(method, str):
        raise Refusal('The message needs a "method" string')
    if method == "initialize" and in_session:
        raise Refusal(
            "Session already initialized: send initialize without an Mcp-Session-Id header to start a new session",
            id=request_id,
        )


class EnvelopeGuard:
    """Checks every request to `/mcp` before the SDK: the version header, and a POST's body (read
    once, up to the SDK's own size limit, then handed on unchanged)."""

    def __init__(self, app: ASGIApp, *, max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self._app = app
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].removeprefix(scope.get("root_path", "")) != MCP_PATH:
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            check_version(headers.get(VERSION_HEADER))
        except Refusal as refusal:
            await refusal.response()(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_body:
                await Response("Request body too large", status_code=413)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            check_message(body, in_session=SESSION_HEADER in headers)
        except Refusal as refusal:
            await refusal.response()(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)
