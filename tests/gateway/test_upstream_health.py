"""Upstream health: pings, unhealthy servers, restarts with backoff, and calls that meet a restart."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from gateway.upstreams.connection import State, Status
from tests.support.harness import REPO, gateway_client, http_gateway, make_config
from tests.support.waiting import containing, logged, poll_until

pytestmark = pytest.mark.anyio

READY = "upstream faulty ready"
CLOSED = "upstream faulty: connection closed by the server"


def faulty(down: Path, **options: Any) -> dict[str, Any]:
    """The config entry of the faulty stdio server, kept down while `down` exists."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.support.faulty"],
        "cwd": str(REPO),
        "env": {"FAULTY_DOWN": str(down)},
        **options,
    }


def status(gateway: Gateway) -> Status:
    """The status of the only upstream."""
    return gateway.servers.statuses()[0]


def text(result: Any) -> str:
    """The text of a result's first block."""
    return str(result.content[0].text)


async def kill(client: Client) -> None:
    """Kill the faulty server's process at once, as the OOM killer would."""
    os.kill(int(text(await client.call_tool("faulty__pid", {}))), signal.SIGKILL)


def ready_after(gateway: Gateway, restarts: int) -> bool:
    """Whether the upstream is ready again after at least `restarts` restarts."""
    return status(gateway).state == State.READY and status(gateway).restarts >= restarts


async def test_a_killed_upstream_that_stays_down_goes_unhealthy_then_is_restarted(tmp_path: Path) -> None:
    down = tmp_path / "down"
    settings = {"restart_backoff_initial": 0.05, "restart_backoff_max": 0.2, "unhealthy_after": 3}
    config = make_config(tmp_path, {"faulty": faulty(down)}, **settings)
    async with gateway_client(config) as (gateway, client):
        with logged() as log:
            down.touch()
            await kill(client)
            # Unhealthy after three failures in a row: a state no line of its own announces.
            await poll_until(lambda: status(gateway).state == State.UNHEALTHY, "the server to be unhealthy")
            refused = await client.call_tool("faulty__echo", {"text": "anyone?"})
            assert refused.is_error
            assert "Server 'faulty' is unavailable" in text(refused) and "try again in about" in text(refused)
            # The server's log is named to operators only.
            assert "full log" in (status(gateway).error or "")
            assert "full log" not in text(refused) and str(tmp_path) not in text(refused)
            down.unlink()
            await log.until(containing(READY), "the server ready again")
        assert ready_after(gateway, 3)
        assert text(await client.call_tool("faulty__echo", {"text": "back"})) == "back"


async def test_an_upstream_that_stops_answering_pings_goes_unhealthy_and_is_restarted(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"faulty": faulty(tmp_path / "down")}, health_interval=0.3, unhealthy_after=2)
    async with gateway_client(config) as (gateway, client), anyio.create_task_group() as group:
        # An answered ping is logged nowhere: its time shows in the status only.
        await poll_until(lambda: status(gateway).last_health_check is not None, "a health check")
        assert (status(gateway).last_health_check or 0) > 1e9  # epoch seconds
        with logged() as log:
            group.start_soon(client.call_tool, "faulty__freeze", {})
            await log.until(containing("did not answer 2 health checks in a row"), "the server given up on")
            assert status(gateway).state == State.UNHEALTHY
            await log.until(containing(READY), "the server ready again")
        assert ready_after(gateway, 1)
        assert text(await client.call_tool("faulty__echo", {"text": "thawed"})) == "thawed"


async def test_the_restart_backoff_starts_over_after_a_stable_run(tmp_path: Path) -> None:
    now = [1000.0]
    settings = {"restart_backoff_initial": 0.05, "restart_backoff_max": 0.4, "restart_backoff_reset": 60}
    config = make_config(tmp_path, {"faulty": faulty(tmp_path / "down")}, **settings)
    gateway = Gateway(config, clock=lambda: now[0])
    upstream = gateway.upstreams["faulty"]
    async with gateway, Client(build_server(gateway)) as client:
        waits = []
        for restarts in (1, 2, 3):
            with logged() as log:
                await kill(client)
                await log.until(containing(READY), f"the server ready after restart {restarts}")
            assert ready_after(gateway, restarts)
            waits.append(upstream.backoff.last)
        assert waits == [0.05, 0.1, 0.2]
        now[0] += 60
        with logged() as log:
            await kill(client)
            await log.until(containing(READY), "the server ready after a restart once stable")
        assert ready_after(gateway, 4)
        assert upstream.backoff.last == 0.05


async def test_a_call_sent_while_its_server_restarts_waits_for_it_and_succeeds(tmp_path: Path) -> None:
    # The restart (a second's backoff, then starting Python) outlasts the retries of a read-only call.
    config = make_config(tmp_path, {"faulty": faulty(tmp_path / "down")}, restart_backoff_initial=1.0)
    async with gateway_client(config) as (gateway, client):
        with logged() as log:
            await kill(client)
            await log.until(containing(CLOSED), "the word that the server closed its connection")
        assert status(gateway).state != State.READY
        result = await client.call_tool("faulty__echo", {"text": "waited"})
        assert not result.is_error and text(result) == "waited"
        assert status(gateway).restarts >= 1


async def test_a_call_whose_deadline_passes_during_a_restart_says_when_to_retry(tmp_path: Path) -> None:
    down = tmp_path / "down"
    config = make_config(tmp_path, {"faulty": faulty(down, timeout=1)}, unhealthy_after=1000, restart_backoff_max=2)
    async with gateway_client(config) as (gateway, client):
        with logged() as log:
            down.touch()
            await kill(client)
            await log.until(containing(CLOSED), "the word that the server closed its connection")
        assert status(gateway).state == State.RECONNECTING
        result = await client.call_tool("faulty__echo", {"text": "anyone?"})
        assert result.is_error
        assert re.search(r"Server 'faulty' is restarting; retry in \d+ s", text(result)), text(result)
        assert "full log" not in text(result) and str(tmp_path) not in text(result)


async def test_readyz_shows_an_unhealthy_required_server_and_is_not_ready(tmp_path: Path) -> None:
    down = tmp_path / "down"
    settings = {"restart_backoff_initial": 0.05, "restart_backoff_max": 0.2, "unhealthy_after": 2}
    config = make_config(tmp_path, {"faulty": faulty(down, required=True)}, **settings)
    async with (
        http_gateway(config) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy") as client,
        httpx2.AsyncClient() as http,
    ):
        down.touch()
        await kill(client)
        # Unhealthy after two failures in a row: a state no line of its own announces.
        await poll_until(lambda: status(gateway).state == State.UNHEALTHY, "the server to be unhealthy")
        response = await http.get(f"{url}/readyz")
    assert response.status_code == 503
    detail = response.json()["servers"]["faulty"]
    assert detail["state"] == "unhealthy" and detail["tools"] == 4 and "last_health_check" in detail
