"""Session limits across real gateway processes sharing one Redis: a caller's oldest idle session
makes room whichever replica holds it, a killed replica's sessions stop counting once their
heartbeat expires, and an admin of one replica ends a session another holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.shared.redissessions import HEARTBEAT_SECONDS
from tests.support.access import KEYS
from tests.support.harness import toy_stdio
from tests.support.rawsessions import open_raw, raw_session, raw_status
from tests.support.replicas import cluster, held_sessions, replica_config
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio
# Bounds on waiting for what a loaded machine does slowly; never a claim about speed.
LIMIT = 30.0
# A dead replica's sessions count until their expiry, three heartbeats.
EXPIRY_LIMIT = 3 * HEARTBEAT_SECONDS + LIMIT


def _configs(tmp_path: Path, redis_url: str, **settings: Any) -> list[Path]:
    roles: dict[str, Any] = {
        "admin": {"admin": True, "allow": ["*"]},
        "analyst": {"allow": ["toy__*"]},
        "intern": {"allow": ["toy__echo"]},
    }
    servers = {"toy": {**toy_stdio("toy"), "required": True, "tools": {"crash": {"enabled": False}}}}
    return [
        replica_config(tmp_path, f"r{n}", redis_url, servers=servers, roles=roles, gateway=settings) for n in range(2)
    ]


async def test_a_caller_at_its_limit_on_one_replica_ends_its_idle_session_on_the_other(
    tmp_path: Path, redis_url: str
) -> None:
    async with (
        cluster(_configs(tmp_path, redis_url, max_sessions_per_caller=1), tmp_path) as gateways,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        first, second = (f"{replica.url}/mcp" for replica in gateways.replicas)
        older = await raw_session(http, first, KEYS["analyst"])
        newer = await raw_session(http, second, KEYS["analyst"])
        await _until_gone(http, first, older)
        assert await raw_status(http, second, KEYS["analyst"], newer) == 200
        assert await held_sessions(gateways.replicas[0].url) == []


async def test_a_killed_replica_s_sessions_stop_counting_once_their_heartbeat_expires(
    tmp_path: Path, redis_url: str
) -> None:
    async with (
        cluster(_configs(tmp_path, redis_url, max_sessions=1), tmp_path) as gateways,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        first, second = (f"{replica.url}/mcp" for replica in gateways.replicas)
        await raw_session(http, first, KEYS["analyst"])
        assert (await open_raw(http, second, KEYS["admin"])).status_code == 503
        gateways.replicas[0].kill()

        async def admitted() -> bool:
            return (await open_raw(http, second, KEYS["admin"])).status_code == 200

        # Its heartbeat's expiry in Redis announces itself to no one.
        await poll_until(admitted, "a session admitted once the killed replica's expired", EXPIRY_LIMIT)


async def test_an_admin_of_one_replica_ends_a_session_the_other_replica_holds(tmp_path: Path, redis_url: str) -> None:
    async with (
        cluster(_configs(tmp_path, redis_url), tmp_path) as gateways,
        httpx2.AsyncClient(timeout=LIMIT) as http,
    ):
        holder, other = gateways.replicas
        session = await raw_session(http, f"{holder.url}/mcp", KEYS["analyst"])
        admin = {"Authorization": f"Bearer {KEYS['admin']}"}
        ended = await http.delete(f"{other.url}/api/v1/sessions/{session}", headers=admin)
        assert ended.status_code == 204
        await _until_gone(http, f"{holder.url}/mcp", session)
        assert await held_sessions(holder.url) == []
        again = await http.delete(f"{other.url}/api/v1/sessions/{session}", headers=admin)
        assert again.status_code == 404


async def _until_gone(http: httpx2.AsyncClient, url: str, session: str) -> None:
    """Wait until the replica at `url` answers `session` 404: ended there on another replica's word."""

    async def gone() -> bool:
        return await raw_status(http, url, KEYS["analyst"], session) == 404

    await poll_until(gone, f"session {session} ended at {url}", LIMIT)
