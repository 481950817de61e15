"""Session containers started ahead follow the sessions arriving: as many as arrived within one start-up."""

from __future__ import annotations

from gateway.sandbox.demand import HORIZON, MOST, Demand


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_without_arrivals_the_configured_count_is_kept() -> None:
    demand = Demand(1, Clock())
    demand.started(4.0)
    assert demand.size() == 1


def test_sessions_arriving_within_one_start_up_are_each_kept_a_container() -> None:
    clock = Clock()
    demand = Demand(1, clock)
    demand.started(4.0)
    for _ in range(3):
        demand.arrived()
        clock.now += 1.5
    assert demand.size() == 3


def test_sessions_arriving_slower_than_a_start_up_need_no_more_than_the_configured_count() -> None:
    clock = Clock()
    demand = Demand(1, clock)
    demand.started(4.0)
    for _ in range(5):
        demand.arrived()
        clock.now += 10
    assert demand.size() == 1


def test_the_slowest_recent_start_up_sets_the_span() -> None:
    clock = Clock()
    demand = Demand(1, clock)
    demand.started(1.0)
    demand.started(6.0)
    for _ in range(3):
        demand.arrived()
        clock.now += 2.5
    assert demand.size() == 3


def test_a_burst_counts_until_it_is_older_than_the_horizon_then_the_pool_shrinks_back() -> None:
    clock = Clock()
    demand = Demand(2, clock)
    demand.started(4.0)
    for _ in range(5):
        demand.arrived()
    assert demand.size() == 5
    clock.now += HORIZON + 1
    assert demand.size() == 2


def test_never_more_than_the_ceiling_whatever_the_burst() -> None:
    demand = Demand(1, Clock())
    for _ in range(MOST * 3):
        demand.arrived()
    assert demand.size() == MOST
