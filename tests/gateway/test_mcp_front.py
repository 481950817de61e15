"""The MCP endpoints past Starlette's router: the same checks in the same order, the same answers,
for `/mcp`, `/mcp/g/<group>` and the paths that only look like them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.frontdoors.httpsessions import LimitedSessionManager
from gateway.frontdoors.sdkserver import SessionManagerSeam
from tests.support.access import KEYS, ROLES, access_config, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.rawsessions import INITIALIZE, MCP_HEADERS, raw_session, raw_status
from tests.support.rawsessions import headers as raw_headers
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

ADMIN: dict[str, str] = {"Authorization": f"Bearer {KEYS['admin']}"}
ADMIN_ROLES: dict[str, Any] = {**ROLES, "admin": {**ROLES["admin"], "admin": True}}
GROUPS = {"echoing": {"allow": ["toy__echo"]}}
# The endpoints, a group that does not exist, and paths that only look like an endpoint.
PATHS = ["/mcp", "/mcp/g/echoing", "/mcp/g/nosuch", "/mcp/g/", "/mcp/", "/mcp/g", "/mcp/g/echoing/", "/mcpx"]


async def _post(http: httpx2.AsyncClient, url: str, body: Any, headers: dict[str, str]) -> tuple[int, str]:
    response = await http.post(url, json=body, headers={**MCP_HEADERS, **headers})
    kind = response.headers.get("content-type", "").split(";")[0]
    return response.status_code, kind


def _config(tmp_path: Path) -> Any:
    return access_config(tmp_path, {"toy": toy_entry()}, roles=ADMIN_ROLES, groups=GROUPS)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Host": "evil.example", **ADMIN}, (421, "text/plain")),
        ({"Origin": "http://evil.example", **ADMIN}, (403, "text/plain")),
        ({}, (401, "application/json")),
        ({"Authorization": "Bearer wrong"}, (401, "application/json")),
    ],
    ids=["foreign host", "foreign origin", "no credential", "bad credential"],
)
async def test_an_endpoint_or_a_path_like_one_is_checked_for_host_origin_and_credential_first(
    tmp_path: Path, headers: dict[str, str], expected: tuple[int, str]
) -> None:
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        httpx2.AsyncClient() as http,
    ):
        answers = {path: await _post(http, url + path, INITIALIZE, headers) for path in PATHS}
    # `/mcpx` is no MCP path: only the Host and Origin check comes before its 404.
    unprotected = expected if expected[0] in (421, 403) else (404, "text/html")
    assert answers == {**dict.fromkeys(PATHS, expected), "/mcpx": unprotected}


async def test_an_authenticated_request_reaches_the_endpoint_its_path_names_and_no_other(tmp_path: Path) -> None:
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        httpx2.AsyncClient() as http,
    ):
        answers = {path: await _post(http, url + path, INITIALIZE, ADMIN) for path in PATHS}
        batches = {path: await _post(http, url + path, [INITIALIZE], ADMIN) for path in PATHS}
    assert answers == {
        "/mcp": (200, "text/event-stream"),
        "/mcp/g/echoing": (200, "text/event-stream"),
        "/mcp/g/nosuch": (404, "application/json"),
        "/mcp/g/": (404, "text/html"),
        "/mcp/": (404, "text/html"),
        "/mcp/g": (404, "text/html"),
        "/mcp/g/echoing/": (404, "text/html"),
        "/mcpx": (404, "text/html"),
    }
    # The envelope is checked on what reads as an endpoint, a group's with no name included.
    refused = {"/mcp", "/mcp/g/echoing", "/mcp/g/nosuch", "/mcp/g/"}
    assert batches == {path: (400, "application/json") if path in refused else answers[path] for path in PATHS}


async def test_an_unhandled_error_under_mcp_is_a_plain_500_on_a_connection_that_stays_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: LimitedSessionManager, scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(LimitedSessionManager, "serve", broken)
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        httpx2.AsyncClient() as http,
    ):
        answers = [await http.post(url + path, json=INITIALIZE, headers={**MCP_HEADERS, **ADMIN}) for path in PATHS[:2]]
        healthy = await http.get(url + "/healthz")
    for answer in answers:
        assert (answer.status_code, answer.text) == (500, "Internal Server Error")
        assert answer.headers["content-type"] == "text/plain; charset=utf-8"
        assert "close" not in answer.headers.get("connection", "")
    assert healthy.status_code == 200


async def test_a_known_session_s_posts_skip_the_sdk_s_session_look_up_and_every_other_request_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[str] = []
    original = SessionManagerSeam.sdk_stateful

    async def counted(self: SessionManagerSeam, scope: Any, receive: Any, send: Any) -> None:
        looked_up.append(next(v.decode() for k, v in scope["headers"] if k == b"mcp-session-id"))
        await original(self, scope, receive, send)

    monkeypatch.setattr(SessionManagerSeam, "sdk_stateful", counted)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "toy__echo", "arguments": {"text": "hi"}},
    }
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        httpx2.AsyncClient() as http,
    ):
        endpoint = url + "/mcp"
        session = await raw_session(http, endpoint, KEYS["admin"])
        answered = await http.post(endpoint, json=call, headers=raw_headers(KEYS["admin"], session))
        stranger = await raw_status(http, endpoint, KEYS["intern"], session, "tools/list")
        elsewhere = await http.post(url + "/mcp/g/echoing", json=call, headers=raw_headers(KEYS["admin"], session))
        ended = await http.delete(endpoint, headers=raw_headers(KEYS["admin"], session))
        after = await raw_status(http, endpoint, KEYS["admin"], session, "tools/list")
    assert answered.status_code == 200 and '"hi"' in answered.text
    assert (stranger, elsewhere.status_code, ended.status_code, after) == (404, 404, 200, 404)
    # The SDK looked up the session only for the other caller's request, the DELETE and the request
    # of the session that ended (the opening request and the other endpoint's are answered before).
    assert looked_up == [session, session, session]
