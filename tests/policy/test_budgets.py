"""Call budgets: per-session and per-caller rates, concurrency, and a session's total, reached and reset."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from gateway.auth.policy import Budget
from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.pipeline.budgets import BudgetExceededError, Budgets, BudgetTracker
from gateway.pipeline.chain import Pipeline, ToolCall


class Clock:
    """A hand-moved clock: the tracker takes its clock as an argument so windows can be tested without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def session(session_id: str = "s1", caller: str = "alice", role: str | None = "intern") -> SessionContext:
    return SessionContext(session_id, caller, "memory", created_at=0.0, last_seen=0.0, role=role)


def call_on(context: SessionContext) -> ToolCall:
    return ToolCall(context, ToolRecord(name="calc__add", source="calc", original_name="add"), {})


async def ok(call: ToolCall) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text="ok")])


def run_calls(tracker: BudgetTracker, times: int, budget: Budget, session_id: str = "s1", caller: str = "a") -> None:
    for _ in range(times):
        tracker.acquire(session_id, caller, budget)
        tracker.release(caller)


def test_a_session_past_its_calls_per_minute_is_told_when_to_retry() -> None:
    clock = Clock()
    tracker = BudgetTracker(clock)
    budget = Budget(calls_per_minute=3)
    for _ in range(3):
        run_calls(tracker, 1, budget)
        clock.now += 10
    with pytest.raises(BudgetExceededError) as raised:
        tracker.acquire("s1", "a", budget)
    assert raised.value.limit == "calls_per_minute"
    assert raised.value.retry_after == 30
    assert "retry in 30 seconds" in raised.value.message


def test_the_window_slides_so_calls_older_than_a_minute_no_longer_count() -> None:
    clock = Clock()
    tracker = BudgetTracker(clock)
    budget = Budget(calls_per_minute=2)
    run_calls(tracker, 1, budget)
    clock.now += 30
    run_calls(tracker, 1, budget)
    clock.now += 30
    run_calls(tracker, 1, budget)
    with pytest.raises(BudgetExceededError):
        tracker.acquire("s1", "a", budget)
    clock.now += 30
    run_calls(tracker, 1, budget)


def test_another_session_has_its_own_per_minute_count() -> None:
    tracker = BudgetTracker(Clock())
    budget = Budget(calls_per_minute=2)
    run_calls(tracker, 2, budget, session_id="s1")
    run_calls(tracker, 2, budget, session_id="s2")


def test_a_caller_is_limited_across_all_its_sessions() -> None:
    clock = Clock()
    tracker = BudgetTracker(clock)
    budget = Budget(calls_per_minute=10, caller_calls_per_minute=3)
    run_calls(tracker, 2, budget, session_id="s1")
    clock.now += 5
    run_calls(tracker, 1, budget, session_id="s2")
    with pytest.raises(BudgetExceededError) as raised:
        tracker.acquire("s3", "a", budget)
    assert raised.value.limit == "caller_calls_per_minute"
    assert raised.value.retry_after == 55
    run_calls(tracker, 1, budget, session_id="s3", caller="b")


def test_concurrent_calls_are_capped_per_caller_and_freed_on_release() -> None:
    tracker = BudgetTracker(Clock())
    budget = Budget(concurrent=2)
    tracker.acquire("s1", "a", budget)
    tracker.acquire("s2", "a", budget)
    with pytest.raises(BudgetExceededError) as raised:
        tracker.acquire("s1", "a", budget)
    assert raised.value.limit == "concurrent"
    assert "retry when one of them has finished" in raised.value.message
    tracker.acquire("s3", "b", budget)
    tracker.release("a")
    tracker.acquire("s1", "a", budget)


def test_a_session_that_used_its_calls_stays_refused_and_a_new_session_starts_fresh() -> None:
    clock = Clock()
    tracker = BudgetTracker(clock)
    budget = Budget(max_calls_per_session=3)
    run_calls(tracker, 3, budget)
    clock.now += 3600
    with pytest.raises(BudgetExceededError) as raised:
        tracker.acquire("s1", "a", budget)
    assert raised.value.limit == "max_calls_per_session"
    assert raised.value.retry_after is None
    run_calls(tracker, 3, budget, session_id="s2")
    tracker.end_session("s1")
    run_calls(tracker, 3, budget, session_id="s1")


def test_a_refused_call_uses_none_of_the_budget() -> None:
    clock = Clock()
    tracker = BudgetTracker(clock)
    budget = Budget(calls_per_minute=1, max_calls_per_session=2)
    run_calls(tracker, 1, budget)
    for _ in range(5):
        with pytest.raises(BudgetExceededError):
            tracker.acquire("s1", "a", budget)
    clock.now += 60
    run_calls(tracker, 1, budget)


def test_idle_callers_are_forgotten_after_a_window() -> None:
    clock = Clock()
    tracker = BudgetTracker(clock)
    budget = Budget(caller_calls_per_minute=1)
    for caller in ("a", "b", "c"):
        run_calls(tracker, 1, budget, caller=caller)
    clock.now += 61
    run_calls(tracker, 1, budget, caller="d")
    # Memory is the behaviour under test, and only the tracker's own map shows it.
    assert set(tracker._callers) == {"d"}


@pytest.mark.anyio
async def test_the_step_refuses_past_the_budget_with_an_error_result() -> None:
    budgets = Budgets(lambda role: Budget(max_calls_per_session=1) if role == "intern" else None, Clock())
    pipeline = Pipeline([budgets], ok)
    intern = session()
    assert not (await pipeline.run(call_on(intern))).is_error
    refused = await pipeline.run(call_on(intern))
    assert refused.is_error
    block = refused.content[0]
    assert isinstance(block, types.TextContent) and "max_calls_per_session" in block.text
    admin = session("s2", role="admin")
    for _ in range(3):
        assert not (await pipeline.run(call_on(admin))).is_error


@pytest.mark.anyio
async def test_the_step_frees_the_concurrency_slot_when_the_call_fails_or_is_cancelled() -> None:
    budgets = Budgets(lambda role: Budget(concurrent=1), Clock())
    context = session()
    started = anyio.Event()

    async def fail(call: ToolCall) -> types.CallToolResult:
        raise RuntimeError("tool crashed")

    async def hang(call: ToolCall) -> types.CallToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    with pytest.raises(RuntimeError):
        await budgets(call_on(context), fail)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(budgets, call_on(context), hang)
            await started.wait()
            with pytest.raises(BudgetExceededError):
                await budgets(call_on(context), ok)
            group.cancel_scope.cancel()
    assert not (await budgets(call_on(context), ok)).is_error


@pytest.mark.anyio
async def test_closing_a_session_forgets_its_count() -> None:
    budgets = Budgets(lambda role: Budget(max_calls_per_session=1), Clock())
    context = session()
    await budgets(call_on(context), ok)
    with pytest.raises(BudgetExceededError):
        await budgets(call_on(context), ok)
    await context.close()
    assert not (await budgets(call_on(context), ok)).is_error
