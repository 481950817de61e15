"""The live-changes benchmark, run small: no change made under load fails, repeats or mixes up a call."""

import pytest

from benchmarks.live_changes import run


@pytest.mark.slow
# A gateway, three servers started and restarted, eleven changes: minutes on a loaded machine, not the default bound.
@pytest.mark.timeout(600)
def test_no_call_fails_reaches_a_server_twice_or_gets_another_answer_while_everything_changes_live() -> None:
    result = run(sessions=3, settle=0.5)

    assert result.figures[0].change.name == "none (reference)"
    assert all(entry.calls for entry in result.figures), "a change saw no calls"
    counts = [(entry.failed, entry.duplicated, entry.wrong) for entry in result.figures]
    assert counts == [(0, 0, 0)] * len(result.figures)
    processes = {entry.change.name: entry.processes for entry in result.figures}
    # A restart and an edit of args answer from a new process; an edit of timeout or tags keeps the one it has.
    assert processes["restart (API)"] == processes["file: args (new connection)"] == 2
    assert processes["file: timeout only"] == processes["PATCH tags (registered)"] == 1
