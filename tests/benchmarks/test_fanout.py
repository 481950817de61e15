"""The fan-out benchmark registers servers on one real replica and times both replicas' sessions."""

from __future__ import annotations

import pytest

from benchmarks.fanout import main
from tests.support.databases import server_url
from tests.support.services import redis_service, redis_url

__all__ = ["redis_service", "redis_url"]


@pytest.mark.slow
def test_the_fan_out_benchmark_prints_both_replicas_beside_the_server_alone(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--rounds", "1", "--redis", redis_url, "--postgres", server_url()])
    rows = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| servers.echo") or line.startswith("| a hand")
    ]
    assert len(rows) == 2
    assert all(row.count(" ms |") == 4 for row in rows)
