"""What an upstream asks of or tells its client passes through a real gateway to the client whose
call caused it: sampling, elicitation, roots, log messages, resource updates; budgets and audit."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.session import LoggingFnT
from mcp.server import MCPServer, Server
from mcp.server.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning

from gateway.frontdoors.listen import MAX_RESOURCES
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from gateway.serving.passthrough import LogThrottle
from tests.support.access import ROLES, access_config, http_client
from tests.support.asking import NOTE_URI
from tests.support.asking import build_server as asking
from tests.support.flaky import DroppingLink
from tests.support.harness import (
    REPO,
    collector,
    gateway_client,
    http_gateway,
    in_memory,
    make_config,
    placeholder,
    until_listed,
)
from tests.support.skills import text
from tests.support.waiting import Inbox, poll_until

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore", category=MCPDeprecationWarning)]

NOTE = f"asking+{NOTE_URI}"


async def sample(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """The client's model, which echoes the prompt back."""
    prompt = params.messages[0].content
    said = prompt.text if isinstance(prompt, types.TextContent) else "?"
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text=said.upper()), model="test")


async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The client's user, who answers every form with the name Ada."""
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def my_roots(context: ClientRequestContext) -> types.ListRootsResult:
    """The client's own roots."""
    return types.ListRootsResult(roots=[types.Root.model_validate({"uri": "file:///home/ada/project"})])


def config(tmp_path: Path, **settings: Any) -> Any:
    return make_config(tmp_path, placeholder(["asking"]), **settings)


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    with anyio.fail_after(30):
        return text(await client.call_tool(f"asking__{tool}", arguments or {}))


async def test_an_upstream_s_sampling_request_reaches_the_calling_client_and_is_audited(tmp_path: Path) -> None:
    transports = in_memory({"asking": asking()})
    async with gateway_client(config(tmp_path), transports=transports, sampling_callback=sample) as (gateway, client):
        assert await call(client, "ask_model", {"prompt": "hello"}) == "model said: HELLO"
        rows = await gateway.audit.recent(tool="asking__ask_model")
    assert [row.outcome for row in rows] == ["ok", "sampling"]
    assert "server 'asking'" in rows[1].detail


async def test_a_client_without_sampling_gets_the_protocol_s_error_not_a_hang(tmp_path: Path) -> None:
    async with gateway_client(config(tmp_path), transports=in_memory({"asking": asking()})) as (_, client):
        assert await call(client, "ask_model", {"prompt": "hello"}) == "refused: Sampling not supported"
        assert await call(client, "ask_user") == "refused: Elicitation not supported"


async def test_form_and_url_elicitation_reach_the_calling_client(tmp_path: Path) -> None:
    transports = in_memory({"asking": asking()})
    async with gateway_client(config(tmp_path), transports=transports, elicitation_callback=elicit) as (gw, client):
        assert await call(client, "ask_user") == "accept: Ada"
        assert await call(client, "open_page") == "accept"
        outcomes = {row.outcome for row in await gw.audit.recent()}
    assert "elicitation" in outcomes


async def test_sampling_counts_against_the_caller_s_budget(tmp_path: Path) -> None:
    roles = {**ROLES, "user": {"allow": ["*"], "budget": {"max_calls_per_session": 2}}}
    cfg = access_config(tmp_path, placeholder(["asking"]), roles=roles, auth=None, stdio_role="user")
    transports = in_memory({"asking": asking()})
    async with gateway_client(cfg, transports=transports, sampling_callback=sample) as (gateway, client):
        await call(client, "roots")
        answer = await call(client, "ask_model", {"prompt": "hello"})
        rows = await gateway.audit.recent(tool="asking__ask_model")
    assert answer.startswith("refused: Refused: this session has used all 2 calls")
    assert "refused:budget" in [row.outcome for row in rows]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_shared_server_gets_the_roots_its_entry_configures_whoever_calls_it(tmp_path: Path, mode: str) -> None:
    project = tmp_path / "project"
    configured = make_config(tmp_path, {"asking": {"command": "unused", "roots": [str(project)]}})
    options: dict[str, Any] = {"mode": mode, "list_roots_callback": my_roots}
    async with gateway_client(configured, transports=in_memory({"asking": asking()}), **options) as (_, client):
        assert await call(client, "roots") == project.as_uri()
    async with gateway_client(config(tmp_path), transports=in_memory({"asking": asking()}), **options) as (_, client):
        assert await call(client, "roots") == "no roots"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_session_s_own_instance_gets_its_client_s_roots_or_else_its_workspace(
    tmp_path: Path, mode: str
) -> None:
    scoped = make_config(tmp_path, {"asking": {"command": "unused", "scope": "session"}})
    transports = in_memory({"asking": asking()})
    async with gateway_client(scoped, transports=transports, mode=mode, list_roots_callback=my_roots) as (_, client):
        assert await call(client, "roots") == "file:///home/ada/project"
    async with gateway_client(scoped, transports=in_memory({"asking": asking()}), mode=mode) as (_, client):
        workspace = await call(client, "roots")
        assert workspace.startswith((tmp_path / "data").as_uri()) and "workspaces" in workspace


def log_inbox() -> tuple[Inbox[types.LoggingMessageNotificationParams], LoggingFnT]:
    """The log messages a client receives, and the callback that keeps them."""
    logged: Inbox[types.LoggingMessageNotificationParams] = Inbox()

    async def keep(params: types.LoggingMessageNotificationParams) -> None:
        logged.add(params)

    return logged, keep


async def test_log_messages_reach_the_calling_client_at_the_level_it_set(tmp_path: Path) -> None:
    logged, keep = log_inbox()
    transports = in_memory({"asking": asking()})
    async with gateway_client(config(tmp_path), transports=transports, logging_callback=keep) as (_, client):
        assert await call(client, "chatty", {"count": 3}) == "done"
        await logged.until(lambda: len(logged) >= 3, "three log messages")
        assert [entry.data for entry in logged] == ["working 0", "working 1", "working 2"]
        logged.clear()
        await client.set_logging_level("warning")
        assert await call(client, "chatty", {"count": 3}) == "done"
        # Messages come in the order sent: once one sent after them arrives, any let through would have.
        await client.set_logging_level("info")
        assert await call(client, "chatty", {"count": 1}) == "done"
        await logged.until(lambda: bool(logged), "the message logged at the level set again")
    assert [entry.data for entry in logged] == ["working 0"]


async def test_a_log_flood_from_an_upstream_reaches_the_client_at_the_documented_rate_then_says_how_many_were_dropped(
    tmp_path: Path,
) -> None:
    logged, keep = log_inbox()
    now = [0.0]
    # The gateway's clock stands still through the flood, then moves on a second: one window, then the next.
    gateway = Gateway(config(tmp_path), transports=in_memory({"asking": asking()}), clock=lambda: now[0])
    async with gateway, Client(build_server(gateway), mode="legacy", logging_callback=keep) as client:
        assert await call(client, "chatty", {"count": LogThrottle.RATE + 5}) == "done"
        now[0] += 1.0
        assert await call(client, "chatty", {"count": 1}) == "done"
        await logged.until(lambda: len(logged) >= LogThrottle.RATE + 2, "the flood's messages, a notice and one more")
    flood = [f"working {number}" for number in range(LogThrottle.RATE)]
    dropped = f"5 messages dropped from server 'asking': more than {LogThrottle.RATE} a second"
    assert [entry.data for entry in logged] == [*flood, dropped, "working 0"]
    assert logged[LogThrottle.RATE].level == "warning"


def test_a_log_flood_passes_at_the_documented_rate_then_says_how_many_were_dropped() -> None:
    now = [0.0]
    throttle = LogThrottle(lambda: now[0])
    verdicts = [throttle.admit() for _ in range(LogThrottle.RATE + 5)]
    assert verdicts.count((True, 0)) == LogThrottle.RATE
    now[0] = 1.0
    assert throttle.admit() == (True, 5)


async def test_a_subscriber_is_told_of_updates_under_the_exposed_uri(tmp_path: Path) -> None:
    received, handle = collector()
    transports = in_memory({"asking": asking()})
    async with gateway_client(config(tmp_path), transports=transports, message_handler=handle) as (_, client):
        uris = [resource.uri for resource in (await client.list_resources()).resources]
        exposed = next(uri for uri in uris if uri.endswith("today"))
        await client.subscribe_resource(exposed)
        assert await call(client, "subscriptions") == NOTE_URI
        await call(client, "touch")
        await received.until(
            lambda: any(isinstance(m, types.ResourceUpdatedNotification) for m in received), "a resource update"
        )
        updates = [m.params.uri for m in received if isinstance(m, types.ResourceUpdatedNotification)]
        assert updates == [exposed]
        await client.unsubscribe_resource(exposed)
        assert await call(client, "subscriptions") == "none"


class Reborn(DroppingLink):
    """The asking server as a process would be: born anew, knowing no subscription, at each
    connection; its first `chatty` call ends the connection."""

    def __init__(self) -> None:
        super().__init__(asking(), drop={"chatty"})

    def __call__(self) -> Any:
        self._server = asking()
        return super().__call__()


async def test_a_subscription_is_renewed_on_the_server_s_next_connection_and_its_subscriber_told_to_read_again(
    tmp_path: Path,
) -> None:
    received, handle = collector()

    def updated() -> list[str]:
        return [m.params.uri for m in received if isinstance(m, types.ResourceUpdatedNotification)]

    async with gateway_client(config(tmp_path), transports={"asking": Reborn()}, message_handler=handle) as pair:
        gateway, client = pair
        await client.subscribe_resource(NOTE)
        assert await call(client, "subscriptions") == NOTE_URI
        # The server goes away mid-call and comes back knowing nothing of the subscription.
        await client.call_tool("asking__chatty", {"count": 1})
        await received.until(lambda: len(updated()) == 1, "the word to read the resource again")
        assert await call(client, "subscriptions") == NOTE_URI
        await call(client, "touch")
        await received.until(lambda: len(updated()) == 2, "the update the renewed subscription brings")
        # A restart is a new connection too.
        await gateway.servers.restart("asking")
        await received.until(lambda: len(updated()) == 3, "the word to read it again after the restart")
        assert await call(client, "subscriptions") == NOTE_URI
    assert updated() == [NOTE] * 3


def plain_resources() -> MCPServer:
    """A server with a resource and no subscriptions."""
    server = MCPServer("plain")

    @server.resource("plain://fixed")
    def fixed() -> str:
        """A resource that never changes."""
        return "fixed"

    return server


async def updates(client: Client, uri: str, tool: str, *others: str) -> tuple[list[str], list[str]]:
    """Listen for updates of `uri` (and `others`), call `tool`, and wait for the first update: the
    URIs the stream's acknowledgment honoured, and the updated URI."""
    async with client.listen(resource_subscriptions=[uri, *others]) as stream:
        honored = list(stream.honored.resource_subscriptions or [])
        await client.call_tool(tool, {})
        with anyio.fail_after(30):
            async for event in stream:
                assert isinstance(event, ResourceUpdated)
                return honored, [event.uri]
    raise AssertionError("the stream ended without an update")


async def unsubscribed(client: Client) -> bool:
    """Whether the asking server behind the gateway holds no subscription: it announces none."""
    return await call(client, "subscriptions") == "none"


async def test_a_2026_era_listen_stream_gets_resource_updates_as_a_direct_connection_does(tmp_path: Path) -> None:
    async with Client(asking(), mode="2026-07-28") as direct:
        assert await updates(direct, NOTE_URI, "touch") == ([NOTE_URI], [NOTE_URI])
    cfg = make_config(tmp_path, placeholder(["asking", "plain"]))
    transports = in_memory({"asking": asking(), "plain": plain_resources()})
    async with gateway_client(cfg, transports=transports, mode="2026-07-28") as (_, client):
        # Left out of the acknowledgment: a resource whose server takes no subscriptions, and one of no server.
        honored, updated = await updates(client, NOTE, "asking__touch", "plain+plain://fixed", "nowhere://at-all")
        assert (honored, updated) == ([NOTE], [NOTE])
        # The stream subscribed the server; once it ends, the gateway unsubscribes it.
        await poll_until(lambda: unsubscribed(client), "the server unsubscribed once the stream ended")


async def test_a_listen_stream_holds_the_server_s_subscription_while_it_is_open(tmp_path: Path) -> None:
    transports = in_memory({"asking": asking()})
    async with gateway_client(config(tmp_path), transports=transports, mode="2026-07-28") as (_, client):
        async with client.listen(resource_subscriptions=[NOTE]), client.listen(resource_subscriptions=[NOTE]):
            assert await call(client, "subscriptions") == NOTE_URI
        await poll_until(lambda: unsubscribed(client), "the server unsubscribed once the stream ended")


async def test_a_listen_stream_follows_at_most_a_hundred_resources(tmp_path: Path) -> None:
    uris = [f"asking+note://{number}" for number in range(MAX_RESOURCES + 1)]
    transports = in_memory({"asking": asking()})
    async with (
        gateway_client(config(tmp_path), transports=transports, mode="2026-07-28") as (_, client),
        client.listen(resource_subscriptions=uris) as stream,
    ):
        assert stream.honored.resource_subscriptions == uris[:MAX_RESOURCES] and MAX_RESOURCES == 100


async def test_a_2026_era_listen_stream_follows_its_session_s_instance_of_a_session_scoped_server(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"asking": {"command": "unused", "scope": "session"}})
    async with gateway_client(cfg, transports=in_memory({"asking": asking()}), mode="2026-07-28") as (_, client):
        assert await updates(client, NOTE, "asking__touch") == ([NOTE], [NOTE])


async def test_the_gateway_advertises_resource_subscriptions(tmp_path: Path) -> None:
    async with gateway_client(config(tmp_path), transports=in_memory({"asking": asking()})) as (_, client):
        resources = client.server_capabilities.resources if client.server_capabilities else None
    assert resources is not None and resources.subscribe


async def test_sampling_passes_through_a_gateway_served_over_http(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    async with (
        http_gateway(cfg, transports=in_memory({"asking": asking()})) as (_, url),
        http_client(url, sampling_callback=sample) as client,
    ):
        assert await call(client, "ask_model", {"prompt": "over http"}) == "model said: OVER HTTP"


async def test_an_upstream_over_stdio_reaches_the_only_session_calling_it(tmp_path: Path) -> None:
    entry = {"command": sys.executable, "args": ["-m", "tests.support.asking"], "cwd": str(REPO)}
    async with gateway_client(make_config(tmp_path, {"asking": entry}), sampling_callback=sample) as (_, client):
        await until_listed(client, "asking__ask_model")
        assert await call(client, "ask_model", {"prompt": "over stdio"}) == "model said: OVER STDIO"


ASKING_STDIO = StdioServerParameters(command=sys.executable, args=["-m", "tests.support.asking"], cwd=str(REPO))


def gateway_over_stdio(tmp_path: Path) -> StdioServerParameters:
    """The gateway launched as a stdio command, with the asking server over stdio behind it."""
    config_file = tmp_path / "gateway.yaml"
    upstream = {"command": ASKING_STDIO.command, "args": list(ASKING_STDIO.args), "cwd": str(REPO)}
    gateway_section = {"data_dir": str(tmp_path / "data")}
    config_file.write_text(yaml.safe_dump({"gateway": gateway_section, "servers": {"asking": upstream}}))
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "--log-level", "WARNING", "stdio", "--config", str(config_file)],
        cwd=str(REPO),
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sampling_passes_through_stdio_on_both_sides(tmp_path: Path, mode: str) -> None:
    params = gateway_over_stdio(tmp_path)
    with anyio.fail_after(60):
        async with Client(params, mode=mode, sampling_callback=sample) as client:
            await until_listed(client, "asking__ask_model")
            assert await call(client, "ask_model", {"prompt": "both ways"}) == "model said: BOTH WAYS"


async def test_a_2026_era_client_answers_sampling_and_elicitation_through_input_required(tmp_path: Path) -> None:
    transports = in_memory({"asking": asking()})
    options: dict[str, Any] = {"sampling_callback": sample, "elicitation_callback": elicit, "mode": "2026-07-28"}
    async with gateway_client(config(tmp_path), transports=transports, **options) as (gateway, client):
        assert await call(client, "ask_model", {"prompt": "modern"}) == "model said: MODERN"
        assert await call(client, "ask_user") == "accept: Ada"
        outcomes = [row.outcome for row in await gateway.audit.recent()]
    assert "sampling" in outcomes and "elicitation" in outcomes


@pytest.mark.parametrize(
    ("level", "expected"),
    [("info", ["working 0", "working 1", "working 2"]), ("warning", []), (None, [])],
)
async def test_a_2026_era_call_carries_its_server_s_log_messages_at_the_level_its_request_asks(
    tmp_path: Path, level: types.LoggingLevel | None, expected: list[str]
) -> None:
    logged: list[Any] = []

    async def keep(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params.data)

    options: dict[str, Any] = {"mode": "2026-07-28", "logging_callback": keep, "log_level": level}
    async with gateway_client(config(tmp_path), transports=in_memory({"asking": asking()}), **options) as (_, client):
        assert await call(client, "chatty", {"count": 3}) == "done"
    # Request-scoped: each message went out on the call's stream, ahead of its answer.
    assert logged == expected


async def test_a_2026_era_client_gets_the_log_messages_over_stdio_that_a_direct_connection_gets(
    tmp_path: Path,
) -> None:
    async def logs_of(server: StdioServerParameters, tool: str) -> list[Any]:
        logged: list[Any] = []

        async def keep(params: types.LoggingMessageNotificationParams) -> None:
            logged.append(params.data)

        with anyio.fail_after(60):
            async with Client(server, mode="2026-07-28", logging_callback=keep, log_level="debug") as client:
                await until_listed(client, tool)
                assert text(await client.call_tool(tool, {"count": 3})) == "done"
        return logged

    direct = await logs_of(ASKING_STDIO, "chatty")
    assert direct == ["working 0", "working 1", "working 2"]
    assert await logs_of(gateway_over_stdio(tmp_path), "asking__chatty") == direct


async def test_a_2026_era_client_without_sampling_gets_an_error_not_a_hang(tmp_path: Path) -> None:
    transports = in_memory({"asking": asking()})
    async with gateway_client(config(tmp_path), transports=transports, mode="2026-07-28") as (_, client):
        assert await call(client, "ask_model", {"prompt": "hi"}) == "refused: Sampling not supported"


async def test_a_tool_s_task_support_is_listed_as_the_server_gives_it(tmp_path: Path) -> None:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        execution = types.ToolExecution(task_support="optional")
        return types.ListToolsResult(
            tools=[types.Tool(name="long", input_schema={"type": "object"}, execution=execution)]
        )

    server = Server("tasks", on_list_tools=list_tools)
    cfg = make_config(tmp_path, placeholder(["tasks"]))
    async with gateway_client(cfg, transports=in_memory({"tasks": server})) as (_, client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    execution = tools["tasks__long"].execution
    assert execution is not None and execution.task_support == "optional"
