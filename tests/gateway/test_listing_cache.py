"""tools/list pages are kept per visibility set and never outlive what they were built from."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from gateway.config.loading import parse_config
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.support.access import KEYS, ROLES, access_config, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory, make_config, toy_stdio, until_listed
from tests.support.skills import listed_names, skill_config, skill_gateway
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

META = ["List_Skills", "Load_Skill", "Unload_Skill", "Read_Skill_File", "Find_Tools", "Use_Tool"]


def _catalog_names(names: list[str]) -> set[str]:
    return {name for name in names if "__" in name}


async def test_two_roles_listing_the_same_endpoint_each_get_their_own_pages(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()})
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url):
        for mode in ("legacy", "2026-07-28"):
            for _ in range(2):  # the second round is served from kept pages
                async with http_client(url, KEYS["intern"], mode=mode) as intern:
                    assert _catalog_names(await listed_names(intern)) == {"toy__echo", "toy__add"}
                async with http_client(url, KEYS["analyst"], mode=mode) as analyst:
                    seen = _catalog_names(await listed_names(analyst))
                assert "toy__weather" in seen and "toy__increment" not in seen


async def test_a_reload_that_changes_a_role_s_rules_changes_its_kept_listing(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()})
    narrower = {**ROLES, "intern": {"allow": ["toy__echo"]}}
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url),
        http_client(url, KEYS["intern"]) as intern,
    ):
        assert _catalog_names(await listed_names(intern)) == {"toy__echo", "toy__add"}
        await gateway.reloader.reload(access_config(tmp_path, {"toy": toy_entry()}, roles=narrower))
        assert _catalog_names(await listed_names(intern)) == {"toy__echo"}


async def test_a_group_changed_by_a_reload_changes_the_listing_of_its_sessions(tmp_path: Path) -> None:
    def config(allow: list[str]) -> Any:
        data = {
            "gateway": {"data_dir": str(tmp_path / "data")},
            "servers": {"alpha": {"command": "unused"}, "beta": {"command": "unused"}},
            "groups": {"mine": {"allow": allow}},
        }
        return parse_config(data, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)

    transports = in_memory({"alpha": toy("alpha"), "beta": toy("beta")})
    async with (
        Gateway(config(["alpha__echo"]), transports=transports, local_group="mine") as gateway,
        Client(build_server(gateway), mode="legacy") as client,
    ):
        assert _catalog_names(await listed_names(client)) == {"alpha__echo"}
        await gateway.reloader.reload(config(["beta__add"]))
        assert _catalog_names(await listed_names(client)) == {"beta__add"}


async def test_a_registered_server_s_tools_appear_in_a_listing_kept_before(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": {"command": "unused"}})
    async with (
        Gateway(config, transports=in_memory({"toy": toy()})) as gateway,
        Client(build_server(gateway), mode="legacy") as client,
    ):
        before = await listed_names(client)
        assert "toy__echo" in before and not any(name.startswith("late__") for name in before)
        await gateway.servers.add({"name": "late", **toy_stdio("late")})
        await until_listed(client, "late__echo")


async def test_a_skill_loaded_in_one_session_lists_its_tools_there_and_nowhere_else(tmp_path: Path) -> None:
    async with (
        skill_gateway(skill_config(tmp_path, disclosure="list_changed")) as (gateway, client),
        Client(build_server(gateway), mode="legacy") as other,
    ):
        assert await listed_names(client) == await listed_names(other) == META
        await client.call_tool("Load_Skill", {"name": "counting"})
        assert await listed_names(client) == [*META, "toy__calls", "toy__increment"]
        assert await listed_names(other) == META
        await client.call_tool("Unload_Skill", {"name": "counting"})
        assert await listed_names(client) == META


async def test_pages_served_again_keep_their_cursors(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": {"command": "unused"}})
    async with (
        Gateway(config, transports=in_memory({"toy": toy(extra_tools=30)})) as gateway,
        Client(build_server(gateway, page_size=7), mode="legacy") as client,
    ):
        first = await _pages(client)
        second = await _pages(client)
        session = next(iter(gateway.sessions.live()))
        assert [name for page, _ in first for name in page] == [
            tool.name for tool in gateway.listing.listed_tools(session)
        ]
    assert first == second
    assert len(first) > 2


async def test_a_kept_page_holds_its_listing_once_as_json(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": {"command": "unused"}})
    async with Gateway(config, transports=in_memory({"toy": toy(extra_tools=200)})) as gateway:
        server = build_server(gateway)
        # A first listing, in the other era, builds what every listing shares (and a page of its own).
        async with Client(server, mode="2026-07-28") as other:
            await other.list_tools(cache_mode="bypass")
        tracemalloc.start(30)
        try:
            # The client keeps parts of what it was sent (output schemas): measured once it is gone.
            async with Client(server, mode="legacy") as client:
                wire = (await client.list_tools(cache_mode="bypass")).model_dump_json(by_alias=True, exclude_none=True)
            gc.collect()  # what the request's task left in reference cycles
            snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        async with Client(server, mode="legacy") as client:
            again = await client.list_tools(cache_mode="bypass")
    kept = snapshot.filter_traces([tracemalloc.Filter(True, "*/listingcache.py", all_frames=True)])
    held = sum(stat.size for stat in kept.statistics("filename"))
    assert len(wire) < held < 1.5 * len(wire)
    assert again.model_dump_json(by_alias=True, exclude_none=True) == wire


async def _pages(client: Client) -> list[tuple[list[str], str | None]]:
    pages: list[tuple[list[str], str | None]] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        pages.append(([tool.name for tool in page.tools], page.next_cursor))
        cursor = page.next_cursor
        if cursor is None:
            return pages
