"""An upstream that lies or floods is contained: the gateway keeps serving with clear errors."""

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.server import Server

from gateway.upstreams.listing import MAX_DESCRIPTION_CHARS
from tests.support.harness import REPO, gateway_client, in_memory, make_config, placeholder

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


def handwritten(mode: str) -> dict[str, Any]:
    """The config entry of `tests.support.handwritten` in `mode`."""
    return {"command": sys.executable, "args": ["-m", "tests.support.handwritten", mode], "cwd": str(REPO)}


@pytest.mark.anyio
async def test_a_result_holding_a_lone_surrogate_fails_its_call_at_once_and_the_call_is_audited(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path, {"odd": handwritten("lone-result")})
    async with gateway_client(config) as (gateway, client):
        result = await client.call_tool("odd__odd", {})
        rows = await gateway.audit.recent(1)
    assert result.is_error
    assert "The server's response cannot be read: unexpected end of hex escape" in result.content[0].text  # type: ignore[union-attr]
    assert [(row.tool, row.outcome) for row in rows] == [("odd__odd", "error")]


@pytest.mark.anyio
async def test_a_listing_holding_a_lone_surrogate_leaves_that_server_out_and_every_other_tool_listed(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path, {"odd": handwritten("lone-listing"), **placeholder(["hostile"])})
    transports = in_memory({"hostile": hostile_server()})
    async with gateway_client(config, transports=transports) as (gateway, client):
        names = {tool.name for tool in (await client.list_tools()).tools}
        status = {entry.name: entry for entry in gateway.servers.statuses()}["odd"]
    assert {"hostile__verbose", "hostile__broken"} <= names
    assert not any(name.startswith("odd__") for name in names)
    assert status.error is not None
    assert "The server's response cannot be read" in status.error
