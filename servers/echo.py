"""An MCP server with one tool, `echo`, kept minimal for benchmarks and tests."""

from __future__ import annotations

import argparse

from mcp.server import MCPServer
from mcp.types import ToolAnnotations


def build_server() -> MCPServer:
    """Build the echo server."""
    server = MCPServer("echo", instructions="Echoes text back unchanged; meant for benchmarks and tests.")

    # Unstructured and async on purpose: no output validation and no worker-thread hop per call.
    @server.tool(
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    async def echo(text: str) -> str:
        """Return the given text unchanged."""
        return text

    return server


def main(argv: list[str] | None = None) -> None:
    """Run the echo server over stdio."""
    argparse.ArgumentParser(prog="python -m servers.echo", description=__doc__).parse_args(argv)
    build_server().run("stdio")


if __name__ == "__main__":
    main()
