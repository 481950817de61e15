"""Peers of `catalog_scale`: FastMCP with one mounted proxy per server, and mcp-proxy (one endpoint per
server, no aggregation), each over the same 20 stdio upstreams, measured the way the gateway is.

Each peer is installed, pinned, into a virtualenv of its own under `--peers-dir` the first time
(their dependencies conflict with each other and with ours); later runs reuse it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2

from benchmarks.catalog_scale import (
    CATALOG_TIMEOUT,
    SERVERS,
    TOOLS,
    UPSTREAM,
    PeerFigures,
    RawSession,
    rss_mb,
    upstream_command,
)
from benchmarks.gateway_latency import REPO, cpu_seconds, free_port, started

PINS = {"fastmcp": "fastmcp==4.2.3", "mcp-proxy": "mcp-proxy==0.13.0"}

FASTMCP = """
import sys
from fastmcp import FastMCP
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

port, python, upstream, servers, tools, cwd = sys.argv[1:7]
main = FastMCP("peer")
for index in range(int(servers)):
    name = f"s{index:02d}"
    transport = StdioTransport(command=python, args=["-c", upstream, name, tools], cwd=cwd)
    main.mount(create_proxy(transport), namespace=name)
main.run(transport="http", host="127.0.0.1", port=int(port), json_response=True, show_banner=False)
"""


def run_all(peers_dir: Path, directory: Path, listings: int) -> dict[str, PeerFigures]:
    """Every peer's figures for one round."""
    pythons = install(peers_dir)
    return {
        "FastMCP 4.2.3, mounted proxies": fastmcp(pythons["fastmcp"], directory, listings),
        "mcp-proxy 0.13.0, 20 endpoints": mcp_proxy(pythons["mcp-proxy"], directory, listings),
    }


def install(peers_dir: Path) -> dict[str, Path]:
    """Each peer's Python, its virtualenv made and the pinned package installed when missing."""
    pythons = {}
    for name, pin in PINS.items():
        venv = peers_dir / name
        python = venv / "bin" / "python"
        marker = venv / "installed.txt"
        if not marker.exists() or marker.read_text() != pin:
            print(f"installing {pin} into {venv}", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            # Our own constraints pin versions the peer may not accept; the peer gets its own resolution.
            env = {**os.environ, "PIP_CONSTRAINT": ""}
            subprocess.run([str(python), "-m", "pip", "install", "-q", pin], check=True, env=env)
            marker.write_text(pin)
        pythons[name] = python
    return pythons


async def _full(sessions: list[RawSession]) -> int:
    counts = [0] * len(sessions)

    async def one(index: int) -> None:
        counts[index] = await sessions[index].catalog_size(lambda name: True)

    async with anyio.create_task_group() as group:
        for index in range(len(sessions)):
            group.start_soon(one, index)
    return sum(counts)


async def measure(command: list[str], urls: list[str], log: Path, listings: int) -> PeerFigures:
    """Start the peer, wait until `urls` (listed at once) show every tool, then time full listings."""
    with started(command, log=log) as peer:
        started_at = time.perf_counter()
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
            sessions = [RawSession(http, url) for url in urls]
            with anyio.fail_after(CATALOG_TIMEOUT):
                while True:
                    if peer.poll() is not None:
                        raise SystemExit(f"the peer exited early; see {log}")
                    try:
                        for session in sessions:
                            if not session.opened:
                                await session.open()
                        if await _full(sessions) >= SERVERS * TOOLS:
                            break
                    except (httpx2.HTTPError, KeyError, RuntimeError):
                        pass
                    await anyio.sleep(0.05)
            catalog = time.perf_counter() - started_at
            await _full(sessions)
            cpu_before = cpu_seconds(peer.pid)
            samples = []
            for _ in range(listings):
                began = time.perf_counter()
                await _full(sessions)
                samples.append(time.perf_counter() - began)
            cpu = (cpu_seconds(peer.pid) - cpu_before) / listings * 1000
        rss = rss_mb(peer.pid)
    return PeerFigures(catalog, statistics.median(samples) * 1000, cpu, rss)


def fastmcp(python: Path, directory: Path, listings: int) -> PeerFigures:
    """FastMCP 4 with one proxy per server mounted under its name, answering with JSON bodies."""
    port = free_port()
    command = [str(python), "-c", FASTMCP, str(port), sys.executable, UPSTREAM, str(SERVERS), str(TOOLS), str(REPO)]
    return anyio.run(measure, command, [f"http://127.0.0.1:{port}/mcp"], directory / "fastmcp.log", listings)


def mcp_proxy(python: Path, directory: Path, listings: int) -> PeerFigures:
    """mcp-proxy with the 20 servers as named servers, one endpoint each (`/servers/<name>/mcp`);
    they start in the proxy's working directory, the repository."""
    port = free_port()
    names = [f"s{index:02d}" for index in range(SERVERS)]
    servers = {}
    for name in names:
        command = upstream_command(name)
        servers[name] = {"command": command[0], "args": command[1:]}
    config = directory / "mcp-proxy.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    command = [str(python.parent / "mcp-proxy"), "--port", str(port), "--named-server-config", str(config)]
    command += ["--log-level", "WARNING"]
    urls = [f"http://127.0.0.1:{port}/servers/{name}/mcp" for name in names]
    return anyio.run(measure, command, urls, directory / "mcp-proxy.log", listings)
