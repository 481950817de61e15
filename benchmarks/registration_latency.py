"""How soon a server registered while the gateway runs reaches a connected client, next to what
the server itself takes to be connected and listed.

Run `python -m benchmarks.registration_latency [--runs N]` from the repository root. The echo
server runs over streamable HTTP in a subprocess; the gateway runs in this process with one
handshake-era client connected in memory. Each run registers the server under a new name
(`ServerAdmin.add`), waits for the client's tools/list_changed notification and lists the
tools again until the new tool is there, then removes the server. The reference is a fresh SDK
client connecting to the same server and listing its tools: the least any registration costs.
The gateway's share is the difference; the budget is 100 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from benchmarks.gateway_latency import ECHO_HTTP, free_port, percentile, started, wait_until_ready
from gateway.config.loading import parse_config
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway

TARGET_ADDED_MS = 100.0
RUN_TIMEOUT = 30.0


async def reference(url: str) -> float:
    """Milliseconds for a fresh client to connect to `url` and list its tools."""
    start = time.perf_counter()
    async with Client(url, mode="legacy") as client:
        await client.list_tools()
    return (time.perf_counter() - start) * 1000


async def registrations(url: str, runs: int, data_dir: Path) -> tuple[list[float], list[float]]:
    """Per run, milliseconds from `servers.add` to the client listing the new tool, and the reference."""
    config = parse_config({"gateway": {"data_dir": str(data_dir)}}, source="benchmark", base_dir=data_dir)
    gateway = Gateway(config)
    changed = anyio.Event()

    async def handle(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    joined: list[float] = []
    references: list[float] = []
    async with gateway.running(), Client(build_server(gateway), mode="legacy", message_handler=handle) as client:
        await client.list_tools()
        for run in range(runs):
            references.append(await reference(url))
            name = f"echo{run}"
            changed = anyio.Event()
            with anyio.fail_after(RUN_TIMEOUT):
                start = time.perf_counter()
                await gateway.servers.add({"name": name, "url": url})
                while True:
                    await changed.wait()
                    changed = anyio.Event()
                    listed = await client.list_tools(cache_mode="refresh")
                    if any(tool.name.startswith(f"{name}__") for tool in listed.tools):
                        break
                joined.append((time.perf_counter() - start) * 1000)
                await gateway.servers.remove(name)
    return joined, references


def report(joined: Sequence[float], references: Sequence[float]) -> int:
    """Print the figures side by side; exit status 1 when the gateway's share is over budget."""
    added = [total - ref for total, ref in zip(joined, references, strict=True)]
    print(f"{'':<44}{'p50':>10}{'p90':>10}{'max':>10}")
    rows = [
        ("server alone: connect + tools/list (ms)", references),
        ("registered -> client lists the tool (ms)", joined),
        ("gateway's share (ms)", added),
    ]
    for label, samples in rows:
        print(f"{label:<44}{statistics.median(samples):>10.1f}{percentile(samples, 0.9):>10.1f}{max(samples):>10.1f}")
    share = statistics.median(added)
    verdict = "within" if share <= TARGET_ADDED_MS else "OVER"
    print(f"gateway's share at p50: {share:.1f} ms, {verdict} the budget of {TARGET_ADDED_MS:g} ms")
    return 0 if share <= TARGET_ADDED_MS else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Start the echo server, measure, print."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.registration_latency")
    parser.add_argument("--runs", type=int, default=30, help="registrations to time (default 30)")
    args = parser.parse_args(argv)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "echo.log"
        with started([sys.executable, "-c", ECHO_HTTP, str(port)], log=log) as process:
            wait_until_ready(process, url, log)
            joined, references = anyio.run(registrations, url, args.runs, Path(scratch) / "data")
    print(f"{args.runs} registrations of a streamable-HTTP server with 1 tool, one handshake-era client connected")
    return report(joined, references)


if __name__ == "__main__":
    raise SystemExit(main())
