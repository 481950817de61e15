"""The load benchmark with upstream kills, run small: every answer a session gets is its own."""

import pytest

from benchmarks.load_faults import run_once


@pytest.mark.slow
def test_sessions_get_only_their_own_answers_while_the_upstream_is_killed() -> None:
    run = run_once(sessions=5, duration=4, kill_every=1)

    assert run.tally.latencies, "no call completed"
    assert run.tally.wrong == 0
