"""The call pipeline end to end: a real gateway, in-memory toy upstreams and the SDK client."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.upstreams.transports import TransportFactory
from tests.support.flaky import DroppingLink
from tests.support.harness import gateway_client, in_memory, make_config, placeholder
from tests.support.toy import PIXEL
from tests.support.toy import build_server as build_toy

pytestmark = pytest.mark.anyio


def text_of(result: types.CallToolResult) -> str:
    """Every text block of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def toy_setup(
    tmp_path: Path, server: dict[str, Any] | None = None, **settings: Any
) -> tuple[GatewayConfig, dict[str, TransportFactory]]:
    """A config with one in-memory toy server named `toy`, and its transport."""
    config = make_config(tmp_path, {"toy": {"command": "unused", **(server or {})}}, **settings)
    return config, in_memory({"toy": build_toy("toy")})


async def test_invalid_arguments_are_refused_with_every_violation_and_never_reach_the_upstream(
    tmp_path: Path,
) -> None:
    config, transports = toy_setup(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        assert text_of(await client.call_tool("toy__add", {"a": 1, "b": 2})) == "3"
        refused = await client.call_tool("toy__add", {"a": "two", "extra": True})
        assert refused.is_error
        message = text_of(refused)
        assert "$.a: 'two' is not of type 'integer'" in message
        assert "$: 'b' is a required property" in message
        assert "Hint:" in message
        assert text_of(await client.call_tool("toy__calls", {})) == "1"


async def test_a_call_past_the_gateway_deadline_times_out_and_the_gateway_keeps_serving(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path, call_timeout=0.3)
    async with gateway_client(config, transports=transports) as (_, client):
        # The deadline fires at 0.3 s; the guard, ten times a loaded machine's answer, is far below the 60 s sleep.
        with anyio.fail_after(30):
            result = await client.call_tool("toy__sleep", {"seconds": 60})
        assert result.is_error
        assert "did not finish within 0.3 s" in text_of(result)
        assert text_of(await client.call_tool("toy__echo", {"text": "still here"})) == "still here"


async def test_a_per_tool_timeout_overrides_the_gateway_deadline(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path, {"tools": {"sleep": {"timeout": 0.2}}}, call_timeout=30)
    async with gateway_client(config, transports=transports) as (_, client):
        with anyio.fail_after(5):
            result = await client.call_tool("toy__sleep", {"seconds": 10})
        assert result.is_error
        assert "within 0.2 s" in text_of(result)
        with anyio.fail_after(5):
            assert text_of(await client.call_tool("toy__sleep", {"seconds": 0.05})) == "slept 0.05"


async def test_a_one_megabyte_result_arrives_cut_with_a_marker_keeping_its_first_and_last_lines(
    tmp_path: Path,
) -> None:
    async with Client(build_toy("direct")) as direct:
        original = text_of(await direct.call_tool("big", {"size": 1_000_000}))
    config, transports = toy_setup(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        shaped = text_of(await client.call_tool("toy__big", {"size": 1_000_000}))
    assert len(original) == 1_000_000
    assert len(shaped) < 8200
    lines = shaped.splitlines()
    assert lines[0] == original.splitlines()[0]
    assert lines[-1] == original.splitlines()[-1]
    assert any(line.startswith("[... ") and "omitted ...]" in line for line in lines)


async def test_images_and_structured_content_pass_through_unchanged(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        picture = await client.call_tool("toy__picture", {})
        weather = await client.call_tool("toy__weather", {"city": "Oslo"})
    image = picture.content[1]
    assert isinstance(image, types.ImageContent)
    assert (image.data, image.mime_type) == (PIXEL, "image/png")
    assert weather.structured_content == {"city": "Oslo", "temperature": 21.5}


# Each of the calls that must overlap takes this long: their bound leaves a whole SLOW, over ten times the quiet
# overhead of a call, for a busy machine.
SLOW = 3.0


async def _timed_calls(client: Client, calls: list[tuple[str, dict[str, Any]]]) -> tuple[float, list[int]]:
    """Issue `calls` concurrently in list order; the wall time and the order they finished in."""
    finished: list[int] = []

    async def one(index: int, name: str, arguments: dict[str, Any]) -> None:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, text_of(result)
        finished.append(index)

    started = time.monotonic()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for index, (name, arguments) in enumerate(calls):
                group.start_soon(one, index, name, arguments)
    return time.monotonic() - started, finished


async def test_read_only_calls_of_one_session_run_concurrently(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        # Distinct arguments: identical concurrent calls would rightly look like a loop.
        calls = [("toy__sleep", {"seconds": SLOW + index / 100}) for index in range(4)]
        elapsed, _ = await _timed_calls(client, calls)
    # One after another they take four times SLOW, even two at a time twice: under that, they overlapped.
    assert elapsed < 2 * SLOW


async def test_writes_of_one_session_run_one_at_a_time_in_arrival_order(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        # The first write is the slowest: run concurrently, the last would finish first.
        calls = [("toy__write_slowly", {"seconds": seconds}) for seconds in (0.3, 0.15, 0.05)]
        elapsed, finished = await _timed_calls(client, calls)
    assert finished == [0, 1, 2]
    assert elapsed >= 0.5


async def test_writes_of_two_sessions_do_not_wait_for_each_other(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path)
    async with (
        gateway_client(config, transports=transports) as (gateway, first),
        Client(build_server(gateway)) as second,
    ):
        started = time.monotonic()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for client in (first, second):
                    group.start_soon(client.call_tool, "toy__write_slowly", {"seconds": SLOW})
        elapsed = time.monotonic() - started
    # One after another they take twice SLOW: under that, they overlapped.
    assert elapsed < 2 * SLOW


async def test_the_fifth_identical_call_is_refused_and_stays_refused_despite_new_timestamps(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):

        def status(second: int) -> dict[str, Any]:
            return {"text": f"status as of 2026-11-29T12:00:{second:02d}Z"}

        for second in range(4):
            assert not (await client.call_tool("toy__echo", status(second))).is_error
        fifth = await client.call_tool("toy__echo", status(4))
        assert fifth.is_error
        assert "5 times in a row" in text_of(fifth)
        assert "Hint:" in text_of(fifth)
        assert not (await client.call_tool("toy__echo", {"text": "something else"})).is_error
        again = await client.call_tool("toy__echo", status(59))
        assert again.is_error
        assert "already stopped as a loop" in text_of(again)
        assert text_of(await client.call_tool("toy__calls", {})) == "5"


async def test_every_call_leaves_an_audit_row_whatever_its_outcome(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path, call_timeout=0.3)
    async with gateway_client(config, transports=transports) as (gateway, client):
        await client.call_tool("toy__echo", {"text": "fine"})
        await client.call_tool("toy__fail", {"message": "boom"})
        await client.call_tool("toy__add", {"a": "x", "b": 1})
        await client.call_tool("toy__sleep", {"seconds": 5})
        for _ in range(5):
            await client.call_tool("toy__increment", {})
        with pytest.raises(MCPError, match="Unknown tool: 'toy__nothing'"):
            await client.call_tool("toy__nothing", {})
        rows = await gateway.audit.recent(limit=100)
    outcomes = [(row.tool, row.outcome) for row in reversed(rows)]
    assert outcomes == [
        ("toy__echo", "ok"),
        ("toy__fail", "error"),
        ("toy__add", "invalid_arguments"),
        ("toy__sleep", "timeout"),
        *[("toy__increment", "ok")] * 4,
        ("toy__increment", "refused:loop"),
        ("toy__nothing", "unknown_tool"),
    ]
    assert len({row.session for row in rows}) == 1


async def test_failures_come_back_as_short_error_results_without_tracebacks(tmp_path: Path) -> None:
    config, transports = toy_setup(tmp_path, call_timeout=0.3)
    async with gateway_client(config, transports=transports) as (_, client):
        results = [
            await client.call_tool("toy__fail", {"message": "boom"}),
            await client.call_tool("toy__add", {"a": [1] * 1000, "b": 2}),
            await client.call_tool("toy__sleep", {"seconds": 5}),
        ]
    for result in results:
        assert result.is_error
        assert "Traceback" not in text_of(result)
        assert len(text_of(result)) < 600
    assert text_of(results[0]) == "Error executing tool fail"
    assert all("Hint:" in text_of(result) for result in results[1:])


async def test_a_read_only_call_whose_connection_drops_is_retried_and_succeeds(tmp_path: Path) -> None:
    link = DroppingLink(build_toy("toy"), drop={"echo"})
    config = make_config(tmp_path, placeholder(["toy"]), retries=5)
    async with gateway_client(config, transports={"toy": link}) as (_, client):
        with anyio.fail_after(10):
            result = await client.call_tool("toy__echo", {"text": "again"})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "again"
    assert link.attempts.count("echo") >= 2


async def test_a_write_whose_connection_drops_is_not_retried(tmp_path: Path) -> None:
    link = DroppingLink(build_toy("toy"), drop={"increment"})
    config = make_config(tmp_path, placeholder(["toy"]), retries=5)
    async with gateway_client(config, transports={"toy": link}) as (gateway, client):
        with anyio.fail_after(10):
            result = await client.call_tool("toy__increment", {})
        assert result.is_error
        assert "closed the connection" in text_of(result)
        assert link.attempts == ["increment"]
        with anyio.fail_after(10):
            # A read-only call rides out the reconnect on retries; then the write runs exactly once.
            assert text_of(await client.call_tool("toy__echo", {"text": "up"})) == "up"
            assert text_of(await client.call_tool("toy__increment", {})) == "1"
        rows = await gateway.audit.recent(limit=1, tool="toy__increment")
    assert rows[0].outcome == "ok"
