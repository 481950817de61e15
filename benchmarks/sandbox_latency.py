"""Latency of one sandboxed MCP tool call: cold container, warm pool, and `docker run --rm` as reference.

Run: `.venv/bin/python benchmarks/sandbox_latency.py [--runs 15] [--tool python|echo]` with Docker up and
the sandbox image built (`bash .ci/docker.sh`). Prints the p50 and p90 of each way, in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.sandbox import DEFAULT_IMAGE, DockerSandbox, SandboxLimits

TOOLS = {
    "python": (["python3", "-m", "servers.python"], "run_python", {"code": "print(6 * 7)"}),
    "echo": (["python3", "-m", "servers.echo"], "echo", {"text": "42"}),
}


async def timed(runs: int, call: Callable[[], Awaitable[object]], before: Callable[[], Awaitable[None]]) -> list[float]:
    """Milliseconds of `call` over `runs` runs, `before` (untimed) ahead of each."""
    samples = []
    for _ in range(runs):
        await before()
        started = time.perf_counter()
        with anyio.fail_after(60):
            await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def summary(name: str, samples: list[float]) -> str:
    """One line: p50 and p90 in milliseconds."""
    cuts = statistics.quantiles(samples, n=10)
    return f"{name:<22} p50 {statistics.median(samples):7.0f} ms   p90 {cuts[-1]:7.0f} ms   (n={len(samples)})"


async def main() -> None:
    """Measure the three ways one after the other and print a line for each."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tool", choices=sorted(TOOLS), default="python")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    # Time for a warm container's server to finish its imports before the next request arrives,
    # as it would between requests in a running gateway; a loaded host needs more.
    parser.add_argument("--settle", type=float, default=1.0, help="seconds between refill and call")
    args = parser.parse_args()
    command, tool, arguments = TOOLS[args.tool]
    limits = SandboxLimits()

    async def nothing() -> None:
        return None

    cold_box = DockerSandbox(args.image, warm_size=0)
    warm_box = DockerSandbox(args.image, warm_size=2)
    try:
        ok, reason = cold_box.available()
        if not ok:
            raise SystemExit(reason)

        async def cold() -> object:
            return await cold_box.call_per_call(command, tool, arguments, limits, None)

        async def warm() -> object:
            return await warm_box.call_per_call(command, tool, arguments, limits, None)

        async def refill() -> None:
            await warm_box.prewarm(command, limits, None)
            await anyio.sleep(args.settle)

        docker_run = StdioServerParameters(
            command="docker", args=["run", "--rm", "-i", "--network", "none", args.image, *command]
        )

        async def reference() -> object:
            async with Client(docker_run) as client:
                return await client.call_tool(tool, arguments)

        print(f"tool {tool} via `{' '.join(command)}` in {args.image}, {args.runs} runs each")
        print(summary("cold container", await timed(args.runs, cold, nothing)))
        print(summary("warm pool", await timed(args.runs, warm, refill)))
        print(summary("docker run --rm (CLI)", await timed(args.runs, reference, nothing)))
    finally:
        await cold_box.close()
        await warm_box.close()


if __name__ == "__main__":
    anyio.run(main)
