"""Who may see what: every role, against every tool, on every path a client can take, over real HTTP.

The expected visibility is written out here from the role rules, not computed by the policy code,
so a mistake in the policy shows up as a difference. A hidden tool must be indistinguishable from
a tool that does not exist: same error, same absence from every listing and search.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import httpx2
import mcp_types as types
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import Field

from gateway.service import Gateway
from gateway.skills.metatools import records as meta_records
from tests.support.access import KEYS, TOY_TOOLS, access_config, auth_section, http_client, toy_entry
from tests.support.access import ROLES as ROLE_RULES
from tests.support.harness import REPO, http_gateway, in_memory, toy_stdio, until_listed
from tests.support.skills import structured, text, write_skill
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

ROLES = ["admin", "analyst", "intern", "none"]
UNKNOWN = "toy__no_such_tool"
HIGH_RISK = {"toy__increment", "toy__fail"}
VISIBLE: dict[str, Callable[[str], bool]] = {
    "admin": lambda name: True,
    "analyst": lambda name: name.startswith("toy__") and name not in HIGH_RISK,
    "intern": lambda name: name in {"toy__echo", "toy__add"},
    "none": lambda name: False,
}
SKILLS = {
    "admin": {"adding", "counting", "elsewhere", "secret", "notes"},
    # counting keeps toy__calls; elsewhere brings only tools of the hidden server; secret names admin only.
    "analyst": {"adding", "counting", "notes"},
    "intern": {"adding", "notes"},
    "none": set(),
}
SEES_OTHER_SERVER = {"admin"}
SEES_TOY_SERVER = {"admin", "analyst", "intern"}
STATELESS = "2026-07-28"
HEADER_MISMATCH = -32020


def _routed(server: MCPServer) -> MCPServer:
    """`server` with a tool whose `region` argument travels as the 2026-era `Mcp-Param-Region` header too."""

    async def locate(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Locate a region."""
        return f"located {region}"

    server.add_tool(locate, name="locate", structured_output=False)
    return server


def _skills(root: Path) -> Path:
    write_skill(root, "adding", "toy__add")
    write_skill(root, "counting", "toy__increment toy__calls")
    write_skill(root, "elsewhere", "other__*")
    write_skill(root, "secret", "toy__echo", roles="admin")
    write_skill(root, "notes")
    return root


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The backend, for the whole module: one gateway per role serves every test of the module."""
    return "asyncio"


@pytest.fixture(scope="module", params=ROLES)
async def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """A gateway over two toy servers with skills, for callers signing in with one role's API key.

    `none` is a caller with no role: authentication is off, so it comes in anonymous.
    """
    role: str = request.param
    tmp_path = tmp_path_factory.mktemp(f"matrix-{role}")
    auth = auth_section(enabled=False) if role == "none" else auth_section()
    config = access_config(
        tmp_path,
        {"toy": toy_entry(), "other": toy_entry()},
        auth=auth,
        skill_dirs=[str(_skills(tmp_path / "skills"))],
    )
    transports = in_memory({"toy": _routed(toy("toy")), "other": _routed(toy("other"))})
    async with http_gateway(config, transports=transports) as (gateway, url):
        yield Served(role, gateway, url)


@dataclass(frozen=True)
class Served:
    """A running gateway and the role its callers have."""

    role: str
    gateway: Gateway
    url: str


@asynccontextmanager
async def gateway_as(served: Served, *, mode: str = "legacy") -> AsyncIterator[tuple[str, Gateway, Client]]:
    """The role, the gateway, and a fresh client signed in with the role's key."""
    async with http_client(served.url, KEYS.get(served.role), mode=mode) as client:
        yield served.role, served.gateway, client


def _all_tools(gateway: Gateway) -> list[str]:
    names = [tool.name for tool in gateway.catalog.tools]
    assert {"toy__echo", "other__echo", "toy__increment", "toy__locate", "other__locate"} <= set(names)
    return names


async def _protocol_error(client: Client, name: str, arguments: dict[str, Any]) -> types.ErrorData:
    with pytest.raises(MCPError) as raised:
        await client.call_tool(name, arguments)
    return raised.value.error


def _anonymised(error: types.ErrorData, name: str) -> tuple[int, str, Any]:
    return error.code, error.message.replace(name, "<name>"), error.data


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_tools_list_shows_exactly_the_tools_of_the_role(served: Served, mode: str) -> None:
    async with gateway_as(served, mode=mode) as (role, gateway, client):
        listed = {tool.name for tool in (await client.list_tools()).tools}
        expected = {name for name in _all_tools(gateway) if VISIBLE[role](name)}
        meta = {tool.name for tool in meta_records(with_skills=True, with_search=True)}
    assert listed - meta == expected


async def test_a_hidden_tool_called_by_name_gets_the_answer_of_a_tool_that_does_not_exist(served: Served) -> None:
    async with gateway_as(served) as (role, gateway, client):
        unknown = _anonymised(await _protocol_error(client, UNKNOWN, {}), UNKNOWN)
        for name in _all_tools(gateway):
            if VISIBLE[role](name):
                continue
            hidden = await _protocol_error(client, name, {"text": "x"})
            assert _anonymised(hidden, name) == unknown, name


async def test_a_visible_tool_is_reached_by_name(served: Served) -> None:
    async with gateway_as(served) as (role, gateway, client):
        for name in _all_tools(gateway):
            if VISIBLE[role](name):
                # Empty arguments: the call reaches the tool (or its argument check), never "unknown tool".
                result = await client.call_tool(name, {})
                assert "Unknown tool" not in text(result), name


async def _stateless_call(served: Served, name: str, header_name: str, header_region: str) -> tuple[int, str, Any]:
    """A raw 2026-era tools/call of `name` with `region: south` in the body and the given routing headers;
    the HTTP status, the JSON-RPC error code and its message with `name` anonymised."""
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
    params = {"name": name, "arguments": {"region": "south"}, "_meta": meta}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": STATELESS,
        "Mcp-Method": "tools/call",
        "Mcp-Name": header_name,
        "Mcp-Param-Region": header_region,
    }
    if served.role in KEYS:
        headers["Authorization"] = f"Bearer {KEYS[served.role]}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(f"{served.url}/mcp", json=body, headers=headers)
    error = response.json()["error"]
    return response.status_code, error["code"], error["message"].replace(name, "<name>")


@pytest.mark.parametrize("routing", ["region header differs", "name header differs"])
async def test_a_hidden_tool_called_with_mismatched_routing_headers_gets_the_answer_of_an_unknown_tool(
    served: Served, routing: str
) -> None:
    def answer(name: str) -> Any:
        if routing == "region header differs":
            return _stateless_call(served, name, name, "north")
        return _stateless_call(served, name, "not_this_tool", "south")

    unknown = await answer(UNKNOWN)
    for name in _all_tools(served.gateway):
        if not VISIBLE[served.role](name):
            assert await answer(name) == unknown, name
    if VISIBLE[served.role]("toy__locate"):
        # A tool the caller may see is still held to its routing headers.
        assert (await answer("toy__locate"))[1] == HEADER_MISMATCH


async def test_use_tool_answers_a_hidden_tool_like_a_tool_that_does_not_exist(served: Served) -> None:
    async with gateway_as(served) as (role, gateway, client):
        unknown = await client.call_tool("Use_Tool", {"name": UNKNOWN, "arguments": {}})
        assert unknown.is_error
        for name in _all_tools(gateway):
            result = await client.call_tool("Use_Tool", {"name": name, "arguments": {"text": "x"}})
            same = result.is_error and text(result).replace(name, "<name>") == text(unknown).replace(UNKNOWN, "<name>")
            assert same != VISIBLE[role](name), name


@pytest.mark.parametrize("mode", ["legacy", STATELESS])
async def test_a_10_kb_name_after_any_tools_name_gets_the_cut_answer_of_a_tool_that_does_not_exist(
    served: Served, mode: str
) -> None:
    async with gateway_as(served, mode=mode) as (_, gateway, client):
        for name in [UNKNOWN, *_all_tools(gateway)]:
            long = name + "_" * 10_240
            shown = repr(long[:99] + "…")
            error = await _protocol_error(client, long, {})
            assert (error.code, error.message) == (types.INVALID_PARAMS, f"Unknown tool: {shown}"), name
            result = await client.call_tool("Use_Tool", {"name": long, "arguments": {}})
            assert result.is_error and text(result).splitlines()[0] == f"Use_Tool: no tool named {shown}", name


async def test_find_tools_finds_only_the_tools_of_the_role(served: Served) -> None:
    async with gateway_as(served) as (role, gateway, client):
        found: set[str] = set()
        for name in _all_tools(gateway):
            query = name.split("__", 1)[1].replace("_", " ")
            rows = structured(await client.call_tool("Find_Tools", {"query": query, "limit": 50}))["tools"]
            found |= {row["name"] for row in rows}
            hidden_skills = {skill for row in rows for skill in row["skills"]} - SKILLS[role]
            assert not hidden_skills, query
        expected = {name for name in _all_tools(gateway) if VISIBLE[role](name)}
    assert found == expected


async def test_list_skills_shows_only_skills_the_role_may_use(served: Served) -> None:
    async with gateway_as(served) as (role, _, client):
        listed = structured(await client.call_tool("List_Skills", {}))["skills"]
    assert set(listed) == SKILLS[role]


async def test_the_skill_tool_schemas_name_no_skill_the_role_may_not_see(served: Served) -> None:
    async with gateway_as(served) as (role, _, client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name in ("Load_Skill", "Unload_Skill", "Read_Skill_File"):
        enum = set(tools[name].input_schema["properties"]["name"].get("enum", ()))
        assert enum <= SKILLS[role], name


async def test_load_skill_refuses_a_hidden_skill_like_an_unknown_one_and_brings_only_visible_tools(
    served: Served,
) -> None:
    all_skills = SKILLS["admin"]
    async with gateway_as(served) as (role, gateway, client):
        unknown = await client.call_tool("Load_Skill", {"name": "no_such_skill"})
        for skill in sorted(all_skills):
            result = await client.call_tool("Load_Skill", {"name": skill})
            if skill in SKILLS[role]:
                tools = set(structured(result)["tools"])
                assert all(VISIBLE[role](tool) for tool in tools), skill
                assert not any(hidden in text(result) for hidden in _all_tools(gateway) if not VISIBLE[role](hidden))
            else:
                assert result.is_error
                assert text(result).replace(skill, "<name>") == text(unknown).replace("no_such_skill", "<name>")


async def test_resources_of_a_server_whose_tools_are_all_hidden_are_hidden_too(served: Served) -> None:
    async with gateway_as(served) as (role, _, client):
        uris = {resource.uri for resource in (await client.list_resources()).resources}
        templates = {template.uri_template for template in (await client.list_resource_templates()).resource_templates}
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("toy+toy://no-such-resource")
        servers = {"toy": role in SEES_TOY_SERVER, "other": role in SEES_OTHER_SERVER}
        for server, visible in servers.items():
            readme = f"{server}+toy://readme"
            assert (readme in uris) == visible, readme
            assert any(t.startswith(f"{server}+") for t in templates) == visible, server
            if visible:
                read = await client.read_resource(readme)
                assert isinstance(read.contents[0], types.TextResourceContents)
                assert read.contents[0].text == f"readme of {server}"
            else:
                with pytest.raises(MCPError) as hidden:
                    await client.read_resource(readme)
                assert hidden.value.code == unknown.value.code


async def test_prompts_of_a_server_whose_tools_are_all_hidden_are_hidden_too(served: Served) -> None:
    async with gateway_as(served) as (role, _, client):
        names = {prompt.name for prompt in (await client.list_prompts()).prompts}
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("toy__no_such_prompt", {"who": "x"})
        servers = {"toy": role in SEES_TOY_SERVER, "other": role in SEES_OTHER_SERVER}
        for server, visible in servers.items():
            prompt = f"{server}__greet"
            assert (prompt in names) == visible, prompt
            if visible:
                got = await client.get_prompt(prompt, {"who": "Bo"})
                assert isinstance(got.messages[0].content, types.TextContent)
                assert got.messages[0].content.text == f"Hello Bo from {server}"
            else:
                with pytest.raises(MCPError) as hidden:
                    await client.get_prompt(prompt, {"who": "Bo"})
                assert _anonymised(hidden.value.error, prompt) == _anonymised(
                    unknown.value.error, "toy__no_such_prompt"
                )


async def test_a_stdio_client_launched_with_a_role_sees_only_that_roles_tools(tmp_path: Path) -> None:
    config_file = tmp_path / "gateway.yaml"
    document = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "servers": {"toy": {**toy_stdio(), "tools": TOY_TOOLS}},
        "roles": ROLE_RULES,
    }
    config_file.write_text(yaml.safe_dump(document), encoding="utf-8")
    command = ["-m", "gateway", "--log-level", "WARNING", "stdio", "--config", str(config_file)]
    params = StdioServerParameters(
        command=sys.executable, args=[*command, "--role", "intern", "--caller", "ivy"], cwd=str(REPO)
    )
    with anyio.fail_after(30):
        async with Client(params, mode="legacy") as client:
            await until_listed(client, "toy__echo")
            listed = {tool.name for tool in (await client.list_tools()).tools}
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("toy__increment", {})
            echoed = await client.call_tool("toy__echo", {"text": "as intern"})
    assert listed == {"toy__echo", "toy__add"}
    assert hidden.value.message == "Unknown tool: 'toy__increment'"
    assert text(echoed) == "as intern"
