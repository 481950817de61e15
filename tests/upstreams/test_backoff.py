"""The restart backoff: doubling to a ceiling, starting over after a stable run."""

from gateway.runtime.backoff import Backoff


def test_the_wait_doubles_after_each_failure_up_to_the_maximum() -> None:
    backoff = Backoff(0.5, 4, 60, clock=lambda: 0.0)
    assert [backoff.failed() for _ in range(6)] == [0.5, 1, 2, 4, 4, 4]


def test_a_run_shorter_than_the_reset_period_keeps_the_wait_growing() -> None:
    now = [0.0]
    backoff = Backoff(0.5, 30, 60, clock=lambda: now[0])
    backoff.failed()
    backoff.failed()
    backoff.ready()
    now[0] += 59
    assert backoff.failed() == 2


def test_the_wait_starts_over_after_a_stable_run() -> None:
    now = [0.0]
    backoff = Backoff(0.5, 30, 60, clock=lambda: now[0])
    for _ in range(5):
        backoff.failed()
    backoff.ready()
    now[0] += 60
    assert backoff.failed() == 0.5
    assert backoff.failed() == 1
