"""A stateful MCP stdio server for the sandbox tests: its counter lives as long as its process."""

from __future__ import annotations

import os

import anyio
from mcp.server import MCPServer

server = MCPServer("counter")
state = {"count": 0}


@server.tool()
def increment() -> int:
    """Add one to the counter and return it."""
    state["count"] += 1
    return state["count"]


@server.tool()
async def wait(seconds: float) -> str:
    """Sleep, to test deadlines."""
    await anyio.sleep(seconds)
    return "woke up"


@server.tool()
def whoami() -> str:
    """The uid and working directory the server runs with."""
    return f"{os.getuid()} {os.getcwd()}"


if __name__ == "__main__":
    server.run("stdio")
