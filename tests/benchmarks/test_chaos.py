"""The chaos benchmark, run small: both replicas live through every outage and no answered call loses its audit row."""

import pytest

from benchmarks.chaos import run


@pytest.mark.slow
# A private PostgreSQL and Redis, two replicas and HAProxy, three outages: minutes on a loaded machine.
@pytest.mark.timeout(600)
def test_both_replicas_recover_without_a_restart_and_every_answered_call_is_audited_after_each_outage() -> None:
    result = run(sessions=2, outage=1.0, settle=0.5)

    assert [entry.window.name for entry in result.figures] == ["none (reference)", "PostgreSQL", "Redis", "both"]
    assert all(entry.calls for entry in result.figures), "a window saw no calls"
    assert result.same_processes and result.healthy == [200, 200]
    assert all(None not in entry.window.recovered for entry in result.figures)
    assert [entry.missing for entry in result.figures] == [0, 0, 0, 0]
    # Nothing fails without an outage.
    assert result.figures[0].failed == 0
