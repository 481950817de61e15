"""A misbehaving upstream is contained: its garbage is logged once per kind, its storms are coalesced."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from gateway.upstreams.connection import State
from tests.support.faulty import stormy_server
from tests.support.harness import REPO, collector, gateway_client, in_memory, make_config, placeholder, tools_told
from tests.support.probe import gated
from tests.support.toy import build_server as toy
from tests.support.waiting import catalog_until, containing, logged

pytestmark = pytest.mark.anyio

BAD_LINES = 300


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings (and worse) logged so far."""
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


async def test_a_server_writing_garbage_yields_a_few_log_lines_and_keeps_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    entry = {"command": sys.executable, "args": ["-m", "tests.support.faulty"], "cwd": str(REPO)}
    config = make_config(tmp_path, {"faulty": entry})
    async with gateway_client(config) as (_, client):
        with logged(level=logging.WARNING) as log:
            dumped = await client.call_tool("faulty__garbage", {"count": BAD_LINES})
            assert dumped.content[0].text == "dumped"  # type: ignore[union-attr]
            await log.until(containing("notifications/progress"), "the warning about the bad progress notices")
        after = await client.call_tool("faulty__echo", {"text": "still here"})
        assert after.content[0].text == "still here"  # type: ignore[union-attr]
        assert any("not a JSON-RPC message" in line for line in warnings(caplog))
    # Three kinds of bad message, each told once (the SDK's record with it) and summarised when the
    # connection ends: a handful of lines for 900 bad messages.
    told = warnings(caplog)
    assert len(told) <= 12, told
    assert any(f"not a JSON-RPC message, {2 * BAD_LINES - 1} more" in line for line in told), told


async def test_a_list_changed_storm_becomes_a_few_relists_and_a_few_client_notifications(tmp_path: Path) -> None:
    server, counts = stormy_server()
    received, handle = collector()
    config = make_config(tmp_path, placeholder(["stormy"]), notify_coalesce_ms=1000)
    transports = in_memory({"stormy": server})  # type: ignore[dict-item]
    async with gateway_client(config, transports=transports, message_handler=handle) as (gateway, client):
        before = counts.lists
        started = time.monotonic()
        await client.call_tool("stormy__storm", {"count": 1000})
        # Even a slow machine's storm of many seconds gets one re-list and one notification per second.
        allowed = 2 + (time.monotonic() - started) / 1.0
        await catalog_until(gateway, lambda: gateway.catalog.tool("stormy__calm") is not None, "stormy__calm")
        await received.until(lambda: tools_told(received) >= 1, "a tools/list_changed notification")
        assert counts.lists - before <= allowed
        assert tools_told(received) <= allowed


async def test_telling_clients_of_a_change_holds_up_no_server_joining_after_it(tmp_path: Path) -> None:
    # Clients are told at most once a minute, and the clock stands still: every change after the
    # first waits out the whole interval, longer than a server may take to connect, before it is told.
    config = make_config(tmp_path, placeholder(["one", "two"]), notify_coalesce_ms=60_000, upstream_connect_timeout=30)
    joins = anyio.Event()
    gateway = Gateway(config, transports={**in_memory({"one": toy("one")}), "two": gated(toy("two"), joins)})
    server = build_server(gateway, clock=lambda: 0.0)
    async with gateway.running(), Client(server, mode="legacy"):
        await gateway.upstreams["one"].first_attempt.wait()
        assert [status.state for status in gateway.servers.statuses()] == [State.READY, State.CONNECTING]
        joins.set()
        # Within its connect timeout, or its first attempt fails.
        await gateway.upstreams["two"].first_attempt.wait()
        assert [status.state for status in gateway.servers.statuses()] == [State.READY, State.READY]


async def test_a_progress_flood_reaches_the_client_as_its_first_and_last_reports(tmp_path: Path) -> None:
    server, _ = stormy_server()
    config = make_config(tmp_path, placeholder(["stormy"]))
    reports: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(progress)

    gateway = Gateway(config, transports=in_memory({"stormy": server}))  # type: ignore[dict-item]
    # A clock that stands still: every report after the first comes within the throttle's interval.
    async with gateway, Client(build_server(gateway, clock=lambda: 0.0), mode="legacy") as client:
        result = await client.call_tool("stormy__progress", {"count": 500}, progress_callback=on_progress)
    assert not result.is_error
    assert reports == [1, 500]
