"""The live server set: servers registered, changed, restarted and removed while clients stay connected."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from mcp.shared.subscriptions import ToolsListChanged

from gateway.errors import ConfigError, ConflictError, NotFoundError
from gateway.stores import StoreSettings
from gateway.stores.registrations import RegistrationStore
from gateway.upstreams.connection import State
from gateway.upstreams.transports import TransportFactory
from tests.support.databases import Backend
from tests.support.harness import (
    collector,
    gateway_client,
    http_gateway,
    in_memory,
    listening,
    make_config,
    placeholder,
    told_tools_changed,
    toy_stdio,
    until_told_of,
)
from tests.support.toy import build_server as toy
from tests.support.waiting import catalog_until, poll_until

pytestmark = pytest.mark.anyio

# A real stdio server starts in a second or two; a loaded machine may take much longer.
JOIN_LIMIT = 30.0


def names_of(result: types.ListToolsResult) -> set[str]:
    """The names of the listed tools."""
    return {tool.name for tool in result.tools}


def text_of(result: types.CallToolResult) -> str:
    """The text of a result's first block."""
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_server_registered_while_a_handshake_era_client_is_connected_reaches_it_live(tmp_path: Path) -> None:
    received, handle = collector()
    config = make_config(tmp_path, {})
    async with (
        http_gateway(config) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy", message_handler=handle) as client,
    ):
        assert names_of(await client.list_tools()) == set()
        # The client opens its notification stream on its own time; the change must come after.
        await poll_until(lambda: listening(gateway), "the client's notification stream")
        status = await gateway.servers.add({"name": "late", **toy_stdio("late")})
        assert (status.name, status.source, status.enabled) == ("late", "api", True)
        await until_told_of(client, received, "late__echo")
        assert text_of(await client.call_tool("late__echo", {"text": "live"})) == "live"

        received.clear()
        await gateway.servers.remove("late")
        await received.until(lambda: told_tools_changed(received), "a tools/list_changed notification")
        assert not any(name.startswith("late__") for name in names_of(await client.list_tools(cache_mode="refresh")))
        assert [status.name for status in gateway.servers.statuses()] == []


async def test_a_server_registered_while_a_stateless_era_client_listens_reaches_it_live(tmp_path: Path) -> None:
    config = make_config(tmp_path, {})
    async with (
        http_gateway(config) as (gateway, url),
        Client(f"{url}/mcp", mode="2026-07-28") as client,
        client.listen(tools_list_changed=True) as subscription,
    ):
        await gateway.servers.add({"name": "late", **toy_stdio("late")})
        with anyio.fail_after(JOIN_LIMIT):
            assert isinstance(await subscription.__anext__(), ToolsListChanged)
        assert "late__echo" in names_of(await client.list_tools(cache_mode="refresh"))
        assert text_of(await client.call_tool("late__echo", {"text": "modern"})) == "modern"

        await gateway.servers.remove("late")
        with anyio.fail_after(JOIN_LIMIT):
            assert isinstance(await subscription.__anext__(), ToolsListChanged)
        assert "late__echo" not in names_of(await client.list_tools(cache_mode="refresh"))


async def test_a_registration_survives_a_restart_of_the_gateway(tmp_path: Path, store_backend: Backend) -> None:
    config = replace(make_config(tmp_path, {}), store=store_backend.settings)
    transports = in_memory({"kept": toy("kept")})
    async with gateway_client(config, transports=transports) as (gateway, _):
        await gateway.servers.add({"name": "kept", "command": "unused", "tags": ["saved"]})
    async with gateway_client(config, transports=transports) as (gateway, client):
        assert [(s.name, s.source, s.state) for s in gateway.servers.statuses()] == [("kept", "api", State.READY)]
        assert text_of(await client.call_tool("kept__echo", {"text": "again"})) == "again"
        record = gateway.catalog.tool("kept__echo")
        assert record is not None and record.tags == frozenset({"saved"})


async def test_an_invalid_registration_is_refused_with_the_path_of_the_problem(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["alpha"]))
    async with gateway_client(config, transports=in_memory({"alpha": toy("alpha")})) as (gateway, _):
        with pytest.raises(ConfigError) as wrong_url:
            await gateway.servers.add({"name": "web", "url": "ftp://example.org/mcp"})
        assert wrong_url.value.path == "servers.web.url"
        with pytest.raises(ConfigError) as neither:
            await gateway.servers.add({"name": "empty"})
        assert neither.value.path == "servers.empty"
        with pytest.raises(ConfigError) as unnamed:
            await gateway.servers.add({"command": "x"})
        assert unnamed.value.path == "servers"
        with pytest.raises(ConflictError, match=r"namespace 'alpha' of server 'other' is taken.* server 'alpha'"):
            await gateway.servers.add({"name": "other", "command": "x", "namespace": "alpha"})
        with pytest.raises(ConflictError):
            await gateway.servers.add({"name": "alpha", "command": "x"})
        assert [status.name for status in gateway.servers.statuses()] == ["alpha"]
        assert gateway.registrations.entries("server") == {}


async def test_servers_of_the_config_file_are_read_only_but_may_be_restarted(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["alpha"]))
    async with gateway_client(config, transports=in_memory({"alpha": toy("alpha")})) as (gateway, client):
        with pytest.raises(ConflictError, match="edit it there"):
            await gateway.servers.change("alpha", {"enabled": False})
        with pytest.raises(ConflictError):
            await gateway.servers.remove("alpha")
        with pytest.raises(NotFoundError):
            await gateway.servers.remove("nobody")
        await gateway.servers.restart("alpha")
        # A call sent meanwhile waits for the new connection.
        assert text_of(await client.call_tool("alpha__echo", {"text": "after"})) == "after"
        assert gateway.servers.statuses()[0].state == State.READY


async def test_a_restart_starts_a_fresh_process(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"counter": toy_stdio("counter")})
    async with gateway_client(config) as (gateway, client):
        assert text_of(await client.call_tool("counter__increment", {})) == "1"
        assert text_of(await client.call_tool("counter__increment", {})) == "2"
        status = await gateway.servers.restart("counter")
        assert status.state == State.CONNECTING
        # The call waits for the new process, which counts from the start.
        assert text_of(await client.call_tool("counter__increment", {})) == "1"
        assert gateway.servers.statuses()[0].state == State.READY


async def test_a_disabled_server_is_listed_without_tools_and_comes_back_when_enabled(tmp_path: Path) -> None:
    config = make_config(tmp_path, {})
    async with gateway_client(config, transports=in_memory({"side": toy("side")})) as (gateway, client):
        await gateway.servers.add({"name": "side", "command": "unused"})
        await catalog_until(gateway, lambda: gateway.catalog.tool("side__echo") is not None, "side__echo")
        status = await gateway.servers.change("side", {"enabled": False})
        assert (status.state, status.enabled) == (State.DISABLED, False)
        assert [(s.name, s.state) for s in gateway.servers.statuses()] == [("side", State.DISABLED)]
        assert "side__echo" not in names_of(await client.list_tools(cache_mode="refresh"))
        with pytest.raises(ConflictError):
            await gateway.servers.restart("side")
        assert gateway.registrations.entries("server")["side"]["enabled"] is False
        await gateway.servers.change("side", {"enabled": True})
        await catalog_until(gateway, lambda: gateway.catalog.tool("side__echo") is not None, "side__echo again")
        assert text_of(await client.call_tool("side__echo", {"text": "back"})) == "back"


def gated_server(started: anyio.Event, release: anyio.Event) -> MCPServer:
    """A server whose one tool says when it started and answers only once `release` is set."""
    server = MCPServer("slow")

    @server.tool(structured_output=False)
    async def wait() -> str:
        """Wait for the test."""
        started.set()
        await release.wait()
        return "finished"

    return server


async def test_a_call_running_when_its_server_is_removed_finishes(tmp_path: Path) -> None:
    started, release = anyio.Event(), anyio.Event()
    server = gated_server(started, release)
    transports: dict[str, TransportFactory] = {"slow": lambda: InMemoryTransport(server)}
    config = make_config(tmp_path, {})
    results: list[types.CallToolResult] = []
    removed = anyio.Event()
    async with gateway_client(config, transports=transports) as (gateway, client):
        await gateway.servers.add({"name": "slow", "command": "unused"})
        await catalog_until(gateway, lambda: gateway.catalog.tool("slow__wait") is not None, "slow__wait")

        async def call() -> None:
            results.append(await client.call_tool("slow__wait", {}))

        async def remove() -> None:
            await gateway.servers.remove("slow")
            removed.set()

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await started.wait()
            group.start_soon(remove)
            # Removal starts by withdrawing the tools; it disconnects only after the running call.
            await catalog_until(gateway, lambda: gateway.catalog.tool("slow__wait") is None, "slow__wait to leave")
            assert not removed.is_set()
            release.set()
        assert removed.is_set()
        assert text_of(results[0]) == "finished" and not results[0].is_error
        assert gateway.servers.statuses() == []


async def test_a_server_removed_on_another_replica_leaves_at_once_while_its_running_call_finishes(
    tmp_path: Path,
) -> None:
    started, release = anyio.Event(), anyio.Event()
    server = gated_server(started, release)
    transports: dict[str, TransportFactory] = {"slow": lambda: InMemoryTransport(server)}
    results: list[types.CallToolResult] = []
    async with gateway_client(make_config(tmp_path, {}), transports=transports) as (gateway, client):
        await gateway.servers.add({"name": "slow", "command": "unused"})
        await catalog_until(gateway, lambda: gateway.catalog.tool("slow__wait") is not None, "slow__wait")

        async def call() -> None:
            results.append(await client.call_tool("slow__wait", {}))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await started.wait()
            # As another replica's removal reaches this one: the store changed, then the announcement.
            gateway.registrations.remove("server", "slow")
            await gateway.replicas.follow_registrations()
            # Followed before the call ended: the next announcement waits for no drain.
            assert not results
            assert gateway.catalog.tool("slow__wait") is None and gateway.servers.statuses() == []
            release.set()
        assert text_of(results[0]) == "finished" and not results[0].is_error


def seed(data_dir: Path, entries: dict[str, dict[str, str]]) -> None:
    """Registrations as an earlier run of the gateway left them."""
    data_dir.mkdir(parents=True)
    store = RegistrationStore.open(StoreSettings(), data_dir)
    for name, entry in entries.items():
        store.save("server", name, entry)
    store.close()


async def test_the_config_file_wins_a_name_it_shares_with_a_registration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, placeholder(["alpha"]))
    seed(config.settings.data_dir, {"alpha": {"url": "http://127.0.0.1:9/mcp"}, "extra": {"command": "unused"}})
    transports = in_memory({"alpha": toy("alpha"), "extra": toy("extra")})
    with caplog.at_level(logging.WARNING):
        async with gateway_client(config, transports=transports) as (gateway, _):
            rows = [(s.name, s.source, s.transport) for s in gateway.servers.statuses()]
    assert rows == [("alpha", "file", "stdio"), ("extra", "api", "stdio")]
    assert "registered server 'alpha' skipped" in caplog.text


async def test_the_secrets_of_a_registered_server_are_redacted_from_then_on(tmp_path: Path) -> None:
    config = make_config(tmp_path, {})
    transports = in_memory({"keyed": toy("keyed")})
    async with gateway_client(config, transports=transports) as (gateway, _):
        await gateway.servers.add({"name": "keyed", "command": "unused", "env": {"API_TOKEN": "tok-4f9a2c71e8"}})
        assert gateway.redact("failed with tok-4f9a2c71e8") == "failed with [redacted]"
