"""How long other sessions wait while one session receives a large result from a stdio server.

Run `python -m benchmarks.large_results [--sizes 2000000 20000000]` from the repository root. It
starts a real gateway in this process with the toy server as a real stdio process and two client
sessions. For each size, a heartbeat task sleeps 1 ms in a loop and records the gaps between its
wake-ups while the first session calls `big` (numbered lines of that many characters) on one toy
server and the second keeps calling `echo` on another, so that only the gateway's event loop is
shared between them. A gap is time in which nothing else on the event loop could run.

Printed per size: the call's wall time, the event loop thread's CPU time during it, the heartbeat's
longest gap and the sum of its gaps over 20 ms, and the second session's slowest `echo`. The same
figures for a quiet second first give the scale of the machine's own noise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from gateway.config.loading import parse_config
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway

REPO = Path(__file__).resolve().parents[1]


class Watch:
    """A heartbeat on the event loop and a second session's echo latencies, while it runs."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.echoes: list[float] = []
        self.done = anyio.Event()

    async def heartbeat(self) -> None:
        last = time.perf_counter()
        while not self.done.is_set():
            await anyio.sleep(0.001)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    async def echo(self, client: Client) -> None:
        count = 0
        while not self.done.is_set():
            started = time.perf_counter()
            await client.call_tool("other__echo", {"text": f"ping {count}"})
            self.echoes.append(time.perf_counter() - started)
            count += 1


async def measure(first: Client, second: Client, size: int | None) -> str:
    """One row: watch the loop while `first` calls `big` of `size` (or sleeps a second when None)."""
    watch = Watch()
    cpu = time.thread_time()
    started = time.perf_counter()
    outcome = "-"
    async with anyio.create_task_group() as group:
        group.start_soon(watch.heartbeat)
        group.start_soon(watch.echo, second)
        if size is None:
            await anyio.sleep(1)
        else:
            result = await first.call_tool("toy__big", {"size": size})
            outcome = "refused" if result.is_error else "shaped"
        watch.done.set()
    wall = time.perf_counter() - started
    cpu = time.thread_time() - cpu
    stalled = sum(gap for gap in watch.gaps if gap > 0.02)
    label = "quiet" if size is None else f"{size:,}"
    return (
        f"| {label} | {outcome} | {wall:.2f} s | {cpu * 1000:.0f} ms | {max(watch.gaps) * 1000:.1f} ms "
        f"| {stalled * 1000:.0f} ms | {max(watch.echoes, default=0) * 1000:.1f} ms |"
    )


async def main(sizes: list[int]) -> None:
    """Print the table."""
    print(f"load average before: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        toy = {"command": sys.executable, "args": ["-m", "tests.support.toy"], "cwd": str(REPO)}
        servers = {"toy": toy, "other": toy}
        config = parse_config(
            {"gateway": {"data_dir": tmp}, "servers": servers}, source="benchmark", base_dir=Path(tmp)
        )
        async with (
            Gateway(config) as gateway,
            Client(build_server(gateway)) as first,
            Client(build_server(gateway)) as second,
        ):
            await gateway.wait_for_upstreams(gateway.upstreams.values())
            # Warm both paths up, so that the quiet row measures the machine and not first calls.
            await second.call_tool("other__echo", {"text": "warm"})
            await first.call_tool("toy__big", {"size": 1000})
            print("| result size | outcome | call | loop CPU | longest gap | gaps over 20 ms | slowest echo |")
            print("|---|---|---|---|---|---|---|")
            for size in [None, *sizes]:
                print(await measure(first, second, size))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.large_results")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000_000, 20_000_000])
    anyio.run(main, parser.parse_args().sizes)
