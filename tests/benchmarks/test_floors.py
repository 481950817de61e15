"""The relay, the per-call benchmark's floor (`benchmarks.floors`), serves the echo tool to the SDK client
over one stdio hop."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from benchmarks.gateway_latency import free_port, started, wait_until_ready
from tests.support.skills import text

pytestmark = pytest.mark.anyio


async def test_the_sdk_client_lists_and_calls_the_echo_tool_through_the_relay(tmp_path: Path) -> None:
    port = free_port()
    url, log = f"http://127.0.0.1:{port}/mcp", tmp_path / "relay.log"
    with started([sys.executable, "-m", "benchmarks.floors", "relay", str(port)], log=log) as relay:
        await anyio.to_thread.run_sync(wait_until_ready, relay, url, log)
        async with Client(url, mode="legacy") as first, Client(url, mode="legacy") as second:
            assert [tool.name for tool in (await first.list_tools()).tools] == ["echo"]
            answers: dict[str, str] = {}

            async def echo(client: Client, label: str) -> None:
                answers[label] = text(await client.call_tool("echo", {"text": label}))

            # Calls of two sessions in flight at once each get their own answer back.
            async with anyio.create_task_group() as calls:
                for index in range(8):
                    calls.start_soon(echo, first, f"first {index}")
                    calls.start_soon(echo, second, f"second {index}")
    assert len(answers) == 16 and all(answer == label for label, answer in answers.items())
