"""The HTTP edge every route shares: Host and Origin checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.access import KEYS, ROLES, access_config, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

ROUTES = [
    "/mcp",
    "/readyz",
    "/healthz",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ADMIN_ROLES: dict[str, Any] = {**ROLES, "admin": {**ROLES["admin"], "admin": True}}


async def _answer(http: httpx2.AsyncClient, url: str, route: str, headers: dict[str, str]) -> tuple[int, str]:
    if route == "/mcp":
        response = await http.post(f"{url}{route}", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
    else:
        response = await http.get(f"{url}{route}", headers=headers)
    return response.status_code, response.text


@pytest.mark.parametrize(
    "headers",
    [{"Host": "evil.example"}, {"Host": "127.0.0.1.evil.example:8000"}, {"Origin": "http://evil.example"}],
    ids=["foreign host", "look-alike host", "foreign origin"],
)
async def test_every_route_refuses_a_foreign_host_or_origin_as_mcp_does(
    tmp_path: Path, headers: dict[str, str]
) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=ADMIN_ROLES)
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        answers = {route: await _answer(http, url, route, headers) for route in ROUTES}
    expected = (421, "Invalid Host header") if "Host" in headers else (403, "Invalid Origin header")
    assert answers == dict.fromkeys(ROUTES, expected)


async def test_every_route_answers_a_loopback_host_and_origin(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=ADMIN_ROLES)
    headers = {"Host": "localhost:9", "Origin": "http://localhost:3000", "Authorization": f"Bearer {KEYS['admin']}"}
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        answers = {route: (await _answer(http, url, route, headers))[0] for route in ROUTES}
    assert answers == dict.fromkeys(ROUTES, 200)
