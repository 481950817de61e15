"""A misbehaving server's faults are logged once per kind, then summarised."""

import logging

import pytest

from gateway.upstreams.faults import FaultLog


def test_each_kind_is_logged_once_then_counted_and_summarised_per_period(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    now = [0.0]
    faults = FaultLog("noisy", clock=lambda: now[0], period=60)
    assert faults.report("garbage line", "line 0")
    for index in range(1, 1000):
        now[0] += 0.01
        assert not faults.report("garbage line", f"line {index}")
    faults.report("oversized message", "20 MB")
    assert len(caplog.records) == 2
    now[0] = 60
    faults.report("garbage line", "line 1000")
    summary = "upstream noisy: garbage line, 1000 more in the last 60 s; latest: line 1000"
    assert caplog.records[-1].getMessage() == summary


def test_counts_not_yet_summarised_are_logged_when_the_connection_ends(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    faults = FaultLog("noisy", clock=lambda: 5.0)
    for index in range(3):
        faults.report("garbage line", f"line {index}")
    faults.flush()
    faults.flush()
    assert [record.getMessage() for record in caplog.records][1:] == [
        "upstream noisy: garbage line, 2 more in the last 0 s; latest: line 2"
    ]
