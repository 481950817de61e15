"""Latency of a per-call sandboxed `run_python` through a real gateway, beside the sandbox alone.

Run: `.venv/bin/python -m benchmarks.sandbox_gateway [--runs 20] [--settle 1]` with Docker up and the
sandbox image built. It starts `python -m gateway serve` with the bundled `python` server (its
`run_python` sandboxed per call, warm pool of 2), calls it over streamable HTTP with the SDK client
(one session: its first call starts the session's pool), waits `--settle` seconds before each
timed call so that the pool has refilled, and prints p50/p90; then the same call on a
`DockerSandbox` warm pool in-process (what `benchmarks.sandbox_latency` calls "warm pool").

`--sessions N` measures instead the first sandboxed call of each of N new sessions: `files__write_file`
on the files server sandboxed per session (as in the default configuration), its second call beside
it, with session containers started ahead (`sandbox_session_warm: 1`) and without (`0`, each first
call starts its container), `--settle` seconds before each new session. With `--tool run_python`
the call is `python__run_python` instead (per call: the session's first call finds no pool for its
workspace), on a gateway with session containers started ahead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from benchmarks.gateway_latency import free_port, started, wait_until_ready
from gateway.sandbox import DEFAULT_IMAGE, DockerSandbox, SandboxLimits

REPO = Path(__file__).resolve().parents[1]
COMMAND = ["python3", "-m", "servers.python"]


def arguments(n: int) -> dict[str, str]:
    """`print(6 * 7)` with a comment of its own: the gateway refuses a session's repeated identical calls."""
    return {"code": f"print(6 * 7)  # {n}"}


TARGET_P50_MS = 100.0


def config(directory: Path, image: str, session_warm: int = 1) -> Path:
    """`python`, whose `run_python` runs per call in the sandbox, and `files`, sandboxed per session;
    low risk, so no confirmation."""
    path = directory / "gateway.yaml"
    path.write_text(
        "gateway:\n"
        f"  data_dir: {directory / 'data'}\n"
        f"  sandbox_image: {image}\n"
        "  sandbox_warm: 2\n"
        f"  sandbox_session_warm: {session_warm}\n"
        "servers:\n"
        "  files:\n"
        f"    command: {sys.executable}\n"
        "    args: [-m, servers.files, --root, '${WORKSPACE}']\n"
        f"    cwd: {REPO}\n"
        "    scope: session\n"
        "    risk: low\n"
        "    sandbox: {mode: per-session, command: [python3, -m, servers.files, --root, /workspace]}\n"
        "  python:\n"
        f"    command: {sys.executable}\n"
        "    args: [-m, servers.python]\n"
        f"    cwd: {REPO}\n"
        "    required: true\n"
        "    tools:\n"
        "      run_python:\n"
        "        risk: low\n"
        "        sandbox: {mode: per-call, command: [python3, -m, servers.python]}\n"
    )
    return path


def summary(name: str, samples: list[float]) -> str:
    """One line: p50 and p90 in milliseconds."""
    cuts = statistics.quantiles(samples, n=10)
    return f"{name:<28} p50 {statistics.median(samples):7.1f} ms   p90 {cuts[-1]:7.1f} ms   (n={len(samples)})"


async def through_gateway(url: str, runs: int, settle: float) -> list[float]:
    """Milliseconds of each timed call over one session, after one untimed call that starts its pool."""
    samples = []
    async with Client(url, mode="legacy") as client:
        first = await client.call_tool("python__run_python", arguments(-1))
        if first.is_error:
            raise SystemExit(f"run_python failed: {first.content}")
        for n in range(runs):
            await anyio.sleep(settle)
            begun = time.perf_counter()
            result = await client.call_tool("python__run_python", arguments(n))
            samples.append((time.perf_counter() - begun) * 1000)
            if result.is_error:
                raise SystemExit(f"run_python failed: {result.content}")
    return samples


def session_call(tool: str, n: int, attempt: int) -> tuple[str, dict[str, str]]:
    """The exposed name and the arguments of the `attempt`th call of `tool` in the `n`th session."""
    if tool == "run_python":
        return "python__run_python", arguments(2 * n + attempt)
    return "files__write_file", {"path": f"note-{n}-{attempt}.txt", "content": "buy milk\n"}


async def first_calls(url: str, sessions: int, settle: float, tool: str) -> tuple[list[float], list[float]]:
    """Milliseconds of the first and of the second sandboxed call of each of `sessions` new sessions."""
    first: list[float] = []
    second: list[float] = []
    for n in range(sessions):
        await anyio.sleep(settle)
        async with Client(url, mode="legacy") as client:
            for samples, attempt in ((first, 0), (second, 1)):
                name, call_arguments = session_call(tool, n, attempt)
                begun = time.perf_counter()
                result = await client.call_tool(name, call_arguments)
                samples.append((time.perf_counter() - begun) * 1000)
                if result.is_error:
                    raise SystemExit(f"{name} failed: {result.content}")
    return first, second


def measure_sessions(image: str, sessions: int, settle: float, tool: str) -> None:
    """Print the first and second call of new sessions, with session containers started ahead and
    without (`write_file`), or with them only (`run_python`)."""
    print(f"first {tool} of {sessions} new sessions, load average {os.getloadavg()[0]:.2f} before the run")
    for session_warm in (1, 0) if tool == "write_file" else (1,):
        with tempfile.TemporaryDirectory(prefix="sandbox-gateway-") as temp:
            directory = Path(temp)
            port = free_port()
            log = directory / "gateway.log"
            command = [sys.executable, "-m", "gateway", "--log-level", "warning", "serve"]
            command += ["--config", str(config(directory, image, session_warm)), "--port", str(port)]
            with started(command, log=log) as gateway:
                wait_until_ready(gateway, f"http://127.0.0.1:{port}/readyz", log)
                first, second = anyio.run(first_calls, f"http://127.0.0.1:{port}/mcp", sessions, settle, tool)
        print(summary(f"first call, ahead={session_warm}", first))
        print(summary(f"second call, ahead={session_warm}", second))
    print(f"load average {os.getloadavg()[0]:.2f} after the run")


async def sandbox_alone(image: str, runs: int, settle: float) -> list[float]:
    """The same call on a warm pool in this process, no gateway (as `benchmarks.sandbox_latency`)."""
    box = DockerSandbox(image, warm_size=2)
    limits = SandboxLimits()
    samples = []
    try:
        for n in range(runs):
            await box.prewarm(COMMAND, limits, None)
            await anyio.sleep(settle)
            begun = time.perf_counter()
            await box.call_per_call(COMMAND, "run_python", arguments(n), limits, None)
            samples.append((time.perf_counter() - begun) * 1000)
    finally:
        await box.close()
    return samples


def main() -> None:
    """Run both ways and print a line for each, with the load average before the run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sandbox_gateway", description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--settle", type=float, default=1.0, help="seconds for the pool to refill before a call")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--sessions", type=int, default=0, help="measure the first call of this many new sessions")
    parser.add_argument("--tool", choices=["write_file", "run_python"], default="write_file", help="with --sessions")
    args = parser.parse_args()
    if args.sessions:
        measure_sessions(args.image, args.sessions, args.settle, args.tool)
        return
    print(f"run_python per call, {args.runs} runs, load average {os.getloadavg()[0]:.2f} before the run")
    with tempfile.TemporaryDirectory(prefix="sandbox-gateway-") as temp:
        directory = Path(temp)
        port = free_port()
        log = directory / "gateway.log"
        command = [sys.executable, "-m", "gateway", "--log-level", "warning", "serve"]
        command += ["--config", str(config(directory, args.image)), "--port", str(port)]
        with started(command, log=log) as gateway:
            wait_until_ready(gateway, f"http://127.0.0.1:{port}/readyz", log)
            gateway_samples = anyio.run(through_gateway, f"http://127.0.0.1:{port}/mcp", args.runs, args.settle)
    alone = anyio.run(sandbox_alone, args.image, args.runs, args.settle)
    print(summary("through the gateway (HTTP)", gateway_samples))
    print(summary("sandbox alone (warm pool)", alone))
    p50 = statistics.median(gateway_samples)
    print(f"gateway p50 {p50:.1f} ms (target <= {TARGET_P50_MS:g} ms): {'met' if p50 <= TARGET_P50_MS else 'MISSED'}")


if __name__ == "__main__":
    main()
