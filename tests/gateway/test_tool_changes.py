"""A changed tool is a new tool: an upstream that changes a definition after it was pinned meets its
server's `on_tool_change` policy, through a real gateway over HTTP, its admin API, the command line,
metrics and audit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError

from gateway.config.loading import parse_config
from gateway.config.model import GatewayConfig
from gateway.service import Gateway
from tests.gateway.test_admin_cli import ROLES, run
from tests.support.access import KEYS, auth_section, http_client
from tests.support.harness import (
    collector,
    gateway_client,
    http_gateway,
    in_memory,
    listening,
    make_config,
    told_tools_changed,
    until_told_of,
)
from tests.support.metrics import parse, value
from tests.support.turncoat import HONEST, POISONED, poison, turncoat
from tests.support.waiting import Inbox, catalog_until, containing, logged, poll_until

pytestmark = pytest.mark.anyio

TOOL = "notes__read_note"


def notes_config(tmp_path: Path, **entry: Any) -> GatewayConfig:
    """The turncoat server as `notes` in the config file (reached in memory), API changes allowed."""
    return make_config(tmp_path, {"notes": {"command": "unused", **entry}}, admin_without_auth=True)


def listed(result: types.ListToolsResult) -> dict[str, types.Tool]:
    """The listed tools by name."""
    return {tool.name: tool for tool in result.tools}


@asynccontextmanager
async def watched(
    config: GatewayConfig, server: MCPServer
) -> AsyncIterator[tuple[Gateway, Client, Inbox[Any], httpx2.AsyncClient]]:
    """The gateway over HTTP, a handshake-era client with its notification stream open (and what it
    received), and an HTTP client of the gateway."""
    received, handle = collector()
    async with (
        http_gateway(config, transports=in_memory({"notes": server})) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy", message_handler=handle) as client,
        httpx2.AsyncClient(base_url=url, timeout=30) as http,
    ):
        assert listed(await client.list_tools())[TOOL].description == HONEST
        await poll_until(lambda: listening(gateway), "the client's notification stream")
        yield gateway, client, received, http


async def turned(client: Client, received: Inbox[Any]) -> None:
    """Have the upstream change `read_note` and wait until the gateway tells the client its list changed."""
    received.clear()
    assert not (await client.call_tool("notes__turn", {})).is_error
    await received.until(lambda: told_tools_changed(received), "a tools/list_changed notification")


async def samples(http: httpx2.AsyncClient) -> Any:
    """The gateway's metrics as scraped now."""
    return parse((await http.get("/metrics")).text)[1]


async def test_a_server_registered_through_the_api_loses_a_changed_tool_until_an_admin_accepts_it(
    tmp_path: Path,
) -> None:
    server = turncoat()
    config = make_config(tmp_path, {}, admin_without_auth=True)
    received, handle = collector()
    async with (
        http_gateway(config, transports=in_memory({"notes": server})) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy", message_handler=handle) as client,
        httpx2.AsyncClient(base_url=url, timeout=30) as http,
    ):
        await poll_until(lambda: listening(gateway), "the client's notification stream")
        await gateway.servers.add({"name": "notes", "command": "unused"})
        await until_told_of(client, received, TOOL)
        assert listed(await client.list_tools())[TOOL].description == HONEST

        await turned(client, received)
        assert TOOL not in listed(await client.list_tools())
        with pytest.raises(MCPError, match="changed on server 'notes' and is held until an admin reviews"):
            await client.call_tool(TOOL, {"path": "a", "copy_to": "b"})

        changes = (await http.get("/api/v1/changes")).json()["changes"]
        assert [(c["server"], c["tool"], c["status"]) for c in changes] == [("notes", "read_note", "pending")]
        change = changes[0]
        assert change["old"]["definition"]["description"] == HONEST
        assert change["new"]["definition"]["description"] == POISONED
        assert change["fields"] == ["description", "inputSchema"]
        assert f"-  {HONEST}" in change["diff"] and f"+  {POISONED}" in change["diff"]
        assert '+      "copy_to": {' in change["diff"]

        received.clear()
        accepted = await http.post(f"/api/v1/changes/{change['id']}/accept", json={})
        assert accepted.status_code == 200 and accepted.json()["change"]["status"] == "accepted"
        await received.until(lambda: told_tools_changed(received), "a tools/list_changed notification")
        tool = listed(await client.list_tools())[TOOL]
        assert tool.description == POISONED and "copy_to" in tool.input_schema["properties"]
        again = await http.post(f"/api/v1/changes/{change['id']}/accept", json={})
        assert again.status_code == 409

        scraped = await samples(http)
        for decision in ("held", "accepted"):
            assert value(scraped, "gateway_tool_changes_total", server="notes", decision=decision) == 1
        rows = await gateway.audit.recent(10, tool="notes/read_note")
        assert [row.outcome for row in rows] == ["tool_change:accepted", "tool_change:held"]
        assert rows[0].caller == "api:local:local" and change["id"] in rows[0].detail
        assert rows[1].args_digest == change["new"]["fingerprint"]


async def test_a_file_server_warns_serving_the_changed_tool_until_an_admin_rejects_it(tmp_path: Path) -> None:
    async with watched(notes_config(tmp_path), turncoat()) as (gateway, client, received, http):
        await turned(client, received)
        assert listed(await client.list_tools())[TOOL].description == POISONED
        (change,) = (await http.get("/api/v1/changes")).json()["changes"]
        assert change["status"] == "pending"

        received.clear()
        rejected = await http.post(f"/api/v1/changes/{change['id']}/reject", json={})
        assert rejected.json()["change"]["status"] == "rejected"
        await received.until(lambda: told_tools_changed(received), "a tools/list_changed notification")
        assert TOOL not in listed(await client.list_tools())

        scraped = await samples(http)
        for decision in ("warned", "rejected"):
            assert value(scraped, "gateway_tool_changes_total", server="notes", decision=decision) == 1
        rows = await gateway.audit.recent(10, tool="notes/read_note")
        assert [row.outcome for row in rows] == ["tool_change:rejected", "tool_change:warned"]


async def test_allow_serves_and_pins_a_changed_tool_at_once_and_audits_it(tmp_path: Path) -> None:
    config = notes_config(tmp_path, on_tool_change="allow")
    async with watched(config, turncoat()) as (gateway, client, received, http):
        await turned(client, received)
        assert listed(await client.list_tools())[TOOL].description == POISONED
        assert (await http.get("/api/v1/changes")).json()["changes"] == []
        scraped = await samples(http)
        assert value(scraped, "gateway_tool_changes_total", server="notes", decision="allowed") == 1
        (row,) = await gateway.audit.recent(10, tool="notes/read_note")
        assert row.outcome == "tool_change:allowed" and "description, inputSchema changed" in row.detail


async def test_a_pin_survives_a_restart_and_a_change_made_while_the_gateway_was_down_stays_held(
    tmp_path: Path,
) -> None:
    server = turncoat()
    config = notes_config(tmp_path, on_tool_change="hold")
    async with gateway_client(config, transports=in_memory({"notes": server})) as (_, client):
        assert listed(await client.list_tools())[TOOL].description == HONEST
    poison(server)
    ids = []
    for _ in range(2):
        async with gateway_client(config, transports=in_memory({"notes": server})) as (gateway, client):
            assert TOOL not in listed(await client.list_tools())
            (change,) = await gateway.pins.changes()
            assert (change.status, change.new_definition["description"]) == ("pending", POISONED)
            ids.append(change.id)
    assert ids[0] == ids[1]


async def test_a_rejected_definition_stays_hidden_and_a_further_change_opens_a_new_review(tmp_path: Path) -> None:
    config = notes_config(tmp_path, on_tool_change="hold")
    async with gateway_client(config, transports=in_memory({"notes": turncoat()})) as (gateway, client):
        with logged() as log:
            await client.call_tool("notes__turn", {})
            await log.until(containing("held until change"), "the word that the changed tool is held")
            (first,) = await gateway.pins.changes()
            await gateway.pins.decide(first.id, False, "test")
            assert gateway.catalog.tool(TOOL) is None

            told = len(log.lines)
            await client.call_tool("notes__turn", {"description": "Read a note, now with a copy."})
            await log.until(containing("held until change"), "the word that the further change is held", told)
        newest, rejected = await gateway.pins.changes()
        assert (rejected.id, rejected.status) == (first.id, "rejected")
        assert newest.status == "pending" and newest.new_definition["description"] == "Read a note, now with a copy."
        assert gateway.catalog.tool(TOOL) is None


async def test_a_held_tool_is_named_held_only_to_who_may_see_it_and_an_admin_accepts_it_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    document = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "servers": {"notes": {"command": "unused", "on_tool_change": "hold"}},
        "auth": auth_section(),
        "roles": ROLES,
    }
    config = parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    async with (
        http_gateway(config, transports=in_memory({"notes": turncoat()})) as (gateway, url),
        http_client(url, KEYS["admin"]) as client,
        http_client(url, KEYS["analyst"]) as analyst,
    ):
        await client.call_tool("notes__turn", {})
        await catalog_until(gateway, lambda: gateway.catalog.tool(TOOL) is None, f"{TOOL} to leave the catalog")
        with pytest.raises(MCPError, match="is held until"):
            await client.call_tool(TOOL, {"path": "a"})
        # A role that may not see the tool learns nothing of it, held or not.
        with pytest.raises(MCPError, match=f"^Unknown tool: '{TOOL}'$"):
            await analyst.call_tool(TOOL, {"path": "a"})
        code, out, err = await run(capsys, monkeypatch, KEYS["analyst"], "changes", "list", "--url", url)
        assert code == 1 and "admin" in err and "HTTP 403" in err

        code, out, _ = await run(capsys, monkeypatch, KEYS["admin"], "changes", "list", "--url", url)
        header, row, *diff = out.splitlines()
        assert header.split() == ["ID", "STATUS", "SERVER", "TOOL", "CHANGED"]
        change_id, *rest = row.split()
        assert rest == ["pending", "notes", "read_note", "description,", "inputSchema"]
        assert f"    +  {POISONED}" in diff

        code, out, _ = await run(capsys, monkeypatch, KEYS["admin"], "changes", "accept", change_id, "--url", url)
        assert code == 0 and out == f"{change_id} accepted: read_note on notes\n"
        assert gateway.catalog.tool(TOOL) is not None
        code, _, err = await run(capsys, monkeypatch, KEYS["admin"], "changes", "reject", change_id, "--url", url)
        assert code == 1 and "only a pending change is decided (HTTP 409)" in err
