"""The audit trail survives the gateway process being killed with SIGKILL, after calls or mid-load, on each backend."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from gateway.pipeline.audit import AuditStore, arguments_digest
from gateway.stores import open_database
from tests.support.access import http_client
from tests.support.databases import Backend
from tests.support.harness import REPO, serving_url
from tests.support.waiting import LIMIT, Lines

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


async def test_every_answered_call_of_a_load_is_in_the_audit_trail_once_the_killed_gateway_restarts(
    tmp_path: Path, store_backend: Backend
) -> None:
    """A call's row is spooled to a local file before its answer and shipped to the database
    later, so the restarted gateway replays what the killed one had not shipped."""
    config = write_config(tmp_path, store_backend)
    command = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port"]
    answered: list[dict[str, str]] = []
    with anyio.fail_after(90):
        async with _serving(command) as (url, process):
            enough = anyio.Event()

            async def load(index: int) -> None:
                async with http_client(url) as client:
                    for call in range(10_000):
                        arguments = {"name": f"session {index} call {call}"}
                        result = await client.call_tool("local__greet", arguments)
                        assert not result.is_error
                        answered.append(arguments)
                        if len(answered) >= 300:
                            enough.set()

            killed = anyio.Event()
            async with anyio.create_task_group() as group:
                for index in range(8):
                    group.start_soon(_until_killed, load, index, killed)
                await enough.wait()
                # Calls are in flight on every session: answered ones must all have their rows.
                process.send_signal(signal.SIGKILL)
                killed.set()
    spool = tmp_path / "data" / "spool" / "audit"
    assert [path.name for path in spool.glob("*.jsonl")] != []
    with anyio.fail_after(60):
        async with _serving(command):
            db = open_database(store_backend.settings, tmp_path / "data", "audit")
            try:
                stored = db.fetch_all("SELECT args_digest FROM audit WHERE tool = 'local__greet'")
            finally:
                db.close()
    assert len(answered) >= 300
    digests = [digest for (digest,) in stored]
    assert [arguments for arguments in answered if arguments_digest(arguments) not in digests] == []
    assert len(digests) == len(set(digests)), "a row was stored twice"
    assert list(spool.glob("*.jsonl")) == []


@asynccontextmanager
async def _serving(command: list[str]) -> AsyncIterator[tuple[str, anyio.abc.Process]]:
    """A `gateway serve` process on a port of its own, once it answers `/healthz`: its URL and
    process; killed on leaving."""
    said, log = Lines(), Lines()
    async with await anyio.open_process([*command, "0"], cwd=REPO) as process, anyio.create_task_group() as group:
        assert process.stdout is not None and process.stderr is not None
        group.start_soon(said.read, process.stdout)
        group.start_soon(log.read, process.stderr)
        try:
            url = await serving_url(said)
            async with httpx2.AsyncClient() as http:
                assert (await http.get(f"{url}/healthz", timeout=LIMIT)).status_code == 200
            yield url, process
        finally:
            if process.returncode is None:
                process.kill()


async def _until_killed(load: Callable[[int], Awaitable[None]], index: int, killed: anyio.Event) -> None:
    """Run one session's load until the gateway is gone: after the kill, its connection fails."""
    try:
        await load(index)
    except Exception:
        if not killed.is_set():
            raise
