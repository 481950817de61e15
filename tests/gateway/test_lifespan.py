"""The gateway's lifespan and clocks: databases open on entry, time comes from the injected clocks,
and a service that ended under a live process says so on `/healthz`."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.support.harness import http_gateway, in_memory, make_config
from tests.support.toy import build_server as build_toy

pytestmark = pytest.mark.anyio

DATABASES = ("audit.db", "confirmations.db", "approvals.db")


async def test_a_gateway_opens_its_databases_when_entered_and_not_when_made(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": {"command": "unused"}})
    data_dir = tmp_path / "data"
    gateway = Gateway(config, transports=in_memory({"toy": build_toy("toy")}))
    assert [name for name in DATABASES if (data_dir / name).exists()] == []
    async with gateway:
        assert [name for name in DATABASES if (data_dir / name).exists()] == list(DATABASES)


async def test_audit_rows_take_their_time_from_the_injected_wall_clock(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": {"command": "unused"}})
    epoch = 1_700_000_000.0
    gateway = Gateway(config, transports=in_memory({"toy": build_toy("toy")}), wall_clock=lambda: epoch)
    async with gateway, Client(build_server(gateway), mode="legacy") as client:
        await client.call_tool("toy__echo", {"text": "hi"})
        with pytest.raises(MCPError):
            await client.call_tool("toy__no_such_tool", {})
        rows = await gateway.audit.recent(limit=10)
    assert sorted((row.tool, row.epoch) for row in rows) == [("toy__echo", epoch), ("toy__no_such_tool", epoch)]


async def test_a_service_that_ended_under_a_live_process_fails_healthz_and_readyz_saying_why(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": {"command": "unused"}})
    transports = in_memory({"toy": build_toy("toy")})
    async with http_gateway(config, transports=transports) as (gateway, url), httpx2.AsyncClient() as http:
        before = (await http.get(f"{url}/healthz")).status_code

        async def broken() -> None:
            raise RuntimeError("a failure nothing caught")

        # Every loop the service starts is kept running through failures (`Background.keep`): a
        # task started in its group past that stands for a failure that would still end it.
        gateway.router.group.start_soon(broken)
        with anyio.fail_after(30):
            await gateway.ended.wait()
        health = await http.get(f"{url}/healthz")
        ready = await http.get(f"{url}/readyz")
    assert before == 200
    assert health.status_code == 503 and "a failure nothing caught" in health.text
    assert ready.status_code == 503 and ready.json()["ready"] is False
