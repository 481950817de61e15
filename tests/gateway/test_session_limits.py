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
from tests.support.rawsessions import headers, open_raw, raw_session, raw_status
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def limited(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[Gateway, str]]:
    """A gateway with the three role keys, serving a toy server, under the given session limits."""
    config = access_config(tmp_path, {"toy": toy_entry()}, auth=auth_section(anonymous_role="intern"), **settings)
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url):
        yield gateway, f"{url}/mcp"


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
        others = [await raw_session(http, url, KEYS["analyst"]) for _ in range(3)]
        mine = [await raw_session(http, url, KEYS["intern"]) for _ in range(3)]
        # The oldest was used last: the least recently used idle session is the second.
        assert await raw_status(http, url, KEYS["intern"], mine[0]) == 200
        closed = _closed(gateway, mine[1])
        other_closed = [_closed(gateway, session) for session in others]

        newest = await open_raw(http, url, KEYS["intern"])

        assert newest.status_code == 200
        with anyio.fail_after(10):
            await closed.wait()
        assert await raw_status(http, url, KEYS["intern"], mine[1]) == 404
        assert [await raw_status(http, url, KEYS["intern"], s) for s in (mine[0], mine[2])] == [200, 200]
        assert [await raw_status(http, url, KEYS["analyst"], s) for s in others] == [200, 200, 200]
        assert not any(event.is_set() for event in other_closed)
        [evicted] = await _audited(gateway, "evicted:sessions")
        assert (evicted.caller, evicted.session) == ("api_key:ian", mine[1])


async def test_a_caller_whose_sessions_are_all_busy_is_refused_clearly_and_audited(tmp_path: Path) -> None:
    async with (
        limited(tmp_path, max_sessions_per_caller=3) as (gateway, url),
        httpx2.AsyncClient(timeout=30) as http,
        AsyncExitStack() as streams,
    ):
        mine = [await raw_session(http, url, KEYS["intern"]) for _ in range(3)]
        for session in mine:
            # An open event stream keeps its session busy for as long as it stays open.
            listening = headers(KEYS["intern"], session) | {"Accept": "text/event-stream"}
            stream = await streams.enter_async_context(http.stream("GET", url, headers=listening))
            assert stream.status_code == 200

        refused = await open_raw(http, url, KEYS["intern"])

        assert refused.status_code == 429
        error = refused.json()["error"]
        assert "the limit is 3" in error["message"]
        assert "DELETE" in error["message"]
        assert [await raw_status(http, url, KEYS["intern"], s) for s in mine] == [200, 200, 200]
        assert (await open_raw(http, url, KEYS["analyst"])).status_code == 200
        [row] = await _audited(gateway, "refused:sessions")
        assert row.caller == "api_key:ian"
        assert row.detail == error["message"]


async def test_a_full_gateway_refuses_a_newcomer_without_ending_anyone_elses_session(tmp_path: Path) -> None:
    async with limited(tmp_path, max_sessions=3) as (gateway, url), httpx2.AsyncClient(timeout=30) as http:
        held = [
            (KEYS["admin"], await raw_session(http, url, KEYS["admin"])),
            (KEYS["admin"], await raw_session(http, url, KEYS["admin"])),
            (KEYS["analyst"], await raw_session(http, url, KEYS["analyst"])),
        ]
        closed = [_closed(gateway, session) for _, session in held]

        refused = await open_raw(http, url, KEYS["intern"])

        assert refused.status_code == 503
        assert "3 sessions are open" in refused.json()["error"]["message"]
        assert [await raw_status(http, url, key, session) for key, session in held] == [200, 200, 200]
        assert not any(event.is_set() for event in closed)
        assert await _audited(gateway, "evicted:sessions") == []
        [row] = await _audited(gateway, "refused:sessions")
        assert row.caller == "api_key:ian"


async def test_anonymous_clients_count_as_one_caller(tmp_path: Path) -> None:
    async with limited(tmp_path, max_sessions_per_caller=2) as (gateway, url), httpx2.AsyncClient(timeout=30) as http:
        first, second = [await raw_session(http, url, None) for _ in range(2)]
        signed_in = await raw_session(http, url, KEYS["intern"])

        assert (await open_raw(http, url, None)).status_code == 200

        assert await raw_status(http, url, None, first) == 404
        assert await raw_status(http, url, None, second) == 200
        assert await raw_status(http, url, KEYS["intern"], signed_in) == 200
        [evicted] = await _audited(gateway, "evicted:sessions")
        assert (evicted.caller, evicted.session) == ("anonymous", first)


async def test_at_a_full_gateway_a_caller_replaces_its_own_idle_session(tmp_path: Path) -> None:
    async with limited(tmp_path, max_sessions=3) as (gateway, url), httpx2.AsyncClient(timeout=30) as http:
        mine = [await raw_session(http, url, KEYS["admin"]) for _ in range(2)]
        other = await raw_session(http, url, KEYS["analyst"])

        assert (await open_raw(http, url, KEYS["admin"])).status_code == 200

        assert await raw_status(http, url, KEYS["admin"], mine[0]) == 404
        assert await raw_status(http, url, KEYS["admin"], mine[1]) == 200
        assert await raw_status(http, url, KEYS["analyst"], other) == 200
        [evicted] = await _audited(gateway, "evicted:sessions")
        assert evicted.session == mine[0]


async def test_a_stateless_caller_past_its_limit_of_handles_loses_its_least_recently_used_one(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, max_sessions_per_caller=2)
    now = iter(range(1000, 2000))
    ian = Identity(CALLERS["intern"], "intern", "api_key")
    ann = Identity(CALLERS["analyst"], "analyst", "api_key")
    async with Gateway(config, transports=in_memory({"toy": toy()}), clock=lambda: float(next(now))) as gateway:

        def touch(identity: Identity, handle: str) -> None:
            gateway.sessions.open(handle_key(identity, handle), identity, "stateless", handle)

        for identity, handle in ((ian, "a"), (ian, "b"), (ann, "a"), (ann, "b"), (ian, "a"), (ian, "c")):
            touch(identity, handle)

        live = sorted((context.caller, context.handle) for context in gateway.sessions.live())
    assert live == [("api_key:ann", "a"), ("api_key:ann", "b"), ("api_key:ian", "a"), ("api_key:ian", "c")]
