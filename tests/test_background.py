"""The service's background loops: a loop that fails runs again after a growing wait, and how
each stands is known until it works again."""

from __future__ import annotations

import pytest

from gateway.errors import GatewayError
from gateway.runtime.background import Background

pytestmark = pytest.mark.anyio


class Clock:
    """A hand-moved clock: the waits a loop asks for pass at once, each moving the clock on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


async def test_a_loop_that_raises_runs_again_after_a_doubling_wait_and_is_degraded_until_it_works() -> None:
    clock = Clock()
    background = Background(clock, lambda: 1_790_000_000.0, sleep=clock.sleep, initial=0.5, maximum=4.0)
    seen: list[dict[str, object]] = []
    runs = 0

    async def loop() -> None:
        nonlocal runs
        runs += 1
        if runs <= 4:
            raise GatewayError(f"the database is down (attempt {runs})")
        seen.append(background.conditions()["follower"].as_dict())
        background.report("follower", None)

    await background.keep("follower", loop)
    assert clock.waits == [0.5, 1.0, 2.0, 4.0]
    assert seen == [
        {"state": "degraded", "error": "the database is down (attempt 4)", "since": 1_790_000_000.0, "failures": 4}
    ]
    assert background.conditions()["follower"].as_dict() == {"state": "ok"}


async def test_a_loop_run_again_that_has_not_failed_for_the_longest_wait_counts_as_working() -> None:
    clock = Clock()
    background = Background(clock, clock, sleep=clock.sleep, initial=0.5, maximum=4.0)
    runs = 0

    async def loop() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise RuntimeError("a bug")

    await background.keep("sweeper", loop)
    degraded = background.conditions()["sweeper"].as_dict()
    clock.now += 4.0
    assert degraded["state"] == "degraded" and degraded["error"] == "RuntimeError: a bug"
    assert background.conditions()["sweeper"].as_dict() == {"state": "ok"}


async def test_a_loop_reporting_its_own_outage_is_degraded_with_its_reason_and_secrets_kept_out() -> None:
    clock = Clock()
    background = Background(clock, clock, lambda text: text.replace("hunter2", "***"))
    background.report("changes", "redis at :hunter2@127.0.0.1 unreachable")
    background.report("changes", "redis at :hunter2@127.0.0.1 unreachable")
    degraded = background.conditions()["changes"].as_dict()
    background.report("changes", None)
    error = "redis at :***@127.0.0.1 unreachable"
    assert degraded == {"state": "degraded", "error": error, "since": 1000.0, "failures": 2}
    assert background.conditions()["changes"].as_dict() == {"state": "ok"}
