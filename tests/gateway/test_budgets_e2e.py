"""Call budgets through a real gateway over HTTP: per session, per caller, at once, per session ever,
reset after the window, and every refusal audited with its reason. The counting tests run on both
budget counters: in the process, and in a real Redis (`store.redis`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway.pipeline.budgets import BudgetCounter, BudgetTracker
from gateway.service import Gateway
from gateway.shared.redisstate import RedisState
from tests.support.access import KEYS, ROLES, access_config, auth_section, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.services import redis_service, redis_url
from tests.support.skills import text
from tests.support.toy import build_server as toy
from tests.support.waiting import Inbox

pytestmark = pytest.mark.anyio
__all__ = ["redis_service", "redis_url"]

INTERN = KEYS["intern"]


class ManualClock:
    """A monotonic clock the test moves by hand, so a minute passes at once."""

    def __init__(self) -> None:
        # A whole start, so that moving it by whole seconds gives exact differences (floats near
        # `time.monotonic()` do not: 60 - 20 could come out as 40.000001 and be told as 41 s).
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Counter = Callable[[ManualClock], BudgetCounter]


@pytest.fixture(params=["memory", "redis"])
async def counter(request: pytest.FixtureRequest) -> AsyncIterator[Counter]:
    """How the gateway counts calls: in the process, or in the test run's Redis."""
    if request.param == "memory":
        yield BudgetTracker
        return
    url: str = request.getfixturevalue("redis_url")
    opened: list[RedisState] = []

    def in_redis(clock: ManualClock) -> BudgetCounter:
        opened.append(RedisState(url, clock=clock, session_ttl=600, lease=120, loop_window=20))
        return opened[-1].budgets

    yield in_redis
    for state in opened:
        await state.aclose()


@asynccontextmanager
async def metered(
    tmp_path: Path, counter: Counter = BudgetTracker, **budget: int
) -> AsyncIterator[tuple[Gateway, str, ManualClock]]:
    """A gateway whose intern role has `budget`, counting calls with `counter` on a manual clock."""
    roles = {**ROLES, "intern": {"allow": ["toy__echo", "toy__sleep"], "budget": budget}}
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=roles)
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url):
        clock = ManualClock()
        # The Gateway builds its Budgets step on the real monotonic clock and takes no clock for it;
        # the tracker is swapped before any call so that the window can pass at once.
        gateway.budgets.tracker = counter(clock)
        yield gateway, url, clock


async def _echo(client: Any, word: str = "hi") -> tuple[bool, str]:
    result = await client.call_tool("toy__echo", {"text": word})
    return bool(result.is_error), text(result)


async def test_a_session_past_its_calls_per_minute_is_told_when_to_retry(tmp_path: Path, counter: Counter) -> None:
    async with (
        metered(tmp_path, counter, calls_per_minute=3) as (gateway, url, clock),
        http_client(url, INTERN) as client,
    ):
        admitted = [await _echo(client, str(n)) for n in range(3)]
        clock.now += 20
        refused, message = await _echo(client, "fourth")
        refusals = [entry for entry in await gateway.audit.recent(10) if entry.outcome.startswith("refused")]
    assert admitted == [(False, "0"), (False, "1"), (False, "2")]
    assert refused
    assert "calls_per_minute" in message and "retry in 40 seconds" in message
    (refusal,) = refusals
    assert refusal.outcome == "refused:budget"
    assert "calls_per_minute" in refusal.detail


async def test_the_window_passing_admits_calls_again(tmp_path: Path, counter: Counter) -> None:
    async with metered(tmp_path, counter, calls_per_minute=2) as (_, url, clock), http_client(url, INTERN) as client:
        assert [await _echo(client) for _ in range(2)] == [(False, "hi")] * 2
        assert (await _echo(client))[0]
        clock.now += 61
        assert await _echo(client, "again") == (False, "again")


async def test_a_caller_is_counted_across_its_sessions(tmp_path: Path, counter: Counter) -> None:
    async with (
        metered(tmp_path, counter, caller_calls_per_minute=3) as (gateway, url, _),
        http_client(url, INTERN) as first,
        http_client(url, INTERN) as second,
        http_client(url, KEYS["admin"]) as other_caller,
    ):
        assert [await _echo(first) for _ in range(2)] == [(False, "hi")] * 2
        assert await _echo(second) == (False, "hi")
        refused, message = await _echo(second)
        assert not (await _echo(other_caller))[0]
        assert len({session.id for session in gateway.sessions.live()}) == 3
    assert refused and "your sessions together" in message


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_anonymous_clients_count_together_against_caller_wide_limits(tmp_path: Path, mode: str) -> None:
    # Anonymous clients share no state, but a fresh session (or stateless request) must not
    # bring a fresh budget: they are one caller as far as caller-wide limits go.
    roles = {**ROLES, "guest": {"allow": ["toy__echo"], "budget": {"caller_calls_per_minute": 3}}}
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=roles, auth=auth_section(anonymous_role="guest"))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, None, mode=mode) as first,
        http_client(url, None, mode=mode) as second,
    ):
        admitted = [await _echo(first) for _ in range(2)] + [await _echo(second)]
        refused, message = await _echo(second)
    assert admitted == [(False, "hi")] * 3
    assert refused and "caller_calls_per_minute" in message


async def test_a_caller_cannot_run_more_calls_at_once_than_its_budget(tmp_path: Path, counter: Counter) -> None:
    started = anyio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with (
        metered(tmp_path, counter, concurrent=1) as (_, url, _),
        http_client(url, INTERN) as first,
        http_client(url, INTERN) as second,
    ):
        outcome: dict[str, Any] = {}

        async def slow() -> None:
            outcome["slow"] = await first.call_tool("toy__sleep", {"seconds": 0.5}, progress_callback=progress)

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            with anyio.fail_after(10):
                await started.wait()
            refused, message = await _echo(second)
        after = await _echo(second, "after")
    assert refused and "already running" in message
    assert not outcome["slow"].is_error
    assert after == (False, "after")


async def test_a_session_that_spent_its_calls_stays_refused_and_a_new_one_starts_fresh(
    tmp_path: Path, counter: Counter
) -> None:
    async with metered(tmp_path, counter, max_calls_per_session=2) as (gateway, url, clock):
        async with http_client(url, INTERN) as client:
            assert [await _echo(client) for _ in range(2)] == [(False, "hi")] * 2
            clock.now += 3600
            refused, message = await _echo(client)
        async with http_client(url, INTERN) as fresh:
            assert await _echo(fresh, "new") == (False, "new")
        outcomes = [entry.outcome for entry in await gateway.audit.recent(10)]
    assert refused and "max_calls_per_session" in message
    assert outcomes.count("refused:budget") == 1


class EndCountingTracker(BudgetTracker):
    """A tracker that records every session it is told has ended."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.ended: Inbox[str] = Inbox()

    def end_session(self, session_id: str) -> None:
        super().end_session(session_id)
        self.ended.add(session_id)


async def test_a_session_that_ends_is_forgotten_by_the_budgets_once(tmp_path: Path) -> None:
    async with metered(tmp_path, calls_per_minute=5) as (gateway, url, clock):
        tracker = gateway.budgets.tracker = EndCountingTracker(clock)
        async with http_client(url, INTERN) as client:
            assert await _echo(client) == (False, "hi")
            (session,) = gateway.sessions.live()
        await tracker.ended.until(lambda: bool(tracker.ended), "the budgets told that the session ended")
        # Released by the gateway before its closers told the budgets.
        assert len(gateway.sessions) == 0
    assert tracker.ended == [session.id]
