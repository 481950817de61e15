"""Large results from a stdio server: read in linear time off other sessions' backs, and capped."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway.service import Gateway
from tests.support.harness import gateway_client, make_config, toy_stdio
from tests.support.probe import toy_process
from tests.support.waiting import tried_to_connect

pytestmark = pytest.mark.anyio


def text_of(result: types.CallToolResult) -> str:
    """Every text block of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def ready(gateway: Gateway, client: Client) -> None:
    """Wait until the toy server has tried to connect; its tools are listed."""
    await tried_to_connect(gateway)
    assert (await client.list_tools()).tools


async def test_a_result_over_max_result_bytes_is_refused_clearly_and_the_server_keeps_serving(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": toy_stdio()}, max_result_bytes=1_000_000)
    async with gateway_client(config) as (gateway, client):
        await ready(gateway, client)
        with anyio.fail_after(30):
            refused = await client.call_tool("toy__big", {"size": 2_000_000})
            fits = await client.call_tool("toy__big", {"size": 900_000})
            after = await client.call_tool("toy__echo", {"text": "still here"})
    assert refused.is_error
    assert "over the gateway's limit of 1,000,000 bytes" in text_of(refused)
    assert "max_result_bytes" in text_of(refused)
    assert "Hint: Ask for less" in text_of(refused)
    assert not fits.is_error
    assert "omitted ...]" in text_of(fits)
    assert text_of(after) == "still here"


async def test_over_streamable_http_max_result_bytes_is_the_limit_too(tmp_path: Path) -> None:
    async with toy_process("streamable-http", "remote") as port:
        config = make_config(tmp_path, {"remote": {"url": f"http://127.0.0.1:{port}/mcp"}}, max_result_bytes=3_000_000)
        async with gateway_client(config) as (_, client):
            with anyio.fail_after(60):
                fits = await client.call_tool("remote__big", {"size": 2_000_000})
                refused = await client.call_tool("remote__big", {"size": 4_000_000})
                after = await client.call_tool("remote__echo", {"text": "still here"})
    assert not fits.is_error, text_of(fits)
    assert "omitted ...]" in text_of(fits)
    assert refused.is_error
    assert text_of(after) == "still here"


async def loop_cpu_seconds(client: Client, size: int) -> float:
    """CPU time the event-loop thread (the gateway's, in process) spends on one `big` call of `size`."""
    started = time.thread_time()
    with anyio.fail_after(120):
        await client.call_tool("toy__big", {"size": size})
    return time.thread_time() - started


async def test_a_twenty_megabyte_result_costs_the_event_loop_no_more_than_ten_two_megabyte_ones(
    tmp_path: Path,
) -> None:
    # While the loop thread computes, every other session waits: its CPU time during a call bounds
    # the stall. CPU time, unlike wall time, barely moves on a busy machine. Reading messages in
    # linear time, ten times the bytes cost at most ten times the CPU (here less: the big one is
    # refused at the default cap); a reader that rejoins the line per chunk costs 50 to 100 times.
    config = make_config(tmp_path, {"toy": toy_stdio()})
    async with gateway_client(config) as (gateway, client):
        await ready(gateway, client)
        await client.call_tool("toy__big", {"size": 2_000_001})
        small = await loop_cpu_seconds(client, 2_000_000)
        large = await loop_cpu_seconds(client, 20_000_000)
    assert large < 10 * small
