"""Upstreams that misbehave on demand.

`python -m tests.support.faulty` is a stdio server that can stop answering (`freeze`) and write
garbage to its stdout and stderr (`garbage`); `pid` tells which process to kill. While the file
named by `FAULTY_DOWN` exists, it refuses to start, so a test can keep it down after a kill.

`stormy_server()` is an in-memory server that floods its client with list_changed (`storm`) or
progress (`progress`) notifications and counts how often it is asked for its tools.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server import MCPServer, Server
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
# Valid JSON-RPC with params that do not fit the method: the SDK's validation fails on each.
BAD_NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": "lots"}}


def main() -> None:
    """Serve over stdio, or refuse to start while the down file exists."""
    down = os.environ.get("FAULTY_DOWN")
    if down and Path(down).exists():
        print("faulty: kept down", file=sys.stderr, flush=True)
        raise SystemExit(1)
    # The SDK diverts fd 1 to stderr while it serves, so stray prints cannot corrupt the protocol;
    # garbage meant for the wire goes through a descriptor of the wire taken before.
    wire = os.dup(1)
    server = MCPServer("faulty")

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def pid() -> str:
        """This server's process id."""
        return str(os.getpid())

    @server.tool(structured_output=False)
    async def freeze() -> str:
        """Block the server's event loop: from now on it answers nothing, pings included."""
        time.sleep(3600)  # noqa: ASYNC251 - blocking the loop is the point
        return "thawed"

    @server.tool(structured_output=False)
    async def garbage(count: int) -> str:
        """Write `count` each of garbage lines, JSON that is not JSON-RPC and invalid notifications, and stderr spam."""
        lines = [b"this is not json at all\n", b'{"hello": "world"}\n', json.dumps(BAD_NOTIFICATION).encode() + b"\n"]
        for _ in range(count):
            for line in lines:
                os.write(wire, line)
            os.write(2, b"faulty: something went wrong again\n")
        return "dumped"

    server.run("stdio")


@dataclass
class Counts:
    """What the stormy server saw."""

    lists: int = 0


def stormy_server() -> tuple[Server[Any], Counts]:
    """A low-level server with `storm(count)` and `progress(count)`, and the count of its tools/list answers."""
    counts = Counts()
    tools = [
        types.Tool(name="storm", input_schema={"type": "object", "properties": {"count": {"type": "integer"}}}),
        types.Tool(name="progress", input_schema={"type": "object", "properties": {"count": {"type": "integer"}}}),
    ]
    grown: list[types.Tool] = []

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        counts.lists += 1
        return types.ListToolsResult(tools=tools + grown)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        count = int((params.arguments or {}).get("count", 0))
        if params.name == "storm":
            for index in range(count):
                if index == count - 1:
                    grown[:] = [types.Tool(name="calm", input_schema={"type": "object"})]
                await ctx.session.send_tool_list_changed()
        elif params.name == "progress":
            for index in range(1, count + 1):
                await ctx.session.report_progress(index, count, f"item {index}")
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name} done")])

    return Server("stormy", on_list_tools=list_tools, on_call_tool=call_tool), counts


if __name__ == "__main__":
    main()
