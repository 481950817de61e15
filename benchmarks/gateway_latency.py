"""Latency and throughput of the echo tool called directly and through the gateway, side by side.

Run `python -m benchmarks.gateway_latency [--calls N] [--seconds S] [--mode 2026-07-28]` from the
repository root. Everything runs on loopback in subprocesses this script starts and stops:
(a) `servers.echo` served over streamable HTTP with JSON responses, called by the SDK client;
(b) `python -m gateway serve` with that echo server as its one stdio upstream, called the same way.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import anyio
from mcp import Client

REPO = Path(__file__).resolve().parents[1]
CONCURRENCY = 16
# The gateway's performance budget: what it may add per call, what share of throughput it must keep.
TARGET_ADDED_P50_MS = 1.5
TARGET_THROUGHPUT_SHARE = 0.5
WARMUP_CALLS = 50
# A bound on every wait for a process to come up or go away.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

ECHO_HTTP = (
    "import sys; from servers.echo import build_server; "
    "build_server().run('streamable-http', host='127.0.0.1', port=int(sys.argv[1]), json_response=True)"
)


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one path (direct or through the gateway) achieved."""

    p50_ms: float
    p99_ms: float
    calls_per_s: float
    server_cpu_ms: float
    upstream_cpu_ms: float | None
    client_cpu_ms: float


def free_port() -> int:
    """A loopback TCP port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process `pid` has used, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children_of(pid: int) -> list[int]:
    """The direct child processes of `pid` (the gateway's stdio upstreams)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


@contextmanager
def started(command: Sequence[str], *, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` in its own process group; stop it (and anything it started) on the way out."""
    with open(log, "wb") as output:
        process = subprocess.Popen(command, cwd=REPO, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
        # The gateway's stdio upstreams share its process group; none may outlive the run.
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def wait_until_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll `url` until it answers 2xx or 4xx (the MCP endpoint refuses a bare GET), at most START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the process serving {url} exited early; see {log}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except urllib.error.HTTPError as error:
            if error.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{url} did not become ready within {START_TIMEOUT:g} s; see {log}")


async def echo_tool(url: str, mode: str) -> str:
    """The exposed name of the one echo tool behind `url` (the gateway prefixes its server's name)."""
    async with Client(url, mode=mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
    if len(names) != 1:
        raise SystemExit(f"expected exactly one tool at {url}, found {names}")
    return names[0]


async def latency(url: str, mode: str, calls: int, tool: str) -> list[float]:
    """Seconds taken by each of `calls` sequential echo calls over one session, after a warm-up."""
    # Every call sends a different text: the gateway refuses a session's repeated identical calls as a loop.
    samples: list[float] = []
    async with Client(url, mode=mode) as client:
        for i in range(WARMUP_CALLS):
            await client.call_tool(tool, {"text": f"warm-up {i}"})
        for i in range(calls):
            started_at = time.perf_counter()
            result = await client.call_tool(tool, {"text": f"call {i}"})
            samples.append(time.perf_counter() - started_at)
            if result.is_error:
                raise SystemExit(f"echo failed: {result.content}")
    return samples


async def throughput(
    url: str, mode: str, seconds: float, tool: str, pids: Sequence[int]
) -> tuple[int, float, list[float], float]:
    """Calls done by CONCURRENCY sessions in `seconds`, the elapsed time, CPU seconds each pid used, and ours."""
    counts = [0] * CONCURRENCY
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, mode=mode)) for _ in range(CONCURRENCY)]

        # Texts differ across sessions too: in the 2026-07-28 era the gateway keys loop state on the caller.
        async def warm(index: int, client: Client) -> None:
            for i in range(WARMUP_CALLS // 5):
                await client.call_tool(tool, {"text": f"warm-up {index} {i}"})

        async with anyio.create_task_group() as group:
            for index, client in enumerate(clients):
                group.start_soon(warm, index, client)

        cpu_before = [cpu_seconds(pid) for pid in pids]
        client_before = time.process_time()
        started_at = time.perf_counter()
        deadline = started_at + seconds

        async def drive(index: int, client: Client) -> None:
            while time.perf_counter() < deadline:
                result = await client.call_tool(tool, {"text": f"session {index} call {counts[index]}"})
                if result.is_error:
                    raise SystemExit(f"echo failed: {result.content}")
                counts[index] += 1

        with anyio.fail_after(seconds + 30):
            async with anyio.create_task_group() as group:
                for index, client in enumerate(clients):
                    group.start_soon(drive, index, client)
        elapsed = time.perf_counter() - started_at
        cpu_used = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
        client_cpu = time.process_time() - client_before
    return sum(counts), elapsed, cpu_used, client_cpu


def percentile(samples: Sequence[float], share: float) -> float:
    """The `share` quantile of `samples` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(url: str, mode: str, calls: int, seconds: float, server: int, upstream: int | None) -> Measurement:
    """Latency at concurrency 1, then throughput at CONCURRENCY, against the MCP endpoint `url`."""
    tool = anyio.run(echo_tool, url, mode)
    samples = anyio.run(latency, url, mode, calls, tool)
    pids = [server] if upstream is None else [server, upstream]
    done, elapsed, cpu, client_cpu = anyio.run(throughput, url, mode, seconds, tool, pids)
    return Measurement(
        p50_ms=statistics.median(samples) * 1000,
        p99_ms=percentile(samples, 0.99) * 1000,
        calls_per_s=done / elapsed,
        server_cpu_ms=cpu[0] / done * 1000,
        upstream_cpu_ms=cpu[1] / done * 1000 if upstream is not None else None,
        client_cpu_ms=client_cpu / done * 1000,
    )


def gateway_config(directory: Path, json_responses: bool) -> Path:
    """A gateway config with one required stdio upstream, `echo`, writing its data under `directory`."""
    path = directory / "gateway.yaml"
    path.write_text(
        "gateway:\n"
        f"  data_dir: {directory / 'data'}\n"
        f"  http_json_responses: {'true' if json_responses else 'false'}\n"
        "servers:\n"
        "  echo:\n"
        f"    command: {sys.executable}\n"
        "    args: [-m, servers.echo]\n"
        f"    cwd: {REPO}\n"
        # Required, so that `/readyz` answers 200 only once its tool is listed.
        "    required: true\n"
    )
    return path


def run(calls: int, seconds: float, mode: str, json_responses: bool) -> tuple[Measurement, Measurement]:
    """Measure the direct path, then the gateway path; every process is stopped before this returns."""
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as temp, ExitStack() as stack:
        directory = Path(temp)
        port = free_port()
        log = directory / "echo.log"
        echo = stack.enter_context(started([sys.executable, "-c", ECHO_HTTP, str(port)], log=log))
        wait_until_ready(echo, f"http://127.0.0.1:{port}/mcp", log)
        direct = measure(f"http://127.0.0.1:{port}/mcp", mode, calls, seconds, echo.pid, None)
        stack.close()

        port = free_port()
        log = directory / "gateway.log"
        command = [sys.executable, "-m", "gateway", "--log-level", "warning", "serve"]
        command += ["--config", str(gateway_config(directory, json_responses)), "--port", str(port)]
        gateway = stack.enter_context(started(command, log=log))
        wait_until_ready(gateway, f"http://127.0.0.1:{port}/readyz", log)
        upstreams = children_of(gateway.pid)
        if len(upstreams) != 1:
            raise SystemExit(f"expected one upstream process under the gateway, found {upstreams}")
        through = measure(f"http://127.0.0.1:{port}/mcp", mode, calls, seconds, gateway.pid, upstreams[0])
    return direct, through


def report(direct: Measurement, through: Measurement, mode: str, calls: int, seconds: float, load: float) -> str:
    """The side-by-side table and the verdict against the targets."""
    added = through.p50_ms - direct.p50_ms
    share = through.calls_per_s / direct.calls_per_s
    rows = [
        f"echo tool, mode={mode}, {calls} sequential calls, {CONCURRENCY} sessions for {seconds:g} s, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {load:.2f} before the run",
        "",
        f"{'path':<10} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>9} {'server CPU':>11} {'upstream CPU':>13} "
        f"{'client CPU':>11}",
    ]
    for name, m in (("direct", direct), ("gateway", through)):
        upstream = f"{m.upstream_cpu_ms:.2f} ms" if m.upstream_cpu_ms is not None else "-"
        rows.append(
            f"{name:<10} {m.p50_ms:>8.2f} {m.p99_ms:>8.2f} {m.calls_per_s:>9.0f} {m.server_cpu_ms:>8.2f} ms "
            f"{upstream:>13} {m.client_cpu_ms:>8.2f} ms"
        )
    rows += [
        "(CPU columns: CPU time per call during the throughput run; server = echo server or gateway process)",
        "",
        f"gateway adds {added:.2f} ms at p50 (target <= {TARGET_ADDED_P50_MS} ms): "
        f"{'met' if added <= TARGET_ADDED_P50_MS else 'MISSED'}",
        f"gateway keeps {share:.0%} of direct throughput (target >= {TARGET_THROUGHPUT_SHARE:.0%}): "
        f"{'met' if share >= TARGET_THROUGHPUT_SHARE else 'MISSED'}",
        f"gateway process CPU per call: {through.server_cpu_ms:.2f} ms",
    ]
    return "\n".join(rows)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, run both paths and print the comparison."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway_latency", description=__doc__)
    parser.add_argument("--calls", type=int, default=1000, help="sequential calls timed for latency (default 1000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the throughput run (default 5)")
    parser.add_argument(
        "--mode", default="legacy", choices=["legacy", "2026-07-28"], help="protocol era the client speaks"
    )
    parser.add_argument(
        "--json-responses",
        action="store_true",
        help="run the gateway with http_json_responses: true (one JSON body per request, as the direct server)",
    )
    args = parser.parse_args(argv)
    if args.calls < 1 or not 0 < args.seconds <= 600:
        parser.error("--calls must be at least 1 and --seconds between 0 and 600")
    # A SIGTERM unwinds like Ctrl-C, so the subprocesses are stopped on the way out either way.
    signal.signal(signal.SIGTERM, _interrupt)
    # Other work on the machine shares the CPUs with all three processes; the reader should know.
    load = os.getloadavg()[0]
    try:
        direct, through = run(args.calls, args.seconds, args.mode, args.json_responses)
    except KeyboardInterrupt:
        print("interrupted; every process the benchmark started has been stopped", file=sys.stderr)
        raise SystemExit(130) from None
    responses = "JSON bodies" if args.json_responses else "event streams"
    print(f"gateway answers with {responses}")
    print(report(direct, through, args.mode, args.calls, args.seconds, load))


if __name__ == "__main__":
    main()
