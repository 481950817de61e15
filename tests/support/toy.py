"""A configurable upstream MCP server for tests: run in memory, or `python -m tests.support.toy` over stdio/HTTP."""

from __future__ import annotations

import argparse
import base64
import os
import time

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ImageContent, TextContent, ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
PIXEL = base64.b64encode(bytes.fromhex("89504e470d0a1a0a")).decode()


def build_server(name: str = "toy", extra_tools: int = 0, tool_prefix: str = "") -> MCPServer:
    """A server with tools covering every kind of result, plus resources and prompts."""
    server = MCPServer(name)
    state = {"count": 0, "calls": 0}

    @server.tool(name=f"{tool_prefix}echo", annotations=READ_ONLY, structured_output=False)
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        state["calls"] += 1
        return text

    @server.tool(annotations=READ_ONLY)
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        state["calls"] += 1
        return a + b

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def calls() -> str:
        """How many echo/add calls reached this server."""
        return str(state["calls"])

    @server.tool(structured_output=False)
    async def increment() -> str:
        """Count up; the count lives as long as the server."""
        state["count"] += 1
        return str(state["count"])

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def sleep(seconds: float, ctx: Context) -> str:
        """Sleep, reporting progress each tenth of the time."""
        for step in range(10):
            await ctx.report_progress(step, 10, f"step {step}")
            await anyio.sleep(seconds / 10)
        return f"slept {seconds}"

    @server.tool(structured_output=False)
    async def write_slowly(seconds: float) -> str:
        """A non-read-only tool that takes a while."""
        await anyio.sleep(seconds)
        return "written"

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def big(size: int) -> str:
        """Return `size` characters of numbered lines."""
        lines = []
        total = 0
        number = 0
        while total < size:
            line = f"line {number:07d} " + "x" * 40
            lines.append(line)
            total += len(line) + 1
            number += 1
        return "\n".join(lines)[:size]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def picture() -> list[TextContent | ImageContent]:
        """Return a caption and a tiny image."""
        return [TextContent(text="a pixel"), ImageContent(data=PIXEL, mime_type="image/png")]

    @server.tool(annotations=READ_ONLY)
    async def weather(city: str) -> dict[str, object]:
        """Structured output."""
        return {"city": city, "temperature": 21.5}

    @server.tool(structured_output=False)
    async def fail(message: str) -> str:
        """Always fails with `message`."""
        raise ValueError(message)

    @server.tool(structured_output=False)
    async def crash() -> str:
        """End the server process at once (stdio tests of restarts)."""
        os._exit(3)

    @server.tool(structured_output=False)
    async def grow(tool_name: str, ctx: Context) -> str:
        """Add a tool named `tool_name` and announce the change."""

        async def added() -> str:
            return "added tool"

        server.add_tool(added, name=tool_name, description="A tool added at run time.")
        await ctx.session.send_tool_list_changed()
        return f"added {tool_name}"

    for index in range(extra_tools):

        async def extra(index: int = index) -> str:
            return f"extra {index}"

        server.add_tool(extra, name=f"{tool_prefix}tool_{index:03d}", description=f"Extra tool number {index}.")

    @server.resource("toy://readme", name="readme", description="A short text.")
    def readme() -> str:
        return f"readme of {name}"

    @server.resource("toy://items/{item}", name="item")
    def item(item: str) -> str:
        return f"item {item} of {name}"

    @server.prompt()
    def greet(who: str) -> str:
        """Greet someone."""
        return f"Hello {who} from {name}"

    return server


def main() -> None:
    """Run the toy server over stdio or streamable HTTP / SSE."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.toy")
    parser.add_argument("--name", default="toy")
    parser.add_argument("--extra-tools", type=int, default=0)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--transport", choices=["stdio", "streamable-http", "sse"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fail-at-start", action="store_true")
    parser.add_argument("--start-delay", type=float, default=0.0, help="seconds to wait before serving: a slow start")
    args = parser.parse_args()
    if args.fail_at_start:
        raise SystemExit("toy server refuses to start")
    time.sleep(args.start_delay)
    server = build_server(args.name, args.extra_tools, args.prefix)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run(args.transport, host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
