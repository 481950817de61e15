"""The gateway's lifespan and clocks: databases open on entry, time comes from the injected clocks."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.support.harness import in_memory, make_config
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
