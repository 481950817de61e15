"""Execution under a deadline: timeouts, retries of safe calls only, translation of failures."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from gateway.errors import ToolExecutionError, ToolInputError, ToolTimeoutError, UpstreamUnavailableError
from gateway.pipeline.chain import ToolCall
from gateway.pipeline.execution import ExecuteWithDeadline

from .conftest import MakeCall, make_tool, text_result

pytestmark = pytest.mark.anyio


class Flaky:
    """The rest of the chain: fails with `error` for the first `failures` attempts, then answers."""

    def __init__(self, error: BaseException, failures: int) -> None:
        self.error = error
        self.failures = failures
        self.attempts = 0

    async def __call__(self, call: ToolCall) -> types.CallToolResult:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise self.error
        return text_result("ok")


def step(retries: int = 2, timeout: float = 5.0) -> ExecuteWithDeadline:
    return ExecuteWithDeadline(default_timeout=timeout, retries=retries, backoff=0.001)


@pytest.mark.parametrize(
    "error",
    [UpstreamUnavailableError("gone"), anyio.BrokenResourceError(), anyio.ClosedResourceError(), OSError("reset")],
)
async def test_idempotent_tools_are_retried_after_transport_failures(make_call: MakeCall, error: Exception) -> None:
    chain = Flaky(error, failures=2)
    result = await step(retries=2)(make_call(make_tool(idempotent=True)), chain)
    assert result == text_result("ok")
    assert chain.attempts == 3


async def test_read_only_tools_count_as_idempotent(make_call: MakeCall) -> None:
    chain = Flaky(ConnectionResetError("reset"), failures=1)
    await step()(make_call(make_tool(read_only=True)), chain)
    assert chain.attempts == 2


async def test_other_tools_are_never_retried(make_call: MakeCall) -> None:
    chain = Flaky(ConnectionResetError("reset by peer"), failures=1)
    with pytest.raises(UpstreamUnavailableError, match="ConnectionResetError: reset by peer"):
        await step(retries=3)(make_call(make_tool("write")), chain)
    assert chain.attempts == 1


async def test_retries_stop_at_the_limit(make_call: MakeCall) -> None:
    chain = Flaky(UpstreamUnavailableError("server 'x' is not connected"), failures=10)
    with pytest.raises(UpstreamUnavailableError, match="server 'x' is not connected"):
        await step(retries=2)(make_call(make_tool(idempotent=True)), chain)
    assert chain.attempts == 3


async def test_a_slow_call_times_out_with_its_limit_in_the_message(make_call: MakeCall) -> None:
    async def slow(call: ToolCall) -> types.CallToolResult:
        await anyio.sleep_forever()
        raise AssertionError

    with anyio.fail_after(5), pytest.raises(ToolTimeoutError, match=r"'echo' did not finish within 0\.05 s"):
        await step(timeout=10)(make_call(make_tool(timeout=0.05)), slow)


async def test_the_default_timeout_applies_when_the_tool_has_none(make_call: MakeCall) -> None:
    async def slow(call: ToolCall) -> types.CallToolResult:
        await anyio.sleep_forever()
        raise AssertionError

    with anyio.fail_after(5), pytest.raises(ToolTimeoutError, match=r"within 0\.02 s"):
        await step(timeout=0.02)(make_call(), slow)


async def test_an_exception_from_the_tool_becomes_a_short_execution_error(make_call: MakeCall) -> None:
    async def broken(call: ToolCall) -> types.CallToolResult:
        raise KeyError("missing")

    with pytest.raises(ToolExecutionError) as raised:
        await step()(make_call(), broken)
    assert raised.value.message == "Tool 'echo' failed: KeyError: 'missing'"
    assert raised.value.__cause__ is None


async def test_tool_errors_pass_through_untouched(make_call: MakeCall) -> None:
    refusal = ToolInputError("bad")
    chain = Flaky(refusal, failures=5)
    with pytest.raises(ToolInputError) as raised:
        await step()(make_call(make_tool(idempotent=True)), chain)
    assert raised.value is refusal
    assert chain.attempts == 1


async def test_cancellation_from_outside_propagates(make_call: MakeCall) -> None:
    started = anyio.Event()
    finished = False

    async def slow(call: ToolCall) -> types.CallToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    async def run() -> None:
        nonlocal finished
        await step()(make_call(), slow)
        finished = True

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await started.wait()
            group.cancel_scope.cancel()
    assert not finished
