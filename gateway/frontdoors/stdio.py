"""The stdio front door: one client that launched the gateway as a command, over stdin and stdout."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from gateway.auth.identity import Identity
from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway


async def serve_stdio(config: GatewayConfig, identity: Identity) -> None:
    """Serve MCP over stdin/stdout as `identity` until the client closes them."""
    async with Gateway(config, local_identity=identity) as gateway:
        server = build_server(gateway)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
