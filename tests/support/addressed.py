"""MCP servers over HTTP on chosen loopback addresses, each telling which one answered and what
Host header it was sent, and resolvers that answer what a test says instead of asking DNS."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass
class Addressed:
    """A server listening on `host`:`port`; `requests` holds the path of every HTTP request it got."""

    host: str
    port: int
    requests: list[str] = field(default_factory=list)


def _recording(app: ASGIApp, served: Addressed, redirect: str | None) -> ASGIApp:
    async def record(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        served.requests.append(scope["path"])
        if redirect is None:
            await app(scope, receive, send)
            return
        headers = [(b"location", redirect.encode()), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 307, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    return record


@asynccontextmanager
async def addressed_server(
    label: str, host: str, port: int = 0, *, transport: str = "http", redirect: str | None = None
) -> AsyncIterator[Addressed]:
    """An MCP server on `host`:`port` (a free port when 0), over streamable HTTP at `/mcp` or legacy
    SSE at `/sse`; its tool `where` answers `{"server": label, "host": <the Host header>}`. With
    `redirect`, every request is answered 307 to that URL instead."""
    server = MCPServer(label)

    @server.tool()
    async def where(ctx: Context) -> str:
        """Which server answered, and the Host header of the request."""
        request = ctx.request_context.request
        assert isinstance(request, Request)
        return json.dumps({"server": label, "host": request.headers["host"]})

    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    # A socket already listening queues connections until uvicorn accepts them: nothing to wait for.
    listener = socket.socket()
    listener.bind((host, port))
    listener.listen()
    served = Addressed(host, listener.getsockname()[1])
    uv = uvicorn.Server(uvicorn.Config(_recording(app, served, redirect), log_level="warning", lifespan="on"))
    with listener:
        async with anyio.create_task_group() as group:
            group.start_soon(uv.serve, [listener])
            try:
                yield served
            finally:
                uv.should_exit = True


@dataclass
class ScriptedResolver:
    """Answers the first lookup with `first` and every later one with `then`, keeping each host asked."""

    first: Sequence[str]
    then: Sequence[str] = ()
    lookups: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.lookups.append(host)
        return self.first if len(self.lookups) == 1 else self.then
