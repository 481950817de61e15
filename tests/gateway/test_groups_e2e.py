"""Tool groups over real HTTP: each group's endpoint shows the group's tools, intersected with the role."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from gateway.errors import ConfigError, ConflictError, NotFoundError
from gateway.service import Gateway
from gateway.skills.metatools import records as meta_records
from tests.support.access import KEYS, access_config, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.skills import ToolListChanges, structured, write_skill
from tests.support.toy import build_server as toy
from tests.support.waiting import tried_to_connect

pytestmark = pytest.mark.anyio

GROUPS: dict[str, Any] = {
    "adding": {"description": "Add and echo", "allow": ["*__add", "*__echo"], "deny": [{"server": "other"}]},
    "counting": {"allow": ["toy__increment", "toy__calls"]},
    "otherside": {"allow": [{"server": "other"}]},
}
HEADERS = {"Authorization": f"Bearer {KEYS['admin']}", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
META = {tool.name for tool in meta_records(with_skills=True, with_search=True)}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The backend, for the whole module: one gateway serves every test of the module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Gateway, str]]:
    """A gateway over two toy servers, with roles, groups and two skills, over real HTTP."""
    tmp_path = tmp_path_factory.mktemp("groups")
    write_skill(tmp_path / "skills", "adding", "toy__add")
    write_skill(tmp_path / "skills", "elsewhere", "other__*")
    config = access_config(
        tmp_path,
        {"toy": toy_entry(), "other": toy_entry()},
        groups=GROUPS,
        skill_dirs=[str(tmp_path / "skills")],
    )
    async with http_gateway(config, transports=in_memory({"toy": toy("toy"), "other": toy("other")})) as served:
        yield served


async def _listed(url: str, role: str, group: str, mode: str = "legacy") -> set[str]:
    async with http_client(url, KEYS[role], mode=mode, path=f"/mcp/g/{group}") as client:
        return {tool.name for tool in (await client.list_tools()).tools} - META


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_client_of_a_group_endpoint_sees_only_that_group_s_tools(
    served: tuple[Gateway, str], mode: str
) -> None:
    _, url = served
    assert await _listed(url, "admin", "adding", mode) == {"toy__add", "toy__echo"}
    assert await _listed(url, "admin", "otherside", mode) == {
        tool.name for tool in served[0].catalog.tools if tool.source == "other"
    }


@pytest.mark.parametrize(
    ("role", "group", "expected"),
    [
        # increment is high-risk, which the analyst's role denies.
        ("analyst", "counting", {"toy__calls"}),
        ("intern", "counting", set()),
        ("intern", "adding", {"toy__add", "toy__echo"}),
        ("analyst", "otherside", set()),
    ],
)
async def test_a_group_endpoint_shows_the_intersection_of_role_and_group(
    served: tuple[Gateway, str], role: str, group: str, expected: set[str]
) -> None:
    gateway, url = served
    assert await _listed(url, role, group) == expected
    assert {tool.name for tool in gateway.groups.tools(group, role)} == expected


async def test_a_tool_outside_the_group_is_unknown_on_every_call_path(served: tuple[Gateway, str]) -> None:
    _, url = served
    async with http_client(url, KEYS["admin"], path="/mcp/g/adding") as client:
        with pytest.raises(MCPError, match="Unknown tool: 'other__echo'"):
            await client.call_tool("other__echo", {"text": "x"})
        assert (await client.call_tool("toy__echo", {"text": "hi"})).is_error is False
        through = await client.call_tool("Use_Tool", {"name": "toy__increment", "arguments": {}})
        assert through.is_error
        found = structured(await client.call_tool("Find_Tools", {"query": "echo", "limit": 50}))["tools"]
        assert {row["name"] for row in found} == {"toy__echo"}
    # What the SDK asks before checking a 2026-era call's routing headers: nothing of a tool outside the group.
    assert served[0].listing.input_schema("other__echo", "admin", "adding") is None
    assert served[0].listing.input_schema("toy__echo", "admin", "adding") is not None


async def test_skills_resources_and_prompts_follow_the_group(served: tuple[Gateway, str]) -> None:
    _, url = served
    async with http_client(url, KEYS["admin"], path="/mcp/g/otherside") as client:
        skills = structured(await client.call_tool("List_Skills", {}))["skills"]
        prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
        resources = [resource.uri for resource in (await client.list_resources()).resources]
        with pytest.raises(MCPError, match="Unknown prompt"):
            await client.get_prompt("toy__greet", {"who": "x"})
    # "adding" brings only toy__add, outside this group; "elsewhere" brings the other server's tools.
    assert skills == ["elsewhere"]
    assert prompts == ["other__greet"]
    assert all(uri.startswith("skill://elsewhere/") or "other" in uri for uri in resources), resources


async def test_an_unknown_group_answers_404_and_every_group_endpoint_needs_credentials(
    served: tuple[Gateway, str],
) -> None:
    _, url = served
    async with httpx2.AsyncClient(timeout=30) as http:
        unknown = await http.post(f"{url}/mcp/g/nope", json=INITIALIZE, headers=HEADERS)
        anonymous = await http.post(f"{url}/mcp/g/adding", json=INITIALIZE)
    assert (unknown.status_code, unknown.json()) == (404, {"error": "No group 'nope'"})
    assert anonymous.status_code == 401


async def test_a_session_opened_on_a_group_is_not_found_at_another_endpoint(served: tuple[Gateway, str]) -> None:
    _, url = served
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(f"{url}/mcp/g/adding", json=INITIALIZE, headers=HEADERS)
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        await http.post(
            f"{url}/mcp/g/adding", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        elsewhere = await http.post(f"{url}/mcp", json=listing, headers=session)
    assert "Session not found" in elsewhere.text


async def test_a_group_added_through_the_facade_is_served_told_and_removed(served: tuple[Gateway, str]) -> None:
    gateway, url = served
    added = await gateway.groups.add({"name": "fresh", "description": "echo only", "allow": ["toy__echo"]})
    assert (added.source, gateway.groups.require("fresh").description) == ("api", "echo only")
    changes = ToolListChanges()
    async with http_client(url, KEYS["admin"], path="/mcp/g/fresh", message_handler=changes) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} - META == {"toy__echo"}
        await gateway.groups.remove("fresh")
        await changes.wait()
    with pytest.raises(NotFoundError, match="No group 'fresh'"):
        gateway.groups.require("fresh")
    async with httpx2.AsyncClient(timeout=30) as http:
        gone = await http.post(f"{url}/mcp/g/fresh", json=INITIALIZE, headers=HEADERS)
    assert gone.status_code == 404


async def test_groups_of_the_file_are_read_only_and_names_are_unique(served: tuple[Gateway, str]) -> None:
    gateway, _ = served
    with pytest.raises(ConflictError):
        await gateway.groups.add({"name": "adding", "allow": ["*"]})
    with pytest.raises(ConflictError, match="configuration file"):
        await gateway.groups.remove("adding")
    with pytest.raises(ConfigError, match=r"groups\.bad\.allow\[0\]\.risk"):
        await gateway.groups.add({"name": "bad", "allow": [{"risk": "extreme"}]})
    with pytest.raises(NotFoundError):
        await gateway.groups.remove("never")
    assert [group.name for group in gateway.groups.all()] == list(GROUPS)


async def test_an_api_group_survives_a_restart_and_a_file_group_wins_a_name_clash(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, groups={"adding": GROUPS["adding"]})
    async with Gateway(config, transports=in_memory({"toy": toy("toy")})) as gateway:
        await gateway.groups.add({"name": "kept", "allow": ["toy__echo"]})
        # As if the file had gained a group of that name since it was registered through the API.
        gateway.registrations.save("group", "adding", {"allow": ["toy__increment"]})
    async with Gateway(config, transports=in_memory({"toy": toy("toy")})) as again:
        await tried_to_connect(again)
        assert [(group.name, group.source) for group in again.groups.all()] == [("adding", "file"), ("kept", "api")]
        assert [tool.name for tool in again.groups.tools("kept", "admin")] == ["toy__echo"]
        assert {tool.name for tool in again.groups.tools("adding", "admin")} == {"toy__add", "toy__echo"}
