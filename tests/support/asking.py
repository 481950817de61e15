"""An upstream that asks its client for things: sampling, elicitation (form and URL), roots, log
messages and resource updates; run in memory, or `python -m tests.support.asking` over stdio."""

from __future__ import annotations

import warnings

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NOTE_URI = "note://today"


def build_server(name: str = "asking") -> MCPServer:
    """A server whose tools each put one request to the client and return what it answered."""
    # Sampling, roots and logging are deprecated in the 2026 era; this server still uses them.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    server = MCPServer(name)

    @server.tool(structured_output=False)
    async def ask_model(prompt: str, ctx: Context) -> str:
        """Ask the client's model, through sampling."""
        message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
        try:
            result = await ctx.session.create_message([message], max_tokens=50)
        except MCPError as error:
            return f"refused: {error.error.message}"
        content = result.content
        return f"model said: {content.text if isinstance(content, types.TextContent) else content}"

    @server.tool(structured_output=False)
    async def ask_user(ctx: Context) -> str:
        """Ask the client's user for a name, through form elicitation."""
        schema: types.ElicitRequestedSchema = {"type": "object", "properties": {"name": {"type": "string"}}}
        try:
            answer = await ctx.session.elicit_form("Your name?", schema)
        except MCPError as error:
            return f"refused: {error.error.message}"
        return f"{answer.action}: {(answer.content or {}).get('name')}"

    @server.tool(structured_output=False)
    async def open_page(ctx: Context) -> str:
        """Send the client's user to a page, through URL elicitation."""
        try:
            answer = await ctx.session.elicit_url("Sign in", "https://example.com/login", "login-1")
        except MCPError as error:
            return f"refused: {error.error.message}"
        return answer.action

    @server.tool(structured_output=False)
    async def roots(ctx: Context) -> str:
        """The client's roots, one URI a line."""
        result = await ctx.session.list_roots()
        return "\n".join(str(root.uri) for root in result.roots) or "no roots"

    @server.tool(structured_output=False)
    async def chatty(count: int, ctx: Context) -> str:
        """Log `count` messages at info level while working."""
        for number in range(count):
            await ctx.info(f"working {number}")
        return "done"

    @server.tool(structured_output=False)
    async def touch(ctx: Context) -> str:
        """Say that the note changed: to a handshake-era client subscribed to it, and on the
        2026-era listen streams that name it."""
        if ctx.request_context.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_resource_updated(NOTE_URI)
        else:
            await ctx.session.send_resource_updated(NOTE_URI)
        return "touched"

    @server.resource(NOTE_URI)
    def note() -> str:
        """Today's note."""
        return "a note"

    subscribed: set[str] = set()

    async def subscribe(ctx: object, params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.add(params.uri)
        return types.EmptyResult()

    async def unsubscribe(ctx: object, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscribed.discard(params.uri)
        return types.EmptyResult()

    @server.tool(structured_output=False)
    async def subscriptions() -> str:
        """The URIs the client is subscribed to."""
        return ",".join(sorted(subscribed)) or "none"

    # MCPServer has no decorator for subscriptions; its low-level server takes the handlers.
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    return server


def main() -> None:
    """Serve over stdio."""
    anyio.run(build_server().run_stdio_async)


if __name__ == "__main__":
    main()
