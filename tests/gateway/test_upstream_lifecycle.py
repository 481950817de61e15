"""Live upstreams: concurrent start-up, failures that harm nobody else, restarts, and list changes."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.subscriptions import ToolsListChanged

from gateway.service import Gateway
from gateway.upstreams.connection import State
from tests.support.harness import (
    collector,
    gateway_client,
    http_gateway,
    in_memory,
    make_config,
    placeholder,
    told_tools_changed,
    toy_stdio,
)
from tests.support.probe import silent_transport
from tests.support.toy import build_server as toy
from tests.support.waiting import catalog_until, containing, logged

pytestmark = pytest.mark.anyio


def states(gateway: Gateway) -> dict[str, State]:
    """Each upstream's state by name."""
    return {status.name: status.state for status in gateway.servers.statuses()}


def restarted(gateway: Gateway) -> bool:
    """Whether the only upstream has been restarted and is ready again."""
    status = gateway.servers.statuses()[0]
    return status.restarts >= 1 and status.state == State.READY


async def test_servers_that_fail_to_start_are_reported_and_the_others_serve(tmp_path: Path) -> None:
    servers = {
        "good": toy_stdio("good"),
        "refuses": toy_stdio("refuses", "--fail-at-start"),
        "missing": {"command": str(tmp_path / "no-such-program")},
    }
    config = make_config(tmp_path, servers, restart_backoff_initial=5)
    async with gateway_client(config) as (gateway, client):
        assert states(gateway)["good"] == State.READY
        failed = {status.name: status for status in gateway.servers.statuses() if status.name != "good"}
        assert {status.state for status in failed.values()} == {State.FAILED}
        assert "toy server refuses to start" in (failed["refuses"].error or "")
        assert "No such file" in (failed["missing"].error or "")
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "good__echo" in names and not any(name.startswith(("refuses__", "missing__")) for name in names)
        result = await client.call_tool("good__echo", {"text": "fine"})
        assert result.content[0].text == "fine"  # type: ignore[union-attr]


CONNECT_TIMEOUT = 3.0


async def test_servers_connect_concurrently_so_a_silent_one_delays_start_up_once(tmp_path: Path) -> None:
    servers = placeholder(["silent1", "silent2", "silent3", "toy"])
    # Connected one after another, start-up takes three timeouts; concurrently, one. The bound of two leaves a
    # whole timeout (3 s, over ten times a quiet start-up's overhead) for a busy machine.
    config = make_config(tmp_path, servers, upstream_connect_timeout=CONNECT_TIMEOUT, restart_backoff_initial=5)
    transports = {"silent1": silent_transport, "silent2": silent_transport, "silent3": silent_transport}
    started = time.monotonic()
    async with Gateway(config, transports={**transports, **in_memory({"toy": toy()})}) as gateway:
        elapsed = time.monotonic() - started
        assert states(gateway)["toy"] == State.READY
        assert {states(gateway)[name] for name in transports} == {State.FAILED}
        assert "timed out" in (gateway.servers.statuses()[0].error or "")
    assert elapsed < 2 * CONNECT_TIMEOUT, f"start-up took {elapsed:.1f} s; upstreams were connected one after another"


async def test_a_silent_server_does_not_hold_up_calls_to_the_others(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["silent", "toy"]), upstream_connect_timeout=1.5)
    gateway = Gateway(config, transports={"silent": silent_transport, **in_memory({"toy": toy()})})
    served: list[float] = []

    async def use_toy_during_start_up() -> None:
        await gateway.upstreams["toy"].first_attempt.wait()
        assert states(gateway)["toy"] == State.READY
        assert states(gateway)["silent"] == State.CONNECTING
        record = gateway.catalog.tool("toy__echo")
        assert record is not None
        result = await gateway.upstreams["toy"].call_tool(record, {"text": "not waiting"}, None)
        assert result.content[0].text == "not waiting"  # type: ignore[union-attr]
        served.append(time.monotonic())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(use_toy_during_start_up)
            async with gateway:
                entered = time.monotonic()
    assert served and served[0] < entered


async def test_a_crashed_stdio_server_is_restarted_and_serves_again(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": toy_stdio()}, restart_backoff_initial=0.2)
    async with gateway_client(config) as (gateway, client):
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert (await client.call_tool("toy__increment", {})).content[0].text == "1"  # type: ignore[union-attr]
        crashed = await client.call_tool("toy__crash", {})
        assert crashed.is_error
        assert {tool.name for tool in (await client.list_tools()).tools} == listed
        # A call sent while the server restarts waits for it instead of failing.
        during = await client.call_tool("toy__echo", {"text": "anyone?"})
        assert not during.is_error and during.content[0].text == "anyone?"  # type: ignore[union-attr]
        assert restarted(gateway)
        again = await client.call_tool("toy__increment", {})
        assert not again.is_error and again.content[0].text == "1"  # type: ignore[union-attr]


async def test_a_server_closing_its_connection_is_logged_as_a_warning_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, {"toy": toy_stdio()}, restart_backoff_initial=0.2)
    with caplog.at_level(logging.WARNING, logger="gateway.upstreams.connection"), logged(level=logging.WARNING) as log:
        async with gateway_client(config) as (_, client):
            await client.call_tool("toy__crash", {})
            await log.until(containing("connection closed by the server"), "the warning that the server closed")
    closed = [record for record in caplog.records if "connection closed by the server" in record.getMessage()]
    assert closed and closed[0].levelno == logging.WARNING and "upstream toy" in closed[0].getMessage()


async def test_a_new_upstream_tool_appears_and_connected_clients_are_told(tmp_path: Path) -> None:
    received, handle = collector()
    config = make_config(tmp_path, placeholder(["alpha", "beta"]))
    transports = in_memory({"alpha": toy("alpha"), "beta": toy("beta")})
    async with gateway_client(config, transports=transports, message_handler=handle) as (gateway, client):
        beta_before = [tool.name for tool in gateway.catalog.tools if tool.source == "beta"]
        await client.call_tool("alpha__grow", {"tool_name": "fresh"})
        await catalog_until(gateway, lambda: gateway.catalog.tool("alpha__fresh") is not None, "alpha__fresh")
        await received.until(lambda: told_tools_changed(received), "a tools/list_changed notification")
        assert [tool.name for tool in gateway.catalog.tools if tool.source == "beta"] == beta_before
        result = await client.call_tool("alpha__fresh", {})
        assert result.content[0].text == "added tool"  # type: ignore[union-attr]


async def test_http_clients_are_told_when_an_upstream_list_changes(tmp_path: Path) -> None:
    received, handle = collector()
    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy", message_handler=handle) as client,
    ):
        await client.call_tool("toy__grow", {"tool_name": "sprout"})
        await received.until(lambda: told_tools_changed(received), "a tools/list_changed notification")
        names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        assert "toy__sprout" in names
        assert gateway.catalog.tool("toy__sprout") is not None


async def test_stateless_era_clients_listening_are_told_when_an_upstream_list_changes(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        Client(f"{url}/mcp", mode="2026-07-28") as client,
        client.listen(tools_list_changed=True) as subscription,
    ):
        await client.call_tool("toy__grow", {"tool_name": "bud"})
        with anyio.fail_after(10):
            event = await subscription.__anext__()
        assert isinstance(event, ToolsListChanged)
        names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        assert "toy__bud" in names
