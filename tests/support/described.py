"""A server of tools known only by their names and descriptions, for the tests of tool search."""

from __future__ import annotations

from mcp.server import MCPServer


def described_server(name: str, tools: dict[str, str]) -> MCPServer:
    """A server named `name` with a tool per entry of `tools` (name -> description), each answering "done"."""
    server = MCPServer(name)
    for tool, description in tools.items():

        async def run(path: str = "") -> str:
            return "done"

        server.add_tool(run, name=tool, description=description, structured_output=False)
    return server
