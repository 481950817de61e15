"""The bundled sqlite server's limits, through a real gateway running it as a process from the default configuration."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway.config.loading import default_config_path, load_config
from tests.support.harness import approve, gateway_client

pytestmark = pytest.mark.anyio

# The bound docs/configuration.md states for the server process: the interpreter and the SDK, SQLite's
# 32 MiB heap, and one row's copy in Python.
PEAK_RSS_BOUND_KIB = 150 * 1024

COUNTING = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n"
# Each of these took the server to hundreds of megabytes (the first to 656 MB) before it was bounded.
HOSTILE_QUERIES = [
    "SELECT randomblob(300000000)",
    f"{COUNTING} LIMIT 100000) SELECT group_concat(randomblob(1000)) FROM n",
    "WITH RECURSIVE n(i, s) AS (SELECT 1, '' UNION ALL SELECT i + 1, s || hex(randomblob(5000)) FROM n WHERE i < 500)"
    " SELECT length(s) FROM n ORDER BY s DESC",
    "SELECT " + ", ".join(["randomblob(4000000)"] * 12),
]


def text_of(result: types.CallToolResult) -> str:
    """Every text block of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def call(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """One call, bounded in time (a high-risk one after the person approved it)."""
    with anyio.fail_after(30):
        return await client.call_tool(name, arguments)


def sqlite_server_peaks(data_dir: Path) -> list[int]:
    """Peak resident memory (VmHWM, KiB) of every sqlite server process whose database is under `data_dir`."""
    peaks = []
    for process in Path("/proc").iterdir():
        try:
            command = (process / "cmdline").read_bytes().split(b"\0")
            status = (process / "status").read_text()
        except OSError:
            continue
        if b"servers.sqlite" in command and any(part.startswith(str(data_dir).encode()) for part in command):
            [peak] = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
            peaks.append(int(peak))
    return peaks


async def test_queries_built_to_exhaust_memory_are_refused_and_the_sqlite_process_stays_small(tmp_path: Path) -> None:
    config = load_config(default_config_path(), environ={"GATEWAY_DATA_DIR": str(tmp_path), "HOME": str(tmp_path)})
    config = replace(config, servers=tuple(server for server in config.servers if server.name == "sqlite"))
    async with gateway_client(config, elicitation_callback=approve) as (_, client):
        created = await call(client, "sqlite__execute", {"sql": "CREATE TABLE notes (body TEXT)"})
        assert not created.is_error, text_of(created)
        for sql in HOSTILE_QUERIES:
            refused = await call(client, "sqlite__query", {"sql": sql})
            assert refused.is_error, sql
            assert "statement stopped" in text_of(refused), sql
            assert "limit" in text_of(refused) and "Narrow it" in text_of(refused), sql
        # execute steps through a statement's rows too, and must not gather them.
        drained = await call(
            client, "sqlite__execute", {"sql": f"{COUNTING} LIMIT 400) SELECT zeroblob(1000000) FROM n"}
        )
        after = await call(client, "sqlite__query", {"sql": "SELECT 1 + 1 AS two"})
        peaks = sqlite_server_peaks(tmp_path)
    assert not drained.is_error, text_of(drained)
    assert after.structured_content is not None and after.structured_content["rows"] == [[2]]
    assert peaks, "no sqlite server process found"
    assert max(peaks) < PEAK_RSS_BOUND_KIB
