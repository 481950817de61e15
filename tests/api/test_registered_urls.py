"""Servers registered through the admin API are hostile input: their URLs are read strictly, their
hosts resolved once for each connection, every address judged by `registration.allow_urls`, and
the connection made to the address that was checked, with the name kept as the Host header."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from gateway.config.registration import RegistrationPolicy
from gateway.service import Gateway
from gateway.upstreams.addresses import Resolver
from gateway.upstreams.connection import State
from tests.support.addressed import ScriptedResolver, addressed_server
from tests.support.harness import http_gateway, make_config

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def gateway_allowing(
    tmp_path: Path, patterns: list[str], resolver: Resolver
) -> AsyncIterator[tuple[Gateway, str]]:
    """A gateway over HTTP whose admin API anyone on loopback may use, allowing `patterns` and
    resolving with `resolver`."""
    config = make_config(tmp_path, {}, admin_without_auth=True)
    config = replace(config, registration=RegistrationPolicy(allow_urls=tuple(patterns)))
    async with http_gateway(config, resolver=resolver) as served:
        yield served


async def register(url: str, body: dict[str, Any]) -> httpx2.Response:
    """`POST /api/v1/servers` with `body`."""
    async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
        return await http.post("/api/v1/servers", json=body)


async def first_attempt(gateway: Gateway, name: str) -> dict[str, Any]:
    """The server `name` as an admin reads it once it has tried to connect."""
    # A hang guard: connecting to a local server takes milliseconds.
    with anyio.fail_after(30):
        await gateway.upstreams[name].first_attempt.wait()
    return {"state": gateway.upstreams[name].status().state, "error": gateway.upstreams[name].status().error}


async def where(url: str, tool: str) -> dict[str, Any]:
    """What the upstream tool `where` answers through the gateway."""
    async with Client(f"{url}/mcp", mode="legacy") as client:
        result = await client.call_tool(tool, {})
    answer: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return answer


async def test_a_url_with_a_backslash_is_refused_naming_it(tmp_path: Path) -> None:
    url = "https://evil.test\\.example.com/mcp"
    async with gateway_allowing(tmp_path, ["https://*.example.com/**"], ScriptedResolver([])) as (gateway, base):
        # Disabled, so that no build of the gateway would ever try to reach the name.
        response = await register(base, {"name": "evil", "url": url, "enabled": False})
        stored = gateway.registrations.entries("server")
    assert response.status_code == 403, response.text
    assert repr(url) in response.json()["error"] and "backslash" in response.json()["error"]
    assert stored == {}


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "a loopback address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("10.0.0.1", "a private address"),
        ("::ffff:10.0.0.1", "a private address (10.0.0.1)"),
        ("fd00:ec2::254", "a cloud metadata address"),
    ],
)
async def test_a_name_that_resolves_to_an_internal_address_is_refused_at_connect(
    tmp_path: Path, address: str, reason: str
) -> None:
    resolver = ScriptedResolver([address], [address])
    patterns = ["http://*.example.test:*/mcp"]
    # A real server listens on 127.0.0.1: only the address check stands between it and the gateway.
    async with (
        addressed_server("internal", "127.0.0.1") as upstream,
        gateway_allowing(tmp_path, patterns, resolver) as (gateway, base),
    ):
        response = await register(base, {"name": "remote", "url": f"http://mcp.example.test:{upstream.port}/mcp"})
        outcome = await first_attempt(gateway, "remote")
    assert response.status_code == 201, response.text
    assert outcome["state"] == State.FAILED
    assert f"mcp.example.test resolves to {ipaddress.ip_address(address)}, {reason}" in outcome["error"]
    assert upstream.requests == []


async def test_a_pattern_naming_127_0_0_1_lets_the_local_upstream_a_name_could_not_reach(tmp_path: Path) -> None:
    patterns = ["http://127.0.0.1:*/mcp", "http://*.example.test:*/mcp"]
    async with (
        addressed_server("local", "127.0.0.1") as upstream,
        gateway_allowing(tmp_path, patterns, ScriptedResolver(["127.0.0.1"], ["127.0.0.1"])) as (gateway, base),
    ):
        await register(base, {"name": "named", "url": f"http://mcp.example.test:{upstream.port}/mcp"})
        await register(base, {"name": "local", "url": f"http://127.0.0.1:{upstream.port}/mcp"})
        named, local = await first_attempt(gateway, "named"), await first_attempt(gateway, "local")
        answer = await where(base, "local__where")
    assert named["state"] == State.FAILED and "a loopback address" in named["error"]
    assert local["state"] == State.READY
    assert answer == {"server": "local", "host": f"127.0.0.1:{upstream.port}"}


@pytest.mark.parametrize(("transport", "path"), [("http", "/mcp"), ("sse", "/sse")])
async def test_a_name_answering_differently_on_a_second_lookup_is_connected_to_the_address_checked(
    tmp_path: Path, transport: str, path: str
) -> None:
    # The checked answer is 127.0.0.2; every later lookup, and the system's own reading of localhost,
    # say 127.0.0.1, where another server listens on the same port.
    resolver = ScriptedResolver(["127.0.0.2"], ["127.0.0.1"])
    async with (
        addressed_server("other", "127.0.0.1", transport=transport) as other,
        addressed_server("checked", "127.0.0.2", other.port, transport=transport) as checked,
        gateway_allowing(tmp_path, [f"http://localhost:*{path}"], resolver) as (gateway, base),
    ):
        response = await register(base, {"name": "remote", "url": f"http://localhost:{checked.port}{path}"})
        outcome = await first_attempt(gateway, "remote")
        answer = await where(base, "remote__where")
        # Read before the gateway stops: sse_starlette ends the event streams of every server in this
        # process once any uvicorn server in it is stopping, and the connection made again looks up again.
        lookups, reached_other = list(resolver.lookups), list(other.requests)
    assert response.status_code == 201, response.text
    assert outcome["state"] == State.READY, outcome["error"]
    assert answer == {"server": "checked", "host": f"localhost:{checked.port}"}
    assert lookups == ["localhost"]
    assert reached_other == []


async def test_an_upstream_redirecting_elsewhere_does_not_move_the_connection(tmp_path: Path) -> None:
    # Both are allowed: what is tested is whether a redirect moves the connection at all.
    patterns = ["http://localhost:*/mcp", "http://127.0.0.1:*/mcp"]
    resolver = ScriptedResolver(["127.0.0.2"], ["127.0.0.2"])
    async with addressed_server("elsewhere", "127.0.0.1") as elsewhere:
        target = f"http://127.0.0.1:{elsewhere.port}/mcp"
        async with (
            addressed_server("redirecting", "127.0.0.2", redirect=target) as redirecting,
            gateway_allowing(tmp_path, patterns, resolver) as (gateway, base),
        ):
            await register(base, {"name": "remote", "url": f"http://localhost:{redirecting.port}/mcp"})
            outcome = await first_attempt(gateway, "remote")
    assert outcome["state"] == State.FAILED
    assert redirecting.requests and elsewhere.requests == []
