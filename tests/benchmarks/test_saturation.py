"""The saturation benchmark's accounting: client processes' calls and the gateway's own CPU over one window."""

from __future__ import annotations

import pytest

from benchmarks import saturation


def test_a_point_reports_calls_the_gateways_cpu_and_percentiles_from_every_client_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    saturation.main(["--sessions", "6", "--clients", "2", "--seconds", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("load average before:")
    gateways, sessions, calls_per_s, cores, per_cpu, p50, p99, _ = lines[2].split()
    assert (gateways, sessions) == ("single", "6")
    assert float(calls_per_s) > 0 and float(cores) > 0 and float(per_cpu) > 0
    assert 0 < float(p50) <= float(p99)
