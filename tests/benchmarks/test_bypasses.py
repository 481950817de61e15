"""The bypass benchmark serves the gateway with each bypass and without it, and gives each bypass's gain."""

from __future__ import annotations

import pytest

from benchmarks.bypasses import main

pytestmark = pytest.mark.slow


def test_the_bypass_benchmark_serves_every_variant_and_gives_each_bypass_s_gain(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(
        [
            "--rounds",
            "1",
            "--calls",
            "20",
            "--seconds",
            "0.5",
            "--listings",
            "2",
            "--tools",
            "20",
            "--quiet-timeout",
            "0",
        ]
    )
    rows = capsys.readouterr().out.splitlines()
    figures = rows[rows.index("") + 2 :][:4]
    assert [row.split()[0] for row in figures] == ["kept", "no-hot-path", "sdk-streams", "no-direct-calls"]
    assert [row[:16].strip() for row in rows[-3:]] == ["hot path", "response mode", "direct calls"]
    # Five figures a row, each a median and its range.
    assert all(row.count(" [") == 5 for row in figures + rows[-3:])
