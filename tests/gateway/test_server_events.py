"""Each server's history for the dashboard: the states its connection enters, a restart and a
change marked, written beside the audit trail; a replaced connection no longer speaks for it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gateway.stores.serverevents import ServerEvent
from gateway.upstreams.connection import State
from tests.support.harness import http_gateway, in_memory, make_config, placeholder
from tests.support.toy import build_server as toy
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio


def history(events: list[ServerEvent], server: str) -> list[str]:
    """The events of `server`, oldest first."""
    return [event.event for event in events if event.server == server]


async def test_a_server_connecting_then_restarted_leaves_its_states_and_a_restart_mark(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (gateway, _):
        first = gateway.upstreams["toy"]
        await gateway.servers.restart("toy")
        fresh = gateway.upstreams["toy"]
        await fresh.first_attempt.wait()
        assert fresh.status().state == State.READY
        # The replaced connection ends once drained: what it enters then is not the server's state.
        await poll_until(lambda: first.status().state == State.STOPPED, "the replaced connection stopped")
        assert await gateway.server_events.flush()
        events = gateway.server_events.between(0, math.inf)
    assert history(events, "toy") == ["connecting", "ready", "restart", "connecting", "ready"]
    # Each names the replica that saw it: this gateway, as the other replicas would know it.
    assert {event.replica for event in events} == {gateway.shared.replica}


async def test_a_removed_server_is_marked_and_stops(tmp_path: Path) -> None:
    config = make_config(tmp_path, {})
    async with http_gateway(config, transports=in_memory({"side": toy("side")})) as (gateway, _):
        await gateway.servers.add({"name": "side", "command": "unused"})
        await gateway.upstreams["side"].first_attempt.wait()
        assert gateway.upstreams["side"].status().state == State.READY
        await gateway.servers.remove("side")
        assert await gateway.server_events.flush()
        events = gateway.server_events.between(0, math.inf)
    told = history(events, "side")
    # Its connection may pass through `reconnecting` as it is cancelled, at the same instant.
    assert told[:4] == ["added", "connecting", "ready", "removed"] and told[-1] == "stopped"
