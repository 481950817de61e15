"""The audit trail survives the gateway process being killed with SIGKILL right after the calls, on each backend."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from gateway.pipeline.audit import AuditStore
from tests.support.databases import Backend
from tests.support.harness import REPO

pytestmark = pytest.mark.anyio


def write_config(tmp_path: Path, backend: Backend) -> Path:
    """A gateway configuration with only the local test tools, its data under `tmp_path`, its stores on `backend`."""
    path = tmp_path / "gateway.yaml"
    config = {
        "gateway": {"data_dir": str(tmp_path / "data"), "call_timeout": 5},
        "local_tools": ["tests.support.localfns:greet", "tests.support.localfns"],
        **({"store": backend.config_section()} if backend.settings.url else {}),
    }
    path.write_text(yaml.safe_dump(config))
    return path


def gateway_process(config: Path) -> StdioServerParameters:
    """`python -m gateway stdio --config <config>` run from the repository."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "stdio", "--config", str(config)], cwd=str(REPO)
    )


EXPECTED = [
    ("local__greet", "ok"),
    ("local__explode", "error"),
    ("local__greet", "invalid_arguments"),
    *[("local__word_count", "ok")] * 4,
    ("local__word_count", "refused:loop"),
    ("local__nothing", "unknown_tool"),
]


async def test_every_call_is_in_the_audit_trail_after_the_gateway_is_killed(
    tmp_path: Path, store_backend: Backend
) -> None:
    config = write_config(tmp_path, store_backend)
    with anyio.fail_after(30):
        async with Client(gateway_process(config)) as client:
            reply = (await client.call_tool("local__process_id", {})).content[0]
            assert isinstance(reply, types.TextContent)
            pid = int(reply.text)
            await client.call_tool("local__greet", {"name": "Ada"})
            await client.call_tool("local__explode", {"message": "boom"})
            await client.call_tool("local__greet", {"name": 42})
            for _ in range(5):
                await client.call_tool("local__word_count", {"text": "same words"})
            with pytest.raises(MCPError):
                await client.call_tool("local__nothing", {})
            # Killed with replies delivered and nothing shut down: only committed rows can survive.
            os.kill(pid, signal.SIGKILL)

    store = AuditStore.open(store_backend.settings, tmp_path / "data")
    try:
        rows = await store.recent(limit=100)
    finally:
        store.close()
    assert [(row.tool, row.outcome) for row in reversed(rows)] == [("local__process_id", "ok"), *EXPECTED]

    with anyio.fail_after(30):
        listing = await anyio.run_process(
            [sys.executable, "-m", "gateway", "audit", "--config", str(config), "--limit", "100"], cwd=REPO
        )
    lines = listing.stdout.decode().splitlines()
    assert len(lines) == len(EXPECTED) + 1
    for line, (tool, outcome) in zip(reversed(lines), [("local__process_id", "ok"), *EXPECTED], strict=True):
        assert f" {tool} " in line and f" {outcome} " in line
