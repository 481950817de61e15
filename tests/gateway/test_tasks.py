"""Task-augmented tool calls pass through a real gateway to an upstream that runs tasks: created there,
followed, fetched and cancelled under the gateway's own ids, and seen only by the session that created them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError

from gateway.clients.tasks import RELATED_TASK
from gateway.frontdoors.mcpserver import CONNECTION_KEY
from gateway.service import Gateway
from gateway.upstreams.sdkclient import send_as_is
from tests.support.access import ROLES, access_config, http_client
from tests.support.harness import gateway_client, http_gateway, in_memory, make_config, placeholder
from tests.support.tasking import TaskServer
from tests.support.waiting import LIMIT, Inbox, poll_until

pytestmark = pytest.mark.anyio

STATUS = "notifications/tasks/status"


def config(tmp_path: Path) -> Any:
    return make_config(tmp_path, placeholder(["jobs"]))


async def ask(client: Client, method: str, **params: Any) -> dict[str, Any]:
    """Send a request the SDK client has no method for; the gateway's answer as it came."""
    request = types.Request[dict[str, Any], str](method=method, params=params)
    with anyio.fail_after(30):
        return await send_as_is(client.session, request)


async def start(client: Client, tool: str, text: str = "hello") -> dict[str, Any]:
    """Call `tool` as a task; the task the gateway answers with."""
    answer = await ask(client, "tools/call", name=f"jobs__{tool}", arguments={"text": text}, task={"ttl": 60000})
    task: dict[str, Any] = answer["task"]
    return task


@asynccontextmanager
async def reached(how: str, cfg: Any, upstream: TaskServer) -> AsyncIterator[tuple[Gateway, Client]]:
    """A gateway in front of `upstream` and an SDK client of it, in memory or over real HTTP."""
    transports = in_memory({"jobs": upstream})
    if how == "memory":
        async with gateway_client(cfg, transports=transports) as (gateway, client):
            yield gateway, client
        return
    async with http_gateway(cfg, transports=transports) as (gateway, url), http_client(url) as client:
        yield gateway, client


@pytest.mark.parametrize("how", ["memory", "http"])
async def test_a_task_is_created_upstream_then_followed_and_fetched_under_the_gateway_s_id(
    tmp_path: Path, how: str
) -> None:
    upstream = TaskServer()
    async with reached(how, config(tmp_path), upstream) as (gateway, client):
        task = await start(client, "slow")
        assert task["status"] == "working" and task["ttl"] == 60000
        assert task["taskId"] != "t1" and len(task["taskId"]) >= 24
        assert list(upstream.jobs) == ["t1"] and upstream.jobs["t1"].arguments == {"text": "hello"}
        assert (await ask(client, "tasks/get", taskId=task["taskId"]))["status"] == "working"
        await upstream.finish("t1", "done: hello")
        got = await ask(client, "tasks/get", taskId=task["taskId"])
        result = await ask(client, "tasks/result", taskId=task["taskId"])
        rows = await gateway.audit.recent(tool="jobs__slow")
    assert got["status"] == "completed" and got["taskId"] == task["taskId"]
    assert result["content"] == [{"type": "text", "text": "done: hello"}]
    assert result["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    assert [row.outcome for row in rows] == ["ok"]


async def test_a_task_s_result_waits_until_the_task_ends(tmp_path: Path) -> None:
    upstream = TaskServer()
    async with gateway_client(config(tmp_path), transports=in_memory({"jobs": upstream})) as (_, client):
        task = await start(client, "batch", "later")
        results: list[dict[str, Any]] = []

        async def fetch() -> None:
            results.append(await ask(client, "tasks/result", taskId=task["taskId"]))

        async with anyio.create_task_group() as group:
            group.start_soon(fetch)
            await anyio.wait_all_tasks_blocked()
            assert results == []
            await upstream.finish("t1", "finally")
    assert results[0]["content"][0]["text"] == "finally"


async def test_tasks_are_listed_only_to_their_session_and_unknown_to_any_other(tmp_path: Path) -> None:
    upstream = TaskServer()
    async with (
        http_gateway(config(tmp_path), transports=in_memory({"jobs": upstream})) as (_, url),
        http_client(url) as owner,
        http_client(url) as other,
    ):
        mine = await start(owner, "slow")
        theirs = await start(other, "slow")
        listed = await ask(owner, "tasks/list")
        assert [task["taskId"] for task in listed["tasks"]] == [mine["taskId"]]
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            with pytest.raises(MCPError) as foreign:
                await ask(other, method, taskId=mine["taskId"])
            with pytest.raises(MCPError) as unknown:
                await ask(other, method, taskId="no-such-task")
            assert foreign.value.error.code == unknown.value.error.code == types.INVALID_PARAMS
            assert foreign.value.error.message == unknown.value.error.message.replace("no-such-task", mine["taskId"])
        assert (await ask(other, "tasks/get", taskId=theirs["taskId"]))["status"] == "working"
        assert [job.task.status for job in upstream.jobs.values()] == ["working", "working"]


async def test_cancelling_a_task_reaches_the_upstream(tmp_path: Path) -> None:
    upstream = TaskServer()
    async with gateway_client(config(tmp_path), transports=in_memory({"jobs": upstream})) as (_, client):
        task = await start(client, "slow")
        cancelled = await ask(client, "tasks/cancel", taskId=task["taskId"])
        with pytest.raises(MCPError) as again:
            await ask(client, "tasks/cancel", taskId=task["taskId"])
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task["taskId"]
    assert upstream.jobs["t1"].task.status == "cancelled"
    assert "already cancelled" in again.value.error.message


async def test_a_session_s_running_tasks_are_cancelled_on_their_server_when_it_ends(tmp_path: Path) -> None:
    upstream = TaskServer()
    async with (
        http_gateway(config(tmp_path), transports=in_memory({"jobs": upstream})) as (_, url),
        http_client(url) as staying,
    ):
        await start(staying, "slow", "kept")
        async with http_client(url) as leaving:
            await start(leaving, "slow", "left running")
            await start(leaving, "slow", "finished")
            await upstream.finish("t3", "done")
        # Its task ends on the server once the gateway has seen the session go.
        with anyio.fail_after(LIMIT):
            await upstream.jobs["t2"].done.wait()
        statuses = {job.arguments["text"]: job.task.status for job in upstream.jobs.values()}
    # Only the ended session's task still running was cancelled: a finished one is left as it was.
    assert statuses == {"kept": "working", "left running": "cancelled", "finished": "completed"}


async def test_a_server_s_request_while_a_task_s_result_is_awaited_names_the_task_by_the_gateway_s_id(
    tmp_path: Path,
) -> None:
    upstream = TaskServer()
    asked: list[Any] = []

    async def model(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append((params.meta or {}).get(RELATED_TASK))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="yes"), model="test")

    transports = in_memory({"jobs": upstream})
    async with gateway_client(config(tmp_path), transports=transports, sampling_callback=model) as (_, client):
        task = await start(client, "slow", "ask:may I?")
        result = await ask(client, "tasks/result", taskId=task["taskId"])
    assert asked == [{"taskId": task["taskId"]}]
    assert result["content"] == [{"type": "text", "text": "model said: yes"}]


async def test_a_tool_is_called_as_its_task_support_allows_or_gets_method_not_found(tmp_path: Path) -> None:
    async with gateway_client(config(tmp_path), transports=in_memory({"jobs": TaskServer()})) as (_, client):
        with pytest.raises(MCPError) as forbidden:
            await start(client, "quick")
        with pytest.raises(MCPError) as required:
            await client.call_tool("jobs__batch", {"text": "now"})
        plain = await client.call_tool("jobs__slow", {"text": "now"})
        tools = {tool.name: tool.execution for tool in (await client.list_tools()).tools}
    assert forbidden.value.error.code == required.value.error.code == types.METHOD_NOT_FOUND
    assert plain.content[0] == types.TextContent(text="at once: now")
    assert tools["jobs__slow"] == types.ToolExecution(task_support="optional")
    assert tools["jobs__batch"] == types.ToolExecution(task_support="required")
    assert tools["jobs__quick"] is None


async def test_a_task_call_the_pipeline_refuses_is_a_failed_task_whose_result_is_the_refusal(tmp_path: Path) -> None:
    roles = {**ROLES, "user": {"allow": ["*"], "budget": {"max_calls_per_session": 1}}}
    cfg = access_config(tmp_path, placeholder(["jobs"]), roles=roles, auth=None, stdio_role="user")
    upstream = TaskServer()
    async with gateway_client(cfg, transports=in_memory({"jobs": upstream})) as (_, client):
        await start(client, "slow")
        refused = await start(client, "slow")
        result = await ask(client, "tasks/result", taskId=refused["taskId"])
        listed = await ask(client, "tasks/list")
    assert refused["status"] == "failed" and "all 1 calls" in refused["statusMessage"]
    assert result["isError"] is True and "all 1 calls" in result["content"][0]["text"]
    assert [task["status"] for task in listed["tasks"]] == ["working", "failed"]
    assert list(upstream.jobs) == ["t1"]


async def test_the_gateway_advertises_tasks_in_the_handshake_era_only(tmp_path: Path) -> None:
    transports = in_memory({"jobs": TaskServer()})
    async with gateway_client(config(tmp_path), transports=transports) as (_, client):
        legacy = client.server_capabilities.tasks
    async with gateway_client(config(tmp_path), transports=transports, mode="2026-07-28") as (_, client):
        modern = client.server_capabilities.tasks
    assert legacy is not None and legacy.requests is not None and legacy.requests.tools is not None
    assert legacy.list is not None and legacy.cancel is not None
    assert modern is None


def listening(gateway: Gateway) -> int:
    """How many handshake-era clients of `gateway` have their stream for notifications open."""
    connections = [context.state.get(CONNECTION_KEY) for context in gateway.sessions.live()]
    return sum(isinstance(connection, Connection) and connection.has_standalone_channel for connection in connections)


class TaskStatus(ClientExtension):
    """A client that keeps the task status notifications it receives (the SDK's client drops them)."""

    identifier = "org.example/task-status"

    def __init__(self) -> None:
        self.told: Inbox[types.TaskStatusNotificationParams] = Inbox()

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [
            NotificationBinding(method=STATUS, params_type=types.TaskStatusNotificationParams, handler=self.told.put)
        ]


async def test_a_task_s_status_notifications_reach_only_the_session_that_created_it(tmp_path: Path) -> None:
    upstream = TaskServer()
    owner, other = TaskStatus(), TaskStatus()
    async with (
        http_gateway(config(tmp_path), transports=in_memory({"jobs": upstream})) as (gateway, url),
        http_client(url, extensions=[owner]) as client,
        http_client(url, extensions=[other]) as bystander,
    ):
        await bystander.list_tools()
        task = await start(client, "slow")
        await poll_until(lambda: listening(gateway) == 2, "both clients' notification streams")
        await upstream.finish("t1", "done")
        await owner.told.until(lambda: bool(owner.told), "the task's status notification")
    assert [(told.task_id, told.status) for told in owner.told] == [(task["taskId"], "completed")]
    assert other.told == []
