"""Session limits across two gateways sharing one Redis, each served over real HTTP: a caller over
its limit on one loses its own least recently used idle session, wherever it lives; the total
counts every replica's sessions; a stopped replica's sessions stop counting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.stores import StoreSettings
from tests.support import access
from tests.support.access import CALLERS, KEYS, access_config, toy_entry
from tests.support.harness import free_port, http_gateway, in_memory
from tests.support.rawsessions import open_raw, raw_session, raw_status
from tests.support.replicas import live_sessions
from tests.support.toy import build_server as toy
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio
# A bound on waiting for another replica to act; never a claim about speed.
LIMIT = 30.0
# The test callers' roles, the admin's able to list sessions.
ROLES = {**access.ROLES, "admin": {"admin": True, "allow": ["*"]}}


@asynccontextmanager
async def replica(tmp_path: Path, name: str, redis_url: str, **settings: Any) -> AsyncIterator[str]:
    """One gateway on the shared Redis; yields its MCP endpoint."""
    config = access_config(tmp_path / name, {"toy": toy_entry()}, roles=ROLES, **settings)
    config = replace(config, store=StoreSettings(redis=redis_url))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url):
        yield f"{url}/mcp"


async def _until_gone(http: httpx2.AsyncClient, url: str, key: str, session: str) -> None:
    """Wait until the replica at `url` answers `session` 404: ended there on another replica's word."""

    async def gone() -> bool:
        return await raw_status(http, url, key, session) == 404

    await poll_until(gone, f"session {session} ended at {url}", LIMIT)


async def test_a_caller_over_its_limit_loses_its_own_oldest_idle_session_on_another_replica(
    tmp_path: Path, redis_url: str
) -> None:
    async with (
        replica(tmp_path, "a", redis_url, max_sessions_per_caller=2) as first,
        replica(tmp_path, "b", redis_url, max_sessions_per_caller=2) as second,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        oldest = await raw_session(http, first, KEYS["intern"])
        stranger = await raw_session(http, first, KEYS["analyst"])
        newer = await raw_session(http, second, KEYS["intern"])
        newest = await raw_session(http, second, KEYS["intern"])
        await _until_gone(http, first, KEYS["intern"], oldest)
        assert await raw_status(http, second, KEYS["intern"], newer) == 200
        assert await raw_status(http, second, KEYS["intern"], newest) == 200
        assert await raw_status(http, first, KEYS["analyst"], stranger) == 200


async def test_the_total_limit_counts_the_sessions_of_every_replica(tmp_path: Path, redis_url: str) -> None:
    async with (
        replica(tmp_path, "a", redis_url, max_sessions=2) as first,
        replica(tmp_path, "b", redis_url, max_sessions=2) as second,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        await raw_session(http, first, KEYS["analyst"])
        await raw_session(http, second, KEYS["analyst"])
        refused = await open_raw(http, second, KEYS["intern"])
    assert refused.status_code == 503
    assert "The gateway is full: 2 sessions are open" in refused.text


async def test_a_stopped_replica_s_sessions_no_longer_count(tmp_path: Path, redis_url: str) -> None:
    async with (
        replica(tmp_path, "b", redis_url, max_sessions=1) as second,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        async with replica(tmp_path, "a", redis_url, max_sessions=1) as first:
            await raw_session(http, first, KEYS["analyst"])
            assert (await open_raw(http, second, KEYS["intern"])).status_code == 503
        await raw_session(http, second, KEYS["intern"])


async def test_the_session_listing_adds_the_other_replicas_http_sessions(tmp_path: Path, redis_url: str) -> None:
    async with (
        replica(tmp_path, "a", redis_url) as first,
        replica(tmp_path, "b", redis_url) as second,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        here = await raw_session(http, first, KEYS["analyst"])
        there = await raw_session(http, second, KEYS["intern"])
        listed = {session["id"]: session for session in await live_sessions(first.removesuffix("/mcp"))}
    assert "replica" not in listed[here]
    assert listed[there]["transport"] == "http"
    assert listed[there]["replica"]
    assert listed[there]["caller"] == f"api_key:{CALLERS['intern']}"


async def test_a_new_session_meeting_an_unreachable_redis_is_refused_saying_so(tmp_path: Path) -> None:
    port = free_port()
    async with (
        replica(tmp_path, "a", f"redis://127.0.0.1:{port}/0") as first,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        refused = await open_raw(http, first, KEYS["intern"])
    assert refused.status_code == 503
    assert f"The shared state at redis 127.0.0.1:{port} is unreachable" in refused.text
