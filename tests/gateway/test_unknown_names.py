"""A tool name that misses only its namespace or its separator is answered with the caller's tools it meant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.access import KEYS, access_config, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.skills import text
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

# beta is extended, so the gateway offers Use_Tool; each role sees a different part of alpha and beta.
ROLES = {
    "admin": {"allow": ["*"]},
    "analyst": {"allow": ["alpha__*"]},
    "intern": {"allow": ["beta__echo"]},
}


@asynccontextmanager
async def caller(tmp_path: Path, role: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """A client signed in with `role`'s key, over HTTP, to a gateway in front of the toys alpha and beta."""
    servers = {"alpha": toy_entry(), "beta": toy_entry(layer="extended")}
    config = access_config(tmp_path, servers, roles=ROLES)
    transports = in_memory({"alpha": toy("alpha"), "beta": toy("beta")})
    async with (
        http_gateway(config, transports=transports) as (_, url),
        http_client(url, KEYS[role], mode=mode) as client,
    ):
        yield client


async def direct(client: Client, name: str) -> str:
    """The error message of a direct tools/call of `name`."""
    with pytest.raises(MCPError) as raised:
        await client.call_tool(name, {"a": 1, "b": 2})
    return raised.value.error.message


async def through_use_tool(client: Client, name: str) -> str:
    """The first line of the error result of calling `name` through Use_Tool."""
    result = await client.call_tool("Use_Tool", {"name": name, "arguments": {"a": 1, "b": 2}})
    assert result.is_error
    return text(result).splitlines()[0]


@pytest.mark.parametrize("name", ["alpha_add", "alpha.add", "alpha-add", "alpha/add", "alpha:add"])
async def test_a_name_with_another_separator_gets_did_you_mean_the_tool(tmp_path: Path, name: str) -> None:
    async with caller(tmp_path, "admin") as client:
        assert await direct(client, name) == f"Unknown tool: {name!r}. Did you mean 'alpha__add'?"
        assert await through_use_tool(client, name) == f"Use_Tool: no tool named {name!r}. Did you mean 'alpha__add'?"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_name_without_its_namespace_gets_every_visible_tool_it_could_mean(tmp_path: Path, mode: str) -> None:
    async with caller(tmp_path, "admin", mode) as client:
        assert await direct(client, "add") == "Unknown tool: 'add'. Did you mean 'alpha__add' or 'beta__add'?"
        assert await through_use_tool(client, "add") == (
            "Use_Tool: no tool named 'add'. Did you mean 'alpha__add' or 'beta__add'?"
        )


async def test_a_name_under_another_namespace_gets_no_suggestion(tmp_path: Path) -> None:
    async with caller(tmp_path, "admin") as client:
        assert await direct(client, "gamma__add") == "Unknown tool: 'gamma__add'"


async def test_only_the_callers_visible_tools_are_suggested(tmp_path: Path) -> None:
    async with caller(tmp_path / "analyst", "analyst") as client:
        assert await direct(client, "add") == "Unknown tool: 'add'. Did you mean 'alpha__add'?"
        assert await through_use_tool(client, "beta_add") == "Use_Tool: no tool named 'beta_add'"
    async with caller(tmp_path / "intern", "intern") as client:
        assert await direct(client, "echo") == "Unknown tool: 'echo'. Did you mean 'beta__echo'?"
        assert await direct(client, "alpha_echo") == "Unknown tool: 'alpha_echo'"
        assert await through_use_tool(client, "add") == "Use_Tool: no tool named 'add'"


async def test_a_near_miss_of_a_hidden_tool_is_answered_like_a_name_that_is_nothing(tmp_path: Path) -> None:
    async with caller(tmp_path, "intern") as client:
        nothing = await direct(client, "nothing")
        for hidden in ("alpha_add", "beta.add", "alpha__add"):
            assert await direct(client, hidden) == nothing.replace("'nothing'", repr(hidden))


async def test_a_misspelt_name_gets_did_you_mean_the_tool_directly_and_through_use_tool(tmp_path: Path) -> None:
    async with caller(tmp_path, "admin") as client:
        assert await direct(client, "alpha__ech") == "Unknown tool: 'alpha__ech'. Did you mean 'alpha__echo'?"
        assert await through_use_tool(client, "beta__incremnet") == (
            "Use_Tool: no tool named 'beta__incremnet'. Did you mean 'beta__increment'?"
        )


async def test_a_misspelt_name_of_a_hidden_tool_gets_no_suggestion(tmp_path: Path) -> None:
    async with caller(tmp_path / "analyst", "analyst") as client:
        assert await direct(client, "beta__ech") == "Unknown tool: 'beta__ech'"
        assert await through_use_tool(client, "beta__incremnet") == "Use_Tool: no tool named 'beta__incremnet'"
    async with caller(tmp_path / "intern", "intern") as client:
        assert await direct(client, "alpha__ech") == "Unknown tool: 'alpha__ech'"
