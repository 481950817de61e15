"""Replicas sharing PostgreSQL (durable records) and Redis (fan-out) behind HAProxy: what one
replica is told, the others act on."""

from __future__ import annotations

import base64
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from gateway.pipeline.confirmation import APPROVAL_KEY
from tests.support.access import KEYS, http_client
from tests.support.databases import fresh_schema, server_url
from tests.support.harness import REPO, toy_stdio
from tests.support.launches import launches
from tests.support.replicas import cluster, replica_config
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio
MODERN = "2026-07-28"
ROLES: dict[str, Any] = {
    "admin": {"admin": True, "allow": ["*"]},
    "analyst": {"allow": ["*"]},
    "intern": {"allow": ["*"]},
}
# Replicas sharing a database share the key its registrations are encrypted with.
REGISTRATIONS_KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
# A bound on waiting for the other replica on a loaded machine; the time it took is measured apart.
SEEN_LIMIT = 30.0


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh schema of the test PostgreSQL (`.ci/postgres.sh`)."""
    with fresh_schema(server_url()) as url:
        yield url


def _configs(tmp_path: Path, redis_url: str, postgres_url: str, **document: Any) -> list[Path]:
    servers = {"toy": {**toy_stdio("toy"), "required": True}}
    store = {"url": postgres_url, "key": REGISTRATIONS_KEY}
    return [
        replica_config(tmp_path, f"r{n}", redis_url, servers=servers, store=store, roles=ROLES, **document)
        for n in range(2)
    ]


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_server_registered_through_one_replica_reaches_a_client_of_the_other(
    tmp_path: Path, redis_url: str, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    registration = {"allow_commands": [sys.executable], "sandbox_stdio": False}
    configs = _configs(tmp_path, redis_url, postgres_url, registration=registration)
    async with cluster(configs, tmp_path) as gateways:
        first, second = (r.url for r in gateways.replicas)
        entry = {"name": "extra", **toy_stdio("extra"), "cwd": str(REPO)}
        async with http_client(second, KEYS["intern"]) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['admin']}"}) as admin:
                answer = await admin.post(f"{first}/api/v1/servers", json=entry, timeout=30)
                registered = time.monotonic()
                assert answer.status_code == 201, answer.text
                await _until_status(admin, f"{second}/api/v1/servers/extra", 200)
                known = time.monotonic() - registered

            async def listed() -> bool:
                return "extra__echo" in {tool.name for tool in (await client.list_tools()).tools}

            await poll_until(listed, "extra__echo listed by the other replica", SEEN_LIMIT)
            seen = time.monotonic() - registered
            echoed = await client.call_tool("extra__echo", {"text": "from the other replica"})
    assert "extra__echo" not in before
    assert _text(echoed) == "from the other replica"
    with capsys.disabled():
        print(
            f"\nregistered on one replica: known to the other after {known * 1000:.0f} ms, "
            f"its tools listed there (its process started) after {seen * 1000:.0f} ms"
        )


async def test_an_approval_parked_on_one_replica_and_approved_on_the_other_runs_exactly_once(
    tmp_path: Path, redis_url: str, postgres_url: str
) -> None:
    log = tmp_path / "launches.log"
    arguments = {"log": str(log), "target": "moon"}
    # Seven identical calls of one caller in a few seconds: loop detection, which counts the calls
    # in flight on every replica, would stop the fifth. This test is about the approval.
    gateway = {"loop_repeat_limit": 10}
    configs = _configs(tmp_path, redis_url, postgres_url, local_tools=["tests.support.launches"], gateway=gateway)
    async with cluster(configs, tmp_path) as gateways:
        first, second = (r.url for r in gateways.replicas)

        async def call(url: str) -> types.CallToolResult:
            async with http_client(url, KEYS["intern"], mode=MODERN) as client:
                return await client.call_tool("local__launch", arguments)

        parked = await call(first)
        assert parked.is_error and parked.meta is not None, _text(parked)
        approval = parked.meta[APPROVAL_KEY]["id"]
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['admin']}"}) as admin:
            approved = await admin.post(f"{second}/api/v1/approvals/{approval}/approve", json={}, timeout=30)
        assert approved.status_code == 200, approved.text
        results: list[types.CallToolResult] = []

        async def retry(url: str) -> None:
            results.append(await call(url))

        async with anyio.create_task_group() as group:
            for url in (first, second, gateways.url, first, second, gateways.url):
                group.start_soon(retry, url)
    assert [result.is_error for result in results].count(False) == 1, [_text(result) for result in results]
    assert launches(log) == ["moon"]


async def test_groups_added_and_servers_removed_on_one_replica_follow_on_the_other(
    tmp_path: Path, redis_url: str, postgres_url: str
) -> None:
    registration = {"allow_commands": [sys.executable], "sandbox_stdio": False}
    configs = _configs(tmp_path, redis_url, postgres_url, registration=registration)
    headers = {"Authorization": f"Bearer {KEYS['admin']}"}
    async with (
        cluster(configs, tmp_path) as gateways,
        httpx2.AsyncClient(headers=headers, timeout=30) as admin,
    ):
        first, second = (r.url for r in gateways.replicas)
        entry = {"name": "extra", **toy_stdio("extra"), "cwd": str(REPO)}
        assert (await admin.post(f"{first}/api/v1/servers", json=entry)).status_code == 201
        group = await admin.post(f"{first}/api/v1/groups", json={"name": "maths", "allow": ["toy__add"]})
        assert group.status_code == 201, group.text
        await _until_status(admin, f"{second}/api/v1/groups/maths", 200)
        await _until_status(admin, f"{second}/api/v1/servers/extra", 200)
        async with http_client(second, KEYS["intern"], path="/mcp/g/maths") as grouped:
            in_group = [tool.name for tool in (await grouped.list_tools()).tools]
        assert (await admin.delete(f"{first}/api/v1/servers/extra")).status_code == 204
        await _until_status(admin, f"{second}/api/v1/servers/extra", 404)
        async with http_client(second, KEYS["intern"]) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
    assert "toy__add" in in_group and "toy__echo" not in in_group
    assert "extra__echo" not in listed and "toy__echo" in listed


async def _until_status(admin: httpx2.AsyncClient, url: str, status: int) -> None:
    """Wait until the other replica answers `url` with `status`: what it has seen of a change
    another replica made, which nothing here is told of."""

    async def answered() -> bool:
        return (await admin.get(url)).status_code == status

    await poll_until(answered, f"{status} from {url}", SEEN_LIMIT)
