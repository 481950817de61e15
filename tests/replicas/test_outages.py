"""Two replicas behind HAProxy ride out PostgreSQL and Redis restarting under traffic: both serve
afterwards without being restarted, and what one registers after the outage the other applies."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from tests.support.access import KEYS, http_client
from tests.support.harness import REPO, toy_stdio
from tests.support.replicas import cluster, replica_config
from tests.support.services import postgres_server, redis_server
from tests.support.waiting import Inbox, poll_until

pytestmark = pytest.mark.anyio
MODERN = "2026-07-28"
ROLES: dict[str, Any] = {
    "admin": {"admin": True, "allow": ["*"]},
    "analyst": {"allow": ["*"]},
    "intern": {"allow": ["*"]},
}
# Replicas sharing a database share the key its registrations are encrypted with.
REGISTRATIONS_KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
# A bound on waiting for what a loaded machine does slowly (the pool gives up on a stopped
# PostgreSQL after its 10 s connect timeout, a failing loop waits up to 10 s before its next run);
# never a claim about speed.
LIMIT = 90.0


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_both_replicas_serve_after_postgresql_and_redis_restart_under_traffic_and_follow_each_other(
    tmp_path: Path,
) -> None:
    registration = {"allow_commands": [sys.executable], "sandbox_stdio": False}
    servers = {"toy": {**toy_stdio("toy"), "required": True}}
    admin_key = {"Authorization": f"Bearer {KEYS['admin']}"}
    with postgres_server() as database, redis_server() as redis:
        configs = [
            replica_config(
                tmp_path,
                f"r{n}",
                redis.url,
                servers=servers,
                store={"url": database.url, "key": REGISTRATIONS_KEY},
                roles=ROLES,
                registration=registration,
            )
            for n in range(2)
        ]
        async with cluster(configs, tmp_path) as gateways, httpx2.AsyncClient(headers=admin_key, timeout=60) as admin:
            first, second = (replica.url for replica in gateways.replicas)
            answered: Inbox[str] = Inbox()
            stop = anyio.Event()

            async def traffic() -> None:
                # Calls refused or cut off during the outage are expected; what matters is after it.
                while not stop.is_set():
                    try:
                        async with http_client(gateways.url, KEYS["analyst"], mode=MODERN) as client:
                            while not stop.is_set():
                                # Each call its own text: identical calls in a row are stopped as a loop.
                                text = f"call {len(answered)}"
                                result = await client.call_tool("toy__echo", {"text": text})
                                if not result.is_error:
                                    answered.add(_text(result))
                                await anyio.sleep(0.05)
                    except Exception:
                        await anyio.sleep(0.1)

            async with anyio.create_task_group() as group:
                group.start_soon(traffic)
                await answered.until(lambda: len(answered) >= 5, "five calls answered")
                database.stop()
                # Each replica subscribes again and must read what it may have missed from a
                # database that does not answer: the moment that ended every replica's service.
                redis.stop()
                redis.start()
                degraded = [await _degraded(admin, url, "registrations") for url in (first, second)]
                database.start()
                entry = {"name": "extra", **toy_stdio("extra"), "cwd": str(REPO)}
                registered = await admin.post(f"{first}/api/v1/servers", json=entry)
                extra = f"{second}/api/v1/servers/extra"
                await poll_until(lambda: _status(admin, extra, 200), "the other replica to know extra", LIMIT)
                after = len(answered)
                await answered.until(lambda: len(answered) >= after + 5, "five calls answered after it")
                stop.set()
            health = [(await admin.get(f"{url}/healthz")).status_code for url in (first, second)]
            ready = [(await admin.get(f"{url}/readyz")).json() for url in (first, second)]
            echoed = []
            for url in (first, second):
                async with http_client(url, KEYS["analyst"], mode=MODERN) as client:
                    echoed.append(_text(await client.call_tool("toy__echo", {"text": url})))
                    if url == second:
                        await _until_listed(client, "extra__echo")
                        echoed.append(_text(await client.call_tool("extra__echo", {"text": "registered after"})))
            running = [replica.process.returncode for replica in gateways.replicas]
    assert all("connection" in reason for reason in degraded), degraded
    assert registered.status_code == 201, registered.text
    assert health == [200, 200] and running == [None, None]
    assert [body["ready"] for body in ready] == [True, True]
    assert [body["background"]["registrations"]["state"] for body in ready] == ["ok", "ok"]
    assert echoed == [first, second, "registered after"]


async def _degraded(admin: httpx2.AsyncClient, url: str, loop: str) -> str:
    """Wait until the replica at `url` shows `loop` degraded in its `/readyz`; why it is."""
    seen: dict[str, Any] = {}

    async def degraded() -> bool:
        seen.update((await admin.get(f"{url}/readyz")).json().get("background", {}).get(loop, {}))
        return seen.get("state") == "degraded"

    await poll_until(degraded, f"{loop} degraded on {url}", LIMIT)
    return str(seen["error"])


async def _status(admin: httpx2.AsyncClient, url: str, status: int) -> bool:
    return (await admin.get(url)).status_code == status


async def _until_listed(client: Any, name: str) -> None:
    async def listed() -> bool:
        return name in {tool.name for tool in (await client.list_tools()).tools}

    await poll_until(listed, f"{name} listed", LIMIT)
