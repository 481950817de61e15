"""Two gateways in one test process sharing one Redis, each with its own client: the meta-tools,
Use_Tool and the pipeline see a 2026-era caller's skills and loop window whichever gateway answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from gateway.config.model import GatewayConfig
from gateway.service import Gateway
from gateway.stores import StoreSettings
from tests.support.skills import skill_config, skill_gateway, structured, text

pytestmark = pytest.mark.anyio
MODERN = "2026-07-28"


def _config(root: Path, redis_url: str, **settings: Any) -> GatewayConfig:
    return replace(skill_config(root, **settings), store=StoreSettings(redis=redis_url))


@asynccontextmanager
async def two_gateways(
    tmp_path: Path, redis_url: str, **settings: Any
) -> AsyncIterator[tuple[tuple[Gateway, Client], tuple[Gateway, Client]]]:
    async with AsyncExitStack() as stack:
        pairs = [
            await stack.enter_async_context(skill_gateway(_config(tmp_path / name, redis_url, **settings), mode=MODERN))
            for name in ("a", "b")
        ]
        yield pairs[0], pairs[1]


async def test_a_skill_loaded_on_one_gateway_is_active_and_usable_on_the_other(tmp_path: Path, redis_url: str) -> None:
    async with two_gateways(tmp_path, redis_url, skill_capacity=2) as ((_, first), (_, second)):
        structured(await first.call_tool("Load_Skill", {"name": "adding"}))
        structured(await second.call_tool("Load_Skill", {"name": "echoing"}))
        used = await first.call_tool("Use_Tool", {"name": "toy__add", "arguments": {"a": 2, "b": 3}})
        evicted = structured(await second.call_tool("Load_Skill", {"name": "counting"}))["evicted"]
        listed = structured(await first.call_tool("List_Skills", {}))["active"]
        direct = await second.call_tool("toy__add", {"a": 1, "b": 1})
    assert structured(used) == {"result": 5}
    # Use_Tool made `adding` the most recent, on the other gateway's state too.
    assert evicted == ["echoing"]
    assert listed == ["counting", "adding"]
    assert not direct.is_error, text(direct)


async def test_a_loop_started_on_one_gateway_is_stopped_on_the_other(tmp_path: Path, redis_url: str) -> None:
    async with two_gateways(tmp_path, redis_url, loop_repeat_limit=3) as (one, other):
        for _, client in (one, other):
            await client.call_tool("Load_Skill", {"name": "adding"})
        results = []
        for gateway, client in (one, other, one):
            results.append(await client.call_tool("toy__add", {"a": 1, "b": 1}))
            # A tool call's state is written behind its answer, within milliseconds; here at once.
            await gateway.shared.flush()
    assert [result.is_error for result in results] == [False, False, True]
    assert "3 times in a row" in text(results[2])


async def test_identical_calls_alternating_between_gateways_are_refused_at_exactly_the_fifth(
    tmp_path: Path, redis_url: str
) -> None:
    async with two_gateways(tmp_path, redis_url) as ((_, one), (_, other)):
        for client in (one, other):
            await client.call_tool("Load_Skill", {"name": "adding"})
        # Back to back, nothing flushed: each call's attempt is in Redis before its answer.
        results = [await (one, other)[n % 2].call_tool("toy__add", {"a": 1, "b": 1}) for n in range(6)]
    assert [result.is_error for result in results] == [False] * 4 + [True, True]
    assert "5 times in a row" in text(results[4])
