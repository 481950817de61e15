"""Session limits through a real gateway over HTTP with real API keys: a caller over its limit loses
its own least recently used idle session and nobody else's; a caller whose sessions are all busy, and
a newcomer to a full gateway, are refused clearly, and every refusal is audited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from gateway.auth.identity import Identity, handle_key
from gateway.pipeline.audit import AuditEntry
from gateway.service import Gateway
from tests.support.access import CALLERS, KEYS, access_config, auth_section, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "limits", "version": "1"}},
}


@asynccontextmanager
async def limited(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[Gateway, str]]:
    """A gateway with the three role keys, serving a toy server, under the given session limits."""
    config = access_config(tmp_path, {"toy": toy_entry()}, auth=auth_section(anonymous_role="intern"), **settings)
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url):
        yield gateway, f"{url}/mcp"


def _headers(key: str | None, session: str | None = None) -> dict[str, str]:
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "Mcp-Protocol-Version": VERSION}
    return headers


async def _open(http: httpx2.AsyncClient, url: str, key: str | None) -> httpx2.Response:
    return await http.post(url, json=INITIALIZE, headers=_headers(key))


async def _session(http: httpx2.AsyncClient, url: str, key: str | None) -> str:
    """A new initialized session of the caller holding `key`, with its gateway state created."""
    response = await _open(http, url, key)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=_headers(key, session))).status_code == 202
    assert await _status(http, url, key, session, "tools/list") == 200
    return session


async def _status(http: httpx2.AsyncClient, url: str, key: str | None, session: str, method: str = "ping") -> int:
    response = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": method}, headers=_headers(key, session))
    return response.status_code


def _closed(gateway: Gateway, session: str) -> anyio.Event:
    """An event set when the gateway releases the session's state (its `on_close` teardown)."""
    closed = anyio.Event()
    context = gateway.sessions.get(session)
    assert context is not None

    async def done() -> None:
        closed.set()

    context.on_close(done)
    return closed


async def _audited(gateway: Gateway, outcome: str) -> list[AuditEntry]:
    return [entry for entry in await gateway.audit.recent(limit=100) if entry.outcome == outcome]


async def test_a_caller_over_its_limit_loses_its_own_oldest_idle_session_and_nobody_elses(tmp_path: Path) -> None:
    async with limited(tmp_path, max_sessions_per_caller=3) as (gateway, url), httpx2.AsyncClient(timeout=30) as http:
        others = [await _session(http, url, KEYS["analyst"]) for _ in range(3)]
        mine = [await _session(http, url, KEYS["intern"]) for _ in range(3)]
        # The oldest was used last: the least recently used idle session is the second.
        assert await _status(http, url, KEYS["intern"], mine[0]) == 200
        closed = _closed(gateway, mine[1])
        other_closed = [_closed(gateway, session) for session in others]

        newest = await _open(http, url, KEYS["intern"])

        assert newest.status_code == 200
        with anyio.fail_after(10):
            await closed.wait()
        assert await _status(http, url, KEYS["intern"], mine[1]) == 404
        assert [await _status(http, url, KEYS["intern"], s) for s in (mine[0], mine[2])] == [200, 200]
        assert [await _status(http, url, KEYS["analyst"], s) for s in others] == [200, 200, 200]
        assert not any(event.is_set() for event in other_closed)
        [evicted] = await _audited(gateway, "evicted:sessions")
        assert (evicted.caller, evicted.session) == ("api_key:ian", mine[1])


async def test_a_caller_whose_sessions_are_all_busy_is_refused_clearly_and_audited(tmp_path: Path) -> None:
    async with (
        limited(tmp_path, max_sessions_per_caller=3) as (gateway, url),
        httpx2.AsyncClient(timeout=30) as http,
        AsyncExitStack() as streams,
    ):
        mine = [await _session(http, url, KEYS["intern"]) for _ in range(3)]
        for session in mine:
            # An open event stream keeps its session busy for as long as it stays open.
            headers = _headers(KEYS["intern"], session) | {"Accept": "text/event-stream"}
            stream = await streams.enter_async_context(http.stream("GET", url, headers=headers))
            assert stream.status_code == 200

        refused = await _open(http, url, KEYS["intern"])

        assert refused.status_code == 429
        error = refused.json()["error"]
        assert "the limit is 3" in error["message"]
        assert "DELETE" in error["message"]
        assert [await _status(http, url, KEYS["intern"], s) for s in mine] == [200, 200, 200]
        assert (await _open(http, url, KEYS["analyst"])).status_code == 200
        [row] = await _audited(gateway, "refused:sessions")
        assert row.caller == "api_key:ian"
        assert row.detail == error["message"]


async def test_a_full_gateway_refuses_a_newcomer_without_ending_anyone_elses_session(tmp_path: Path) -> None:
    async with limited(tmp_path, max_sessions=3) as (gateway, url), httpx2.AsyncClient(timeout=30) as http:
        held = [
            (KEYS["admin"], await _session(http, url, KEYS["admin"])),
            (KEYS["admin"], await _session(http, url, KEYS["admin"])),
            (KEYS["analyst"], await _session(http, url, KEYS["analyst"])),
        ]
        closed = [_closed(gateway, session) for _, session in held]

        refused = await _open(http, url, KEYS["intern"])

        assert refused.status_code == 503
        assert "3 sessions are open" in refused.json()["error"]["message"]
        assert [await _status(http, url, key, session) for key, session in held] == [200, 200, 200]
        assert not any(event.is_set() for event in closed)
        assert await _audited(gateway, "evicted:sessions") == []
        [row] = await _audited(gateway, "refused:sessions")
        assert row.caller == "api_key:ian"


async def test_anonymous_clients_count_as_one_caller(tmp_path: Path) -> None:
    async with limited(tmp_path, max_sessions_per_caller=2) as (gateway, url), httpx2.AsyncClient(timeout=30) as http:
        first, second = [await _session(http, url, None) for _ in range(2)]
        signed_in = await _session(http, url, KEYS["intern"])

        assert (await _open(http, url, None)).status_code == 200

        assert await _status(http, url, None, first) == 404
        assert await _status(http, url, None, second) == 200
        assert await _status(http, url, KEYS["intern"], signed_in) == 200
        [evicted] = await _audited(gateway, "evicted:sessions")
        assert (evicted.caller, evicted.session) == ("anonymous", first)


async def test_at_a_full_gateway_a_caller_replaces_its_own_idle_session(tmp_path: Path) -> None:
    async with limited(tmp_path, max_sessions=3) as (gateway, url), httpx2.AsyncClient(timeout=30) as http:
        mine = [await _session(http, url, KEYS["admin"]) for _ in range(2)]
        other = await _session(http, url, KEYS["analyst"])

        assert (await _open(http, url, KEYS["admin"])).status_code == 200

        assert await _status(http, url, KEYS["admin"], mine[0]) == 404
        assert await _status(http, url, KEYS["admin"], mine[1]) == 200
        assert await _status(http, url, KEYS["analyst"], other) == 200
        [evicted] = await _audited(gateway, "evicted:sessions")
        assert evicted.session == mine[0]


async def test_a_stateless_caller_past_its_limit_of_handles_loses_its_least_recently_used_one(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, max_sessions_per_caller=2)
    now = iter(range(1000, 2000))
    ian = Identity(CALLERS["intern"], "intern", "api_key")
    ann = Identity(CALLERS["analyst"], "analyst", "api_key")
    async with Gateway(config, transports=in_memory({"toy": toy()}), clock=lambda: float(next(now))) as gateway:

        def touch(identity: Identity, handle: str) -> None:
            gateway.open_session(handle_key(identity, handle), identity, "stateless", handle)

        for identity, handle in ((ian, "a"), (ian, "b"), (ann, "a"), (ann, "b"), (ian, "a"), (ian, "c")):
            touch(identity, handle)

        live = sorted((context.caller, context.handle) for context in gateway.sessions.live())
    assert live == [("api_key:ann", "a"), ("api_key:ann", "b"), ("api_key:ian", "a"), ("api_key:ian", "c")]
