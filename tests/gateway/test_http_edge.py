"""The HTTP edge every route shares: Host and Origin checks, and what `/readyz` tells whom."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.access import KEYS, ROLES, access_config, auth_section, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.rawsessions import INITIALIZE, MCP_HEADERS
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

ROUTES = [
    "/mcp",
    "/readyz",
    "/healthz",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
]
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


async def test_readyz_names_servers_only_to_admins_when_authentication_is_on(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry(required=True)}, roles=ADMIN_ROLES)
    callers = {"nobody": None, "analyst": KEYS["analyst"], "bad key": "no-such-key-0123456789", "admin": KEYS["admin"]}
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        answers = {}
        for caller, key in callers.items():
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            response = await http.get(f"{url}/readyz", headers=headers)
            answers[caller] = (response.status_code, response.json())
    assert answers["nobody"] == answers["analyst"] == answers["bad key"] == (200, {"ready": True})
    assert answers["admin"][0] == 200 and answers["admin"][1]["servers"]["toy"]["state"] == "ready"


async def test_readyz_names_servers_to_anyone_when_authentication_is_off_on_loopback(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, auth=auth_section(enabled=False))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        body = (await http.get(f"{url}/readyz")).json()
    assert body["servers"]["toy"]["state"] == "ready"
