"""What a gateway answers, records and keeps doing while Redis or PostgreSQL cannot be reached."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import httpx2
import pytest
import redis.asyncio as aioredis

from gateway.live.replicas import REGISTRATIONS
from gateway.service import Gateway
from gateway.shared.redisstate import CHANNEL
from gateway.shared.state import CHANGES
from gateway.stores import StoreSettings
from gateway.stores.registrations import RegistrationStore
from tests.support.harness import free_port, gateway_client, http_gateway, in_memory, make_config, placeholder
from tests.support.services import postgres_server
from tests.support.skills import text
from tests.support.toy import build_server
from tests.support.waiting import Signal, poll_until

pytestmark = pytest.mark.anyio
MODERN = "2026-07-28"
# A bound on waiting for what a loaded machine does slowly (the pool gives up on a stopped
# PostgreSQL after its 10 s connect timeout); never a claim about speed.
LIMIT = 60.0


async def test_a_call_refused_because_redis_is_unreachable_is_audited_as_refused_for_the_shared_state(
    tmp_path: Path,
) -> None:
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    config = replace(make_config(tmp_path, placeholder(["toy"])), store=StoreSettings(redis=unreachable))
    async with gateway_client(config, transports=in_memory({"toy": build_server("toy")}), mode=MODERN) as pair:
        gateway, client = pair
        result = await client.call_tool("toy__echo", {"text": "hello"})
        rows = await gateway.audit.recent(tool="toy__echo")
    assert result.is_error and "is unreachable" in text(result)
    assert [row.outcome for row in rows] == ["refused:shared_state"]


async def test_a_change_announced_while_postgresql_is_down_degrades_the_follower_which_follows_again_once_back(
    tmp_path: Path, redis_url: str
) -> None:
    with postgres_server() as database:
        store = StoreSettings(url=database.url, redis=redis_url)
        config = replace(make_config(tmp_path, placeholder(["toy"])), store=store)
        gateway = Gateway(config, transports=in_memory({"toy": build_server("toy")}))
        groups = Signal()

        async def group_changed(name: str) -> None:
            groups.notify()

        gateway.groups.on_change(group_changed)
        async with gateway, aioredis.Redis.from_url(redis_url) as other:
            await _until(gateway, CHANGES, "ok")
            database.stop()
            await other.publish(CHANNEL, "another replica")
            await _until(gateway, REGISTRATIONS, "degraded")
            reason = gateway.background.conditions()[REGISTRATIONS].error
            database.start()
            # Another replica registers once PostgreSQL is back, sealed with the key this gateway
            # made in its data directory (replicas share one), and announces it.
            registrations = RegistrationStore.open(StoreSettings(url=database.url), tmp_path / "data")
            registrations.save("group", "late", {"allow": [{"server": "toy"}]})
            registrations.close()
            await other.publish(CHANNEL, "another replica")
            await groups.until(lambda: "late" in [group.name for group in gateway.groups.all()], "the group registered")
            await _until(gateway, REGISTRATIONS, "ok")
            alive = gateway.failure
    assert reason is not None and "connection" in reason
    assert alive is None


async def test_metrics_answer_while_postgresql_is_down_without_the_pending_approvals_they_cannot_read(
    tmp_path: Path,
) -> None:
    with postgres_server() as database:
        config = replace(make_config(tmp_path, placeholder(["toy"])), store=StoreSettings(url=database.url))
        transports = in_memory({"toy": build_server("toy")})
        async with http_gateway(config, transports=transports) as (_, url), httpx2.AsyncClient(timeout=LIMIT) as http:
            before = await http.get(f"{url}/metrics")
            database.stop()
            during = await http.get(f"{url}/metrics")
            database.start()
            after = await http.get(f"{url}/metrics")
    assert before.status_code == during.status_code == after.status_code == 200
    assert "gateway_approvals_pending 0.0" in before.text and "gateway_approvals_pending 0.0" in after.text
    assert "gateway_approvals_pending" not in during.text and "gateway_sessions" in during.text


def _state(gateway: Gateway, name: str) -> object:
    condition = gateway.background.conditions().get(name)
    return None if condition is None else condition.as_dict()["state"]


async def _until(gateway: Gateway, loop: str, state: str) -> None:
    # A background loop's state is read, not announced.
    await poll_until(lambda: _state(gateway, loop) == state, f"{loop} {state}", LIMIT)
