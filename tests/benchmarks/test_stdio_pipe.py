"""The pipe benchmark runs a real child through the gateway's reader and through blocking reads."""

from __future__ import annotations

import pytest

from benchmarks.stdio_pipe import main


def test_the_pipe_benchmark_prints_the_gateway_s_reader_beside_blocking_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--trips", "50", "--rounds", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| the") or line.startswith("| b")]
    assert [row.split(" | ")[0] for row in rows] == ["| the gateway's reader", "| blocking reads and writes"]
    assert all(row.count(" us [") == 2 for row in rows)
