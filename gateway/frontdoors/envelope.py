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
import pydantic_core
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import clip
from gateway.frontdoors.responsemode import MESSAGE_STATE

MCP_PATH = "/mcp"
GROUP_PATH = "/mcp/g/"
"""Where each tool group's MCP endpoint lives: `/mcp/g/<group>`."""


def is_mcp_path(path: str) -> bool:
    """Whether `path` is an MCP endpoint: `/mcp`, or a tool group's `/mcp/g/<group>`."""
    return path == MCP_PATH or (path.startswith(GROUP_PATH) and "/" not in path[len(GROUP_PATH) :])


VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
VERSION_HEADER = "MCP-Protocol-Version"
SESSION_HEADER = "mcp-session-id"


def refusal(message: str, *, code: int = types.INVALID_REQUEST, id: Any = None, data: Any = None) -> Response:
    """An HTTP 400 answer carrying a one-line JSON-RPC error (`id` null unless the request's is usable)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": id, "error": error}, separators=(",", ":"))
    return Response(body, status_code=400, media_type="application/json")


def version_refusal(value: str | None) -> Response | None:
    """The answer to an `MCP-Protocol-Version` header naming no revision the SDK serves, else None."""
    if value is None or value in VERSIONS:
        return None
    requested = clip(value)
    return refusal(
        f"Unsupported {VERSION_HEADER} header {requested!r}: supported versions are {', '.join(VERSIONS)}",
        code=types.UNSUPPORTED_PROTOCOL_VERSION,
        data={"supported": list(VERSIONS), "requested": requested},
    )


def parse_message(body: bytes) -> tuple[Any, Response | None]:
    """A POST body parsed, with the answer to one that is not JSON (then the message is None).

    Parsed as the SDK's transports parse (pydantic's JSON decoder): a string that is not Unicode
    (a lone surrogate escape) is refused here, since nothing after could encode it again."""
    try:
        return pydantic_core.from_json(body), None
    except ValueError as error:
        return None, refusal(f"Parse error: the body is not JSON ({error})", code=types.PARSE_ERROR)


def message_refusal(message: Any, *, in_session: bool) -> Response | None:
    """The answer to a parsed POST body that is not one well-formed JSON-RPC message or that would
    initialize a live session again, else None."""
    if isinstance(message, list):
        return refusal("Batches are not supported: send one JSON-RPC message per request")
    if not isinstance(message, dict):
        return refusal("The body must be one JSON-RPC message object")
    if message.get("jsonrpc") != "2.0":
        return refusal('The "jsonrpc" member must be "2.0"')
    request_id = message.get("id")
    has_id = "id" in message
    # bool is an int to Python, never to JSON-RPC.
    if has_id and type(request_id) is not str and type(request_id) is not int:
        return refusal("The id must be a string or an integer")
    method = message.get("method")
    is_response = has_id and "method" not in message and ("result" in message or "error" in message)
    if not is_response and not isinstance(method, str):
        return refusal('The message needs a "method" string')
    params = message.get("params")
    if not is_response and params is not None and not isinstance(params, dict):
        # MCP names every parameter: positional (array) params have no meaning in any method.
        return refusal('The "params" member must be an object', code=types.INVALID_PARAMS, id=request_id)
    if method == "initialize" and in_session:
        return refusal(
            "Session already initialized: send initialize without an Mcp-Session-Id header to start a new session",
            id=request_id,
        )
    return None


class EnvelopeGuard:
    """Checks every request to `/mcp` (and `/mcp/g/<group>`) before the SDK: the version header, and a POST's body (read
    once, up to the SDK's own size limit, then handed on unchanged)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_mcp_path(scope["path"].removeprefix(scope.get("root_path", ""))):
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = version_refusal(headers.get(VERSION_HEADER))
        if refused is not None:
            await refused(scope, receive, send)
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
            if size > DEFAULT_MAX_REQUEST_BODY_SIZE:
                await Response("Request body too large", status_code=413)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        message, refused = parse_message(body)
        refused = refused or message_refusal(message, in_session=SESSION_HEADER in headers)
        if refused is not None:
            await refused(scope, receive, send)
            return
        # Parsed once: the response mode is chosen from it (`gateway.frontdoors.responsemode`).
        scope.setdefault("state", {})[MESSAGE_STATE] = message
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)
