"""Write ordering through a real gateway: per session and per server, so a hung server holds up only itself."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.server import MCPServer

from tests.support.harness import gateway_client, in_memory, make_config, placeholder

pytestmark = pytest.mark.anyio


class Holding:
    """An upstream whose `hold` write waits until the test releases it; `note` writes return at once."""

    def __init__(self, name: str) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()
        self.log: list[str] = []
        self.server = MCPServer(name)

        @self.server.tool(structured_output=False)
        async def hold() -> str:
            """Wait until released."""
            self.log.append("hold started")
            self.entered.set()
            await self.release.wait()
            self.log.append("hold done")
            return "held"

        @self.server.tool(structured_output=False)
        async def note(text: str) -> str:
            """Record `text`."""
            self.log.append(text)
            return f"noted {text}"


def text_of(result: types.CallToolResult) -> str:
    """Every text block of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_write_to_a_healthy_server_does_not_wait_behind_a_hung_write_to_another(tmp_path: Path) -> None:
    bad, good = Holding("bad"), Holding("good")
    config = make_config(tmp_path, placeholder(["bad", "good"]))
    transports = in_memory({"bad": bad.server, "good": good.server})
    results: dict[str, str] = {}

    async def call(name: str, arguments: dict[str, str]) -> None:
        results[name] = text_of(await client.call_tool(name, arguments))

    async with gateway_client(config, transports=transports) as (_, client), anyio.create_task_group() as group:
        try:
            group.start_soon(call, "bad__hold", {})
            with anyio.fail_after(20):
                await bad.entered.wait()
            group.start_soon(call, "bad__note", {"text": "after the hold"})
            # The second write to `bad` now waits in the gateway; nothing else can move.
            await anyio.wait_all_tasks_blocked()
            with anyio.fail_after(20):
                healthy = await client.call_tool("good__note", {"text": "meanwhile"})
            assert text_of(healthy) == "noted meanwhile"
            assert bad.log == ["hold started"]
            assert "bad__hold" not in results
        finally:
            bad.release.set()
    # Two writes to the same server in one session still land one at a time, in the order sent.
    assert bad.log == ["hold started", "hold done", "after the hold"]
    assert results == {"bad__hold": "held", "bad__note": "noted after the hold"}
