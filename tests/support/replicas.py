"""Gateway replicas as real processes: `python -m gateway serve` on their own ports and data
directories, sharing one Redis, behind a real HAProxy that hashes on `Mcp-Session-Id`."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from anyio.abc import Process

from tests.support.access import KEYS, auth_section
from tests.support.harness import REPO, serving_url
from tests.support.services import haproxy
from tests.support.waiting import Lines

START_LIMIT = 60.0
# The line `serve` prints once every server has connected or failed.
SETTLED = re.compile(r"^\d+/\d+ servers ready")


@dataclass
class Replica:
    """One gateway process: its URL, its process (to kill) and its log."""

    url: str
    port: int
    process: Process
    log: Path

    def kill(self) -> None:
        """End the process at once, as a crashed node would."""
        self.process.send_signal(signal.SIGKILL)


@dataclass
class Cluster:
    """Replicas behind a load balancer."""

    replicas: list[Replica]
    url: str
    """The load balancer's URL: where clients connect."""


def replica_config(
    root: Path,
    name: str,
    redis_url: str,
    *,
    servers: Mapping[str, Any],
    store: Mapping[str, Any] | None = None,
    **document: Any,
) -> Path:
    """The config file of one replica: its own data directory, the shared store, the test callers' keys."""
    data: dict[str, Any] = {
        "gateway": {
            "data_dir": str(root / name / "data"),
            "restart_backoff_initial": 0.05,
            **document.pop("gateway", {}),
        },
        "servers": dict(servers),
        "auth": auth_section(),
        "store": {"redis": redis_url, **(store or {})},
        **document,
    }
    path = root / name / "gateway.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


@asynccontextmanager
async def replica(config: Path) -> AsyncIterator[Replica]:
    """`python -m gateway serve` with `config` on a port of its own, once /readyz says its servers
    are ready; what it writes goes to gateway.log beside `config`."""
    log = config.with_name("gateway.log")
    command = [sys.executable, "-m", "gateway", "--log-level", "INFO", "serve", "--config", str(config), "--port", "0"]
    said = Lines(copy=log)
    async with (
        await anyio.open_process(command, cwd=REPO, stderr=subprocess.STDOUT) as process,
        anyio.create_task_group() as group,
    ):
        assert process.stdout is not None
        group.start_soon(said.read, process.stdout)
        try:
            url = await serving_url(said)
            # Said once every server has connected or failed: /readyz then answers as it stands.
            await said.until(lambda line: SETTLED.match(line) is not None, "its servers settled", limit=START_LIMIT)
            async with httpx2.AsyncClient() as http:
                ready = await http.get(f"{url}/readyz", timeout=START_LIMIT)
            assert ready.status_code == 200, f"replica not ready: {said.text[-2000:]}"
            yield Replica(url, int(url.rsplit(":", 1)[1]), process, log)
        finally:
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(20):
                await process.wait()


@asynccontextmanager
async def cluster(configs: Sequence[Path], workdir: Path) -> AsyncIterator[Cluster]:
    """The replicas of `configs` behind one HAProxy."""
    async with AsyncExitStack() as stack:
        replicas = [await stack.enter_async_context(replica(config)) for config in configs]
        port = stack.enter_context(haproxy([r.port for r in replicas], workdir))
        yield Cluster(replicas, f"http://127.0.0.1:{port}")


async def live_sessions(url: str) -> list[dict[str, Any]]:
    """The sessions a replica holds, as its admin API lists them."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['admin']}"}) as http:
        answer = await http.get(f"{url}/api/v1/sessions")
        answer.raise_for_status()
        sessions: list[dict[str, Any]] = answer.json()["sessions"]
        return sessions


async def held_sessions(url: str) -> list[dict[str, Any]]:
    """The sessions a replica holds itself: its listing without those of the other replicas."""
    return [session for session in await live_sessions(url) if "replica" not in session]
