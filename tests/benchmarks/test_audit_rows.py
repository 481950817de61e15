"""The audit-row benchmark runs on a real SQLite store and reports both ways of writing rows."""

from __future__ import annotations

import pytest

from benchmarks.audit_rows import main


def test_the_audit_benchmark_prints_the_gateway_s_way_beside_a_commit_per_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--rows", "32", "--rounds", "1"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("| spooled") or line.startswith("| committed")]
    assert [row.split(" | ")[0] for row in rows] == ["| spooled (the gateway)", "| committed per row"]
    assert all(row.count(" us [") == 4 for row in rows)
