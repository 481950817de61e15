"""What a gateway answers and records while the state replicas share cannot be reached."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gateway.stores import StoreSettings
from tests.support.harness import free_port, gateway_client, in_memory, make_config, placeholder
from tests.support.skills import text
from tests.support.toy import build_server

pytestmark = pytest.mark.anyio
MODERN = "2026-07-28"


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
