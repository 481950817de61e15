"""The poisoning heuristics flag none of the tools we ship, nor those of the interop tests' third-party
servers; the benchmark prints the figures docs/security.md gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.poisoning_rates import livemcpbench, meta_tools, own_servers, skills, third_party

pytestmark = pytest.mark.anyio


async def test_no_tool_we_ship_is_flagged(tmp_path: Path) -> None:
    ours = [*await own_servers(tmp_path), meta_tools(), skills()]
    assert {row.server for row in ours} >= {"calc", "files", "sqlite", "python", "gateway (meta-tools)", "skills/"}
    assert all(row.tools for row in ours)
    assert {row.server: row.flagged for row in ours if row.flagged} == {}


async def test_the_interop_servers_and_the_livemcpbench_sample_are_counted_and_none_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs, _ = await third_party([], tmp_path)
    sample, _ = livemcpbench()
    with capsys.disabled():
        for row in [*theirs, sample]:
            print(f"\n{row.server}: {len(row.flagged)} of {row.tools} tools flagged")
    assert "mcp-server-time" in {row.server for row in theirs}
    assert sample.tools == 527
    assert {row.server: row.flagged for row in [*theirs, sample] if row.flagged} == {}
