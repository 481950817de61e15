"""Servers nobody here wrote, aggregated through a real gateway over stdio: clients of both eras see
over HTTP what a direct SDK connection sees, and their tools answer."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.session import LoggingFnT
from mcp.server.subscriptions import ResourceUpdated

from gateway.catalog.naming import exposed_name
from gateway.upstreams.sdkclient import send_as_is
from tests.support.harness import http_gateway, make_config
from tests.support.node import require_node_command
from tests.support.waiting import Inbox

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Counts:
    """How many of each kind a client is offered, every page followed."""

    tools: int
    resources: int
    templates: int
    prompts: int


@dataclass(frozen=True)
class ThirdParty:
    """A third-party server: how to launch it, and one harmless call with a word its answer contains."""

    name: str
    launch: Callable[[], StdioServerParameters]
    tool: str
    arguments: dict[str, Any]
    answer: str


def _time_server() -> StdioServerParameters:
    command = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert command is not None, "mcp-server-time is missing from the environment; run scripts/setup"
    return StdioServerParameters(command=command, args=["--local-timezone", "UTC"])


def _everything_server() -> StdioServerParameters:
    return StdioServerParameters(command=str(require_node_command("mcp-server-everything")), args=["stdio"])


TIME = ThirdParty("time", _time_server, "get_current_time", {"timezone": "Europe/Paris"}, "Europe/Paris")
EVERYTHING = ThirdParty("everything", _everything_server, "echo", {"message": "through the gateway"}, "through")


async def _sample(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text="sampled"), model="test")


async def _elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def _roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


# A client that supports every server-to-client request: some servers offer tools only to such clients.
FULL_CLIENT: dict[str, Any] = {
    "sampling_callback": _sample,
    "elicitation_callback": _elicit,
    "list_roots_callback": _roots,
}


async def _pages(fetch: Callable[[str | None], Awaitable[tuple[int, str | None]]]) -> int:
    total, cursor = 0, None
    while True:
        count, cursor = await fetch(cursor)
        total += count
        if cursor is None:
            return total


async def counts(client: Client) -> Counts:
    """Every page of tools, resources, templates and prompts the client is offered."""

    async def tools(cursor: str | None) -> tuple[int, str | None]:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        return len(page.tools), page.next_cursor

    async def resources(cursor: str | None) -> tuple[int, str | None]:
        page = await client.list_resources(cursor=cursor, cache_mode="refresh")
        return len(page.resources), page.next_cursor

    async def templates(cursor: str | None) -> tuple[int, str | None]:
        page = await client.list_resource_templates(cursor=cursor, cache_mode="refresh")
        return len(page.resource_templates), page.next_cursor

    async def prompts(cursor: str | None) -> tuple[int, str | None]:
        page = await client.list_prompts(cursor=cursor, cache_mode="refresh")
        return len(page.prompts), page.next_cursor

    return Counts(await _pages(tools), await _pages(resources), await _pages(templates), await _pages(prompts))


def _entry(server: ThirdParty) -> dict[str, Any]:
    launch = server.launch()
    return {"command": launch.command, "args": list(launch.args)}


SERVERS = [
    pytest.param(TIME, id="mcp-server-time"),
    pytest.param(EVERYTHING, id="server-everything"),
]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("server", SERVERS)
async def test_a_third_party_server_offers_as_much_through_the_gateway_as_directly(
    tmp_path: Path, server: ThirdParty, mode: str
) -> None:
    async with Client(server.launch(), mode="legacy", **FULL_CLIENT) as direct:
        expected = await counts(direct)
    config = make_config(tmp_path, {server.name: _entry(server)})
    async with http_gateway(config) as (_, url), Client(f"{url}/mcp", mode=mode, **FULL_CLIENT) as client:
        through = await counts(client)
    assert through == expected


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize(
    "server", [pytest.param(TIME, id="mcp-server-time"), pytest.param(EVERYTHING, id="server-everything")]
)
async def test_a_third_party_server_s_tool_answers_through_the_gateway(
    tmp_path: Path, server: ThirdParty, mode: str
) -> None:
    config = make_config(tmp_path, {server.name: _entry(server)})
    async with http_gateway(config) as (_, url), Client(f"{url}/mcp", mode=mode) as client:
        result = await client.call_tool(exposed_name(server.name, server.tool), server.arguments)
    assert not result.is_error, result.content
    assert any(isinstance(item, types.TextContent) and server.answer in item.text for item in result.content)


async def test_server_everything_s_research_runs_as_a_task_through_the_gateway(tmp_path: Path) -> None:
    asked: list[str] = []

    async def clarify(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"interpretation": "technical"})

    config = make_config(tmp_path, {EVERYTHING.name: _entry(EVERYTHING)})
    tool = exposed_name(EVERYTHING.name, "simulate-research-query")
    async with (
        http_gateway(config) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy", elicitation_callback=clarify) as client,
    ):
        listed = {item.name: item for item in (await client.list_tools()).tools}
        # An ambiguous topic makes the server ask for a clarification while the client waits for the result.
        params = {"name": tool, "arguments": {"topic": "python", "ambiguous": True}, "task": {"ttl": 60000}}
        call = types.Request[dict[str, Any], str](method="tools/call", params=params)
        created = await send_as_is(client.session, call)
        task_id = created["task"]["taskId"]
        status = await send_as_is(client.session, _task_request("tasks/get", task_id))
        result = await send_as_is(client.session, _task_request("tasks/result", task_id))
        done = await send_as_is(client.session, _task_request("tasks/get", task_id))
        outcomes = [row.outcome for row in await gateway.audit.recent(tool=tool)]
    assert listed[tool].execution == types.ToolExecution(task_support="required")
    assert status["status"] in ("working", "input_required") and done["status"] == "completed"
    assert len(asked) == 1 and "Research Report: python (technical)" in result["content"][0]["text"]
    assert sorted(outcomes) == ["elicitation", "ok"]


async def test_server_everything_s_task_only_tool_answers_a_plain_2026_era_call_through_the_gateway(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def clarify(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"interpretation": "technical"})

    config = make_config(tmp_path, {EVERYTHING.name: _entry(EVERYTHING)})
    tool = exposed_name(EVERYTHING.name, "simulate-research-query")
    async with (
        http_gateway(config) as (_, url),
        Client(f"{url}/mcp", mode="2026-07-28", elicitation_callback=clarify) as client,
    ):
        discovered = await client.session.send_discover("2026-07-28")
        # The gateway runs the task on the server and answers the call with its result; the
        # server's question during the task reaches the client as input required.
        result = await client.call_tool(tool, {"topic": "python", "ambiguous": True})
    # That era has no tasks, and the gateway offers none.
    assert "tasks" not in discovered["capabilities"] and not discovered["capabilities"].get("extensions")
    assert not result.is_error, result.content
    assert len(asked) == 1 and "Research Report: python (technical)" in text_of(result)
    assert not (result.meta or {}).get("io.modelcontextprotocol/related-task")


async def test_server_everything_s_log_message_reaches_a_2026_era_client_on_its_call_s_stream(tmp_path: Path) -> None:
    tool = "toggle-simulated-logging"
    direct_logged: Inbox[Any] = Inbox()
    async with Client(EVERYTHING.launch(), mode="legacy", logging_callback=keeper(direct_logged)) as direct:
        await direct.call_tool(tool, {})
        await direct_logged.until(lambda: bool(direct_logged), "the server's first log message")
        await direct.call_tool(tool, {})
    config = make_config(tmp_path, {EVERYTHING.name: _entry(EVERYTHING)})
    async with http_gateway(config) as (_, url):
        for level, expected in (("debug", 1), (None, 0)):
            logged: Inbox[Any] = Inbox()
            options: dict[str, Any] = {"logging_callback": keeper(logged), "log_level": level}
            async with Client(f"{url}/mcp", mode="2026-07-28", **options) as client:
                await client.call_tool(exposed_name(EVERYTHING.name, tool), {})  # starts the server's logging
                # Sent during the call, it travels on the call's stream, before its answer; only
                # to a request that asked for log messages. The server also logs the roots it is
                # given when it first asks for them, which may fall within the same call.
                simulated = [entry for entry in logged if "Roots updated" not in str(entry)]
                assert len(simulated) == expected, (level, logged)
                await client.call_tool(exposed_name(EVERYTHING.name, tool), {})  # stops it
    assert len(direct_logged) >= 1


async def test_server_everything_s_resource_updates_reach_a_2026_era_listen_stream_through_the_gateway(
    tmp_path: Path,
) -> None:
    toggle = "toggle-subscriber-updates"
    direct_updates: Inbox[str] = Inbox()

    async def direct_handler(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            direct_updates.add(message.params.uri)

    async with Client(EVERYTHING.launch(), mode="legacy", message_handler=direct_handler) as direct:
        original = (await direct.list_resources()).resources[0].uri
        await direct.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=original)), types.EmptyResult
        )
        await direct.call_tool(toggle, {})
        await direct_updates.until(lambda: bool(direct_updates), "the server's first resource update")
        await direct.call_tool(toggle, {})
    config = make_config(tmp_path, {EVERYTHING.name: _entry(EVERYTHING)})
    exposed = f"{EVERYTHING.name}+{original}"
    async with http_gateway(config) as (_, url), Client(f"{url}/mcp", mode="2026-07-28") as client:
        discovered = await client.session.send_discover("2026-07-28")
        async with client.listen(resource_subscriptions=[exposed]) as stream:
            await client.call_tool(exposed_name(EVERYTHING.name, toggle), {})
            with anyio.fail_after(30):
                event = await anext(aiter(stream))
            await client.call_tool(exposed_name(EVERYTHING.name, toggle), {})
    assert direct_updates[0] == original
    assert discovered["capabilities"]["resources"]["subscribe"] is True
    assert stream.honored.resource_subscriptions == [exposed]
    assert event == ResourceUpdated(uri=exposed)


async def _roots_tool(client: Client, tool: str) -> str:
    return text_of(await client.call_tool(tool, {}))


async def _project_roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root.model_validate({"uri": "file:///home/ada/project", "name": "ada"})])


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_server_everything_s_roots_tool_names_the_roots_the_rule_gives_it_through_the_gateway(
    tmp_path: Path, mode: str
) -> None:
    async with Client(EVERYTHING.launch(), mode="legacy", list_roots_callback=_project_roots) as direct:
        said_directly = await _roots_tool(direct, "get-roots-list")
    assert "file:///home/ada/project" in said_directly
    tool = exposed_name(EVERYTHING.name, "get-roots-list")
    configured = tmp_path / "configured"
    # Shared: the roots its entry configures, whichever client calls (docs/decisions/0060-roots-of-shared-servers.md).
    shared = make_config(tmp_path, {EVERYTHING.name: {**_entry(EVERYTHING), "roots": [str(configured)]}})
    async with (
        http_gateway(shared) as (_, url),
        Client(f"{url}/mcp", mode=mode, list_roots_callback=_project_roots) as client,
    ):
        said_shared = await _roots_tool(client, tool)
    assert configured.as_uri() in said_shared and "/home/ada" not in said_shared
    # A session's own instance: its client's roots, as directly.
    scoped = make_config(tmp_path, {EVERYTHING.name: {**_entry(EVERYTHING), "scope": "session"}})
    async with (
        http_gateway(scoped) as (_, url),
        Client(f"{url}/mcp", mode=mode, list_roots_callback=_project_roots) as client,
    ):
        assert await _roots_tool(client, tool) == said_directly


def keeper(kept: Inbox[Any]) -> LoggingFnT:
    """A logging callback that keeps each message's data."""

    async def keep(params: types.LoggingMessageNotificationParams) -> None:
        kept.add(params.data)

    return keep


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _task_request(method: str, task_id: str) -> types.Request[dict[str, Any], str]:
    return types.Request[dict[str, Any], str](method=method, params={"taskId": task_id})
