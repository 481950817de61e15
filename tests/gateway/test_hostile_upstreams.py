"""An upstream that lies or floods is contained: the gateway keeps serving with clear errors."""

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.server import Server

from gateway.upstreams.listing import MAX_DESCRIPTION_CHARS
from tests.support.harness import gateway_client, in_memory, make_config, placeholder

HUGE = "Describes itself at length. " * 20_000
BROKEN_SCHEMA = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}


def hostile_server() -> Server[Any]:
    """A low-level server listing a tool with a huge description and one with a broken schema."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name="verbose", description=HUGE, input_schema={"type": "object"}),
                types.Tool(name="broken", description="x", input_schema=BROKEN_SCHEMA),
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=f"ran {params.name}")])

    return Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.anyio
async def test_a_huge_tool_description_is_cut_before_it_reaches_clients(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["hostile"]))
    async with gateway_client(config, transports=in_memory({"hostile": hostile_server()})) as (_, client):
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    description = listed["hostile__verbose"].description or ""
    assert len(description) < MAX_DESCRIPTION_CHARS + 100
    assert description.endswith("characters cut]")


@pytest.mark.anyio
async def test_a_tool_with_an_invalid_schema_fails_clearly_and_the_others_still_work(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["hostile"]))
    async with gateway_client(config, transports=in_memory({"hostile": hostile_server()})) as (_, client):
        broken = await client.call_tool("hostile__broken", {})
        fine = await client.call_tool("hostile__verbose", {})
    assert broken.is_error
    assert "schema" in broken.content[0].text.lower()  # type: ignore[union-attr]
    assert "Traceback" not in broken.content[0].text  # type: ignore[union-attr]
    assert fine.content[0].text == "ran verbose"  # type: ignore[union-attr]
