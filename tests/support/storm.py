"""A stdio server whose tool list keeps changing (run as `python -m tests.support.storm`): `storm`
adds tools one by one, announcing each with tools/list_changed; its one resource and one prompt
never change."""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context


def main() -> None:
    """Serve `storm`, a resource and a prompt over stdio."""
    server = MCPServer("storm")

    @server.tool(structured_output=False)
    async def storm(count: int, pause: float, ctx: Context) -> str:
        """Add `count` tools, `added_0` on, sending tools/list_changed after each and pausing `pause` seconds."""
        for index in range(count):

            async def added() -> str:
                return "added"

            server.add_tool(added, name=f"added_{index}", description="A tool added by the storm.")
            await ctx.session.send_tool_list_changed()
            await anyio.sleep(pause)
        return f"added {count} tools"

    @server.resource("storm://readme", name="readme", description="A text that stays.")
    def readme() -> str:
        return "the readme"

    @server.prompt()
    def greet(who: str) -> str:
        """Greet someone."""
        return f"Hello {who}"

    server.run("stdio")


if __name__ == "__main__":
    main()
