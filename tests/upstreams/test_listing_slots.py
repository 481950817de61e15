"""Upstreams share slots for their first listings: a server's re-listing after a change takes none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.lowlevel import checkpoint
from mcp.client._memory import InMemoryTransport
from mcp.server.lowlevel.server import Server

from gateway.catalog.merged import SourceListing
from gateway.catalog.tools import ToolRecord
from gateway.config.model import GatewaySettings, ServerConfig
from gateway.upstreams.connection import State, Upstream
from gateway.upstreams.listing import ListingSlots
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

TOOL = types.Tool(name="change", input_schema={"type": "object"})


def changing_then_hanging(relisting: anyio.Event) -> Server[Any]:
    """A server that lists one tool, says its list changed when that tool is called, then never lists again."""
    listings = 0

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        nonlocal listings
        listings += 1
        if listings > 1:
            relisting.set()
            await anyio.sleep_forever()
        return types.ListToolsResult(tools=[TOOL])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[])

    return Server("changing", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_no_more_listings_run_at_once_than_there_are_slots() -> None:
    slots = ListingSlots(size=2, patience=60)
    running, most = 0, 0

    async def listing() -> None:
        nonlocal running, most
        async with slots.slot():
            running += 1
            most = max(most, running)
            for _ in range(5):
                await checkpoint()
            running -= 1

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(listing)

    assert most == 2


async def test_a_listing_that_never_ends_holds_up_the_next_only_for_the_patience() -> None:
    slots = ListingSlots(size=1, patience=0.05)
    holding = anyio.Event()

    async def never_ends() -> None:
        async with slots.slot():
            holding.set()
            await anyio.sleep_forever()

    went_ahead = False
    # A bound on the test, far above the patience.
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(never_ends)
            await holding.wait()
            async with slots.slot():
                went_ahead = True
            group.cancel_scope.cancel()

    assert went_ahead


async def test_a_server_hanging_in_a_re_listing_holds_no_slot_from_another_server_s_first_listing(
    tmp_path: Path,
) -> None:
    # One slot, and a listing would wait for it for good.
    slots = ListingSlots(size=1, patience=3600)
    settings = GatewaySettings(data_dir=tmp_path, upstream_connect_timeout=60)
    records: dict[str, tuple[ToolRecord, ...]] = {}

    async def on_listing(listing: SourceListing) -> None:
        records[listing.source] = listing.tools

    relisting = anyio.Event()
    first = Upstream(
        ServerConfig(name="first", transport="stdio", command="unused"),
        settings,
        on_listing,
        transport=lambda: InMemoryTransport(changing_then_hanging(relisting)),
        listing_slots=slots,
    )
    second = Upstream(
        ServerConfig(name="second", transport="stdio", command="unused"),
        settings,
        on_listing,
        transport=lambda: InMemoryTransport(toy()),
        listing_slots=slots,
    )
    # A bound on the test only.
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(first.run)
            await first.first_attempt.wait()
            assert first.status().state == State.READY
            await first.call_tool(records["first"][0], {}, None)
            await relisting.wait()
            group.start_soon(second.run)
            # Within its connect timeout, or its first attempt fails.
            await second.first_attempt.wait()
            assert second.status().state == State.READY
            group.cancel_scope.cancel()

    assert "echo" in {record.name for record in records["second"]}
