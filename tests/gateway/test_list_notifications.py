"""What clients are told of list changes over real HTTP: only the kinds of list that changed, at
most once per interval each; sessions closing meanwhile make the gateway log no error."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.support.access import http_client
from tests.support.harness import REPO, collector, http_gateway, make_config, tools_told, until_told_of
from tests.support.waiting import catalog_until

pytestmark = pytest.mark.anyio

KINDS = {
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
}


def storm_server() -> dict[str, Any]:
    """The config entry of the stdio server whose tools keep changing (tests.support.storm)."""
    return {"command": sys.executable, "args": ["-m", "tests.support.storm"], "cwd": str(REPO)}


async def test_a_storm_of_upstream_tool_changes_reaches_a_client_as_at_most_one_tools_list_changed_per_interval(
    tmp_path: Path,
) -> None:
    interval = 0.5
    config = make_config(tmp_path, {"storm": storm_server()}, notify_coalesce_ms=int(interval * 1000))
    received, handle = collector()
    async with (
        http_gateway(config) as (gateway, url),
        http_client(url, message_handler=handle) as client,
    ):
        await catalog_until(gateway, lambda: gateway.catalog.tool("storm__storm") is not None, "storm__storm")
        started = time.monotonic()
        await client.call_tool("storm__storm", {"count": 100, "pause": 0.02})
        await until_told_of(client, received, "storm__added_99")
        await received.until(lambda: tools_told(received) >= 1, "a tools/list_changed notification")
        elapsed = time.monotonic() - started
    told = [kind for kind in (KINDS.get(type(message)) for message in received) if kind is not None]
    # A hundred changes of the tools, and only the tools: one notice at once, then one per interval at most.
    assert told.count("tools") <= 1 + elapsed / interval
    assert set(told) == {"tools"}


async def test_sessions_closing_while_lists_change_make_the_gateway_log_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, {"storm": storm_server()}, notify_coalesce_ms=10)
    calm = anyio.Event()
    closed: list[int] = []

    async def short_lived(url: str) -> None:
        while not calm.is_set():
            async with http_client(url) as client:
                await client.list_tools()
            closed.append(1)

    async with http_gateway(config) as (gateway, url):
        await catalog_until(gateway, lambda: gateway.catalog.tool("storm__storm") is not None, "storm__storm")
        with caplog.at_level(logging.WARNING):
            async with http_client(url) as stormer, anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(short_lived, url)
                await stormer.call_tool("storm__storm", {"count": 200, "pause": 0.02})
                calm.set()
    # The SDK client closes a session's streams before its DELETE reaches the gateway and logs, as an
    # error, a notice that arrives in between: the gateway cannot know of the closing before the DELETE,
    # so the client's own records are left out. Everything the gateway and the SDK's server side log is here.
    gateway_side = [record for record in caplog.records if not record.name.startswith("mcp.client")]
    assert [record.getMessage() for record in gateway_side if record.levelno >= logging.ERROR] == []
    assert len(closed) >= 6
