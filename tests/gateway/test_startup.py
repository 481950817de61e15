"""Start-up: the gateway serves at once, upstreams join as they connect, required servers are required."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged

from gateway.auth.identity import Identity
from gateway.config.loading import parse_config
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from gateway.upstreams.connection import State
from gateway.upstreams.listing import LISTINGS_AT_ONCE
from gateway.upstreams.transports import TransportFactory
from tests.support.harness import REPO, http_gateway, listening, make_config, placeholder, serving_url
from tests.support.probe import gated, silent_transport
from tests.support.toy import build_server as toy
from tests.support.waiting import Lines, poll_until

pytestmark = pytest.mark.anyio

# High, so that a gateway that waited for its upstreams could not answer within the tests' bounds.
CONNECT_TIMEOUT = 60.0
HANGS = {"command": sys.executable, "args": ["-m", "tests.support.hangs"], "cwd": str(REPO)}


def servers_joining_late(tmp_path: Path) -> tuple[Any, dict[str, TransportFactory], anyio.Event]:
    """A required `toy` that connects when the returned gate is set, and an optional `stuck` that never answers."""
    servers = {"toy": {"command": "unused", "required": True}, "stuck": {"command": "unused"}}
    # No wait for the first listing: these tests see the gateway answer before its servers connect.
    config = make_config(tmp_path, servers, upstream_connect_timeout=CONNECT_TIMEOUT, first_listing_wait=0)
    gate = anyio.Event()
    return config, {"toy": gated(toy(), gate), "stuck": silent_transport}, gate


def tool_names(result: types.ListToolsResult) -> set[str]:
    """The names of the listed tools."""
    return {tool.name for tool in result.tools}


def tools_changed() -> tuple[anyio.Event, Callable[[Any], Awaitable[None]]]:
    """An event set when a client receives tools/list_changed, and the message handler that sets it."""
    told = anyio.Event()

    async def handle(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    return told, handle


async def test_the_gateway_serves_at_once_and_a_server_joins_when_ready(tmp_path: Path) -> None:
    config, transports, gate = servers_joining_late(tmp_path)
    told, handle = tools_changed()
    with anyio.fail_after(CONNECT_TIMEOUT / 2):
        async with (
            http_gateway(config, transports=transports, settled=False) as (gateway, url),
            httpx2.AsyncClient() as http,
            Client(f"{url}/mcp", mode="legacy", message_handler=handle) as client,
        ):
            assert (await http.get(f"{url}/healthz")).status_code == 200
            assert (await http.get(f"{url}/readyz")).status_code == 503
            assert not any(name.startswith("toy__") for name in tool_names(await client.list_tools()))
            # The client opens its notification stream on its own time; the change must come after.
            await poll_until(lambda: listening(gateway), "the client's notification stream")
            gate.set()
            await told.wait()
            assert "toy__echo" in tool_names(await client.list_tools(cache_mode="refresh"))
            # The required server is ready, but the optional one is still on its first attempt.
            assert (await http.get(f"{url}/readyz")).status_code == 503


async def test_a_client_that_has_only_shaken_hands_is_told_when_a_server_joins(tmp_path: Path) -> None:
    config, transports, gate = servers_joining_late(tmp_path)
    told, handle = tools_changed()
    with anyio.fail_after(CONNECT_TIMEOUT / 2):
        async with (
            http_gateway(config, transports=transports, settled=False) as (gateway, url),
            Client(f"{url}/mcp", mode="legacy", message_handler=handle) as client,
        ):
            # No request yet: the gateway knows the client from its `notifications/initialized`.
            await poll_until(lambda: listening(gateway), "the gateway to know the client")
            gate.set()
            await told.wait()
            assert "toy__echo" in tool_names(await client.list_tools(cache_mode="refresh"))


async def test_a_stateless_era_client_listening_is_told_when_a_server_joins(tmp_path: Path) -> None:
    config, transports, gate = servers_joining_late(tmp_path)
    with anyio.fail_after(CONNECT_TIMEOUT / 2):
        async with (
            http_gateway(config, transports=transports, settled=False) as (_, url),
            Client(f"{url}/mcp", mode="2026-07-28") as client,
            client.listen(tools_list_changed=True) as subscription,
        ):
            gate.set()
            assert isinstance(await subscription.__anext__(), ToolsListChanged)
            assert "toy__echo" in tool_names(await client.list_tools(cache_mode="refresh"))


async def test_a_tool_of_a_server_not_connected_yet_says_so_to_roles_that_may_see_it(tmp_path: Path) -> None:
    data = {
        "gateway": {"data_dir": str(tmp_path / "data"), "upstream_connect_timeout": CONNECT_TIMEOUT},
        "servers": {"stuck": {"command": "unused"}, "toy": {"command": "unused"}},
        "roles": {"ops": {"allow": ["*"]}, "intern": {"allow": [{"server": "toy"}]}},
    }
    config = parse_config(data, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    answers: dict[str, list[str]] = {}
    with anyio.fail_after(CONNECT_TIMEOUT / 2):
        for role in ("ops", "intern"):
            gateway = Gateway(
                config,
                transports={"stuck": silent_transport, "toy": silent_transport},
                local_identity=Identity("ivy", role, "stdio"),
            )
            async with gateway.running(), Client(build_server(gateway), mode="legacy") as client:
                answers[role] = []
                for name in ("stuck__anything", "nowhere__anything"):
                    with pytest.raises(MCPError) as refused:
                        await client.call_tool(name, {})
                    answers[role].append(refused.value.message)
    assert answers["ops"][0].startswith("Server 'stuck' is not connected yet")
    assert answers["ops"][1] == "Unknown tool: 'nowhere__anything'"
    # A role that may not see the server is answered exactly as for a name that does not exist.
    assert answers["intern"] == ["Unknown tool: 'stuck__anything'", "Unknown tool: 'nowhere__anything'"]


def stuck_at_listing(entered: Callable[[], None]) -> TransportFactory:
    """A server in memory that shakes hands, then never answers `tools/list`; `entered` is called when asked."""

    async def never_lists(ctx: Any, params: Any) -> types.ListToolsResult:
        entered()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return lambda: InMemoryTransport(Server("stuck", on_list_tools=never_lists))


async def test_servers_that_never_answer_their_listing_keep_no_other_server_out_of_the_catalog(
    tmp_path: Path,
) -> None:
    # More of them than a gateway lists at once, each asked before the healthy server connects.
    stuck = [f"stuck{index}" for index in range(LISTINGS_AT_ONCE + 1)]
    config = make_config(tmp_path, placeholder([*stuck, "toy"]), upstream_connect_timeout=CONNECT_TIMEOUT)
    all_asked = anyio.Event()
    asked = 0

    def entered() -> None:
        nonlocal asked
        asked += 1
        if asked == len(stuck):
            all_asked.set()

    transports = {name: stuck_at_listing(entered) for name in stuck} | {"toy": gated(toy(), all_asked)}
    with anyio.fail_after(CONNECT_TIMEOUT / 2):
        gateway = Gateway(config, transports=transports, local_identity=Identity("ivy", "admin", "stdio"))
        async with gateway.running(), Client(build_server(gateway), mode="legacy") as client:
            await gateway.upstreams["toy"].first_attempt.wait()
            assert {s.name: s.state for s in gateway.servers.statuses()}["toy"] == State.READY
            result = await client.call_tool("toy__echo", {"text": "still served"})
            states = {status.name: status.state for status in gateway.servers.statuses()}

    assert [block.text for block in result.content if isinstance(block, types.TextContent)] == ["still served"]
    assert {states[name] for name in stuck} == {State.CONNECTING}


def write_config(tmp_path: Path, servers: dict[str, Any], **settings: Any) -> Path:
    """A configuration file for a gateway process, its data under `tmp_path`."""
    path = tmp_path / "gateway.yaml"
    document = {"gateway": {"data_dir": str(tmp_path / "data"), **settings}, "servers": servers}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


async def gateway_command(*args: str) -> subprocess.CompletedProcess[bytes]:
    """`python -m gateway <args>` run to its end with stdin kept open (a stdio client that stays)."""
    command = [sys.executable, "-m", "gateway", "--log-level", "WARNING", *args]
    with anyio.fail_after(CONNECT_TIMEOUT / 2):
        return await anyio.run_process(command, cwd=REPO, check=False, stdin=subprocess.PIPE)


@pytest.mark.parametrize("front_door", ["serve", "stdio"])
async def test_a_required_server_that_cannot_start_stops_the_gateway_with_the_reason(
    tmp_path: Path, front_door: str
) -> None:
    servers = {"needed": {"command": str(tmp_path / "no-such-program"), "required": True}}
    config = write_config(tmp_path, servers, upstream_connect_timeout=CONNECT_TIMEOUT)
    port = ["--port", "0"] if front_door == "serve" else []
    finished = await gateway_command(front_door, "--config", str(config), *port)
    stderr = finished.stderr.decode()
    assert finished.returncode == 1, stderr
    assert "error: required server 'needed' did not connect: " in stderr
    assert "No such file" in stderr


async def test_check_says_an_upstream_timed_out_during_initialize(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"bad": HANGS}, upstream_connect_timeout=2)
    finished = await gateway_command("check", "--config", str(config))
    stdout = finished.stdout.decode()
    assert "[FAIL] bad (stdio): 0 tools - timed out after 2 s during initialize" in stdout, stdout


async def test_serve_answers_while_a_required_server_hangs_and_stops_when_it_times_out(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"needed": {**HANGS, "required": True}}, upstream_connect_timeout=8)
    command = [sys.executable, "-m", "gateway", "--log-level", "WARNING", "serve", "--config", str(config)]
    said, log = Lines(), Lines()
    with anyio.fail_after(CONNECT_TIMEOUT / 2):
        async with (
            await anyio.open_process([*command, "--port", "0"], cwd=REPO) as process,
            anyio.create_task_group() as group,
        ):
            assert process.stdout is not None and process.stderr is not None
            group.start_soon(said.read, process.stdout)
            group.start_soon(log.read, process.stderr)
            url = await serving_url(said)
            async with httpx2.AsyncClient() as http:
                health = await http.get(f"{url}/healthz")
                ready = await http.get(f"{url}/readyz")
            assert await process.wait() == 1, log.text
    assert (health.status_code, ready.status_code) == (200, 503)
    assert "required server 'needed' did not connect: timed out after 8 s during initialize" in log.text


async def test_serve_on_a_port_already_taken_says_so_in_one_line_and_starts_no_server(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    started = {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w')"]}
    config = write_config(tmp_path, {"marker": started})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        finished = await gateway_command("serve", "--config", str(config), "--port", str(port))
    stderr = finished.stderr.decode()
    assert finished.returncode == 1, stderr
    assert stderr.splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"]
    assert not marker.exists()
