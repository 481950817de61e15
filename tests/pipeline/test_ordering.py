"""Per-session ordering: reads overlap, a session's writes to one source run one at a time in arrival order."""

from __future__ import annotations

from dataclasses import replace

import anyio
import mcp_types as types
import pytest

from gateway.pipeline.chain import ToolCall
from gateway.pipeline.ordering import STATE_KEY, SessionOrdering

from .conftest import MakeCall, make_session, make_tool, text_result

pytestmark = pytest.mark.anyio

READ = make_tool("read", read_only=True)
WRITE = make_tool("write")


class Gate:
    """The rest of the chain: each call logs its start, waits for the gate, then logs its end."""

    def __init__(self) -> None:
        self.opened = anyio.Event()
        self.log: list[str] = []
        self.running = 0
        self.most_running = 0

    async def __call__(self, call: ToolCall) -> types.CallToolResult:
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        self.log.append(f"start {call.arguments['n']}")
        await self.opened.wait()
        self.log.append(f"end {call.arguments['n']}")
        self.running -= 1
        return text_result("ok")


async def test_read_only_calls_of_a_session_run_concurrently(make_call: MakeCall) -> None:
    gate = Gate()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for n in range(4):
                group.start_soon(SessionOrdering(), make_call(READ, {"n": n}), gate)
            await anyio.wait_all_tasks_blocked()
            assert gate.running == 4
            gate.opened.set()


async def test_writes_of_a_session_run_one_at_a_time_in_arrival_order(make_call: MakeCall) -> None:
    gate = Gate()
    step = SessionOrdering()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for n in range(5):
                group.start_soon(step, make_call(WRITE, {"n": n}), gate)
            await anyio.wait_all_tasks_blocked()
            assert gate.log == ["start 0"]
            gate.opened.set()
    assert gate.most_running == 1
    assert gate.log == [entry for n in range(5) for entry in (f"start {n}", f"end {n}")]


async def test_a_read_does_not_wait_for_a_write_in_flight(make_call: MakeCall) -> None:
    gate = Gate()
    write_done = anyio.Event()

    async def write() -> None:
        await SessionOrdering()(make_call(WRITE, {"n": "w"}), gate)
        write_done.set()

    async def quick_read(call: ToolCall) -> types.CallToolResult:
        return text_result("read while writing")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(write)
            await anyio.wait_all_tasks_blocked()
            result = await SessionOrdering()(make_call(READ, {"n": "r"}), quick_read)
            assert result == text_result("read while writing")
            assert not write_done.is_set()
            gate.opened.set()


async def test_two_sessions_do_not_block_each_other(make_call: MakeCall) -> None:
    gate = Gate()
    other = make_session("s2")

    async def quick_write(call: ToolCall) -> types.CallToolResult:
        return text_result("other session")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(SessionOrdering(), make_call(WRITE, {"n": 1}), gate)
            await anyio.wait_all_tasks_blocked()
            result = await SessionOrdering()(make_call(WRITE, {"n": 2}, on=other), quick_write)
            assert result == text_result("other session")
            gate.opened.set()


async def test_the_write_queue_lives_in_the_session_state(make_call: MakeCall) -> None:
    call = make_call(WRITE, {"n": 1})

    async def done(call: ToolCall) -> types.CallToolResult:
        return text_result("ok")

    await SessionOrdering()(call, done)
    locks = call.session.state[STATE_KEY]
    assert list(locks) == ["test"]
    assert isinstance(locks["test"], anyio.Lock)


async def test_a_write_does_not_wait_for_a_write_in_flight_to_another_source(make_call: MakeCall) -> None:
    gate = Gate()
    elsewhere = replace(WRITE, source="other")

    async def quick_write(call: ToolCall) -> types.CallToolResult:
        return text_result("other source")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(SessionOrdering(), make_call(WRITE, {"n": 1}), gate)
            await anyio.wait_all_tasks_blocked()
            result = await SessionOrdering()(make_call(elsewhere, {"n": 2}), quick_write)
            assert result == text_result("other source")
            assert gate.log == ["start 1"]
            gate.opened.set()
