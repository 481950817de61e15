"""An MCP server that tells what trace context reached it: its tool `context` answers, as JSON, the
`traceparent` of the request's `_meta` and of its HTTP headers (null where absent, and for the
headers over stdio).

`python -m tests.support.traced` serves it over stdio; `served_over_http()` serves it over
streamable HTTP in this process.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

READ_ONLY = {"readOnlyHint": True}


def build_server(name: str = "traced") -> MCPServer:
    """The server, named `name`."""
    server = MCPServer(name)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def context(ctx: Context) -> str:
        """The trace context this request carried, in `_meta` and in HTTP headers."""
        meta = ctx.request_context.meta or {}
        headers = ctx.headers
        return json.dumps(
            {
                "meta": meta.get("traceparent"),
                "header": headers.get("traceparent") if headers is not None else None,
            }
        )

    return server


@asynccontextmanager
async def served_over_http(name: str = "traced") -> AsyncIterator[str]:
    """The server over streamable HTTP on a loopback port; yields its endpoint's URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    config = uvicorn.Config(build_server(name).streamable_http_app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    # A socket already listening queues connections until uvicorn accepts them: nothing to wait for.
    with listener:
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve, [listener])
            try:
                yield f"http://127.0.0.1:{port}/mcp"
            finally:
                server.should_exit = True


if __name__ == "__main__":
    build_server().run("stdio")
