"""A stdio upstream for live changes (run as `python -m tests.support.worker MARKS`): each call
appends the server's process id and what it did to the file MARKS when it starts, so a test can
see which process ran it and that it ran once; `hold` also reports progress once it started, so a
client knows when it is in flight."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context


def main() -> None:
    """Serve `hold` and `count` over stdio, marking each call in the file named by the first argument."""
    marks = sys.argv[1]
    server = MCPServer("worker")
    state = {"count": 0}

    def mark(what: str) -> None:
        with open(marks, "a", encoding="utf-8") as file:
            file.write(f"{os.getpid()} {what}\n")

    @server.tool(structured_output=False)
    async def hold(label: str, seconds: float, ctx: Context) -> str:
        """A write that takes a while."""
        mark(f"hold {label}")
        await ctx.report_progress(0, seconds, "started")
        await anyio.sleep(seconds)
        return f"held {label} by {os.getpid()}"

    @server.tool(structured_output=False)
    async def count(n: int) -> str:
        """Count up (`n` tells calls apart); the count lives as long as the process."""
        state["count"] += 1
        mark(f"count {state['count']}")
        return f"{os.getpid()} {state['count']}"

    server.run("stdio")


if __name__ == "__main__":
    main()
