"""Latency, throughput and CPU per call of the echo tool called directly, through the gateway and
through its peers, side by side in one run.

Run `python -m benchmarks.gateway_latency [--calls N] [--seconds S] [--rounds R] [--mode 2026-07-28]
[--tracing] [--against CHECKOUT]` from the repository root. Everything runs on loopback in
subprocesses this script starts and stops, each serving the same echo server and called by the
SDK client over streamable HTTP:
(a) direct: `servers.echo` served over streamable HTTP with JSON responses;
(b) mcp-proxy and FastMCP's proxy (`benchmarks.peers`: pinned, installed into environments of
their own on first use), each with that echo server as its stdio backend;
(c) `python -m gateway serve` in its default configuration with that echo server as its one stdio upstream;
(d) in the handshake era, the relay of `benchmarks.floors`: that echo server behind a bare ASGI app on
uvicorn that only relays each request over the pipe, the floor of any gateway on this stack;
(e) with `--tracing`, the gateway of (c) with a `tracing` section, every call's spans exported to an
OTLP/HTTP receiver this script runs (`tests/support/otlp.py`);
(f) with `--against CHECKOUT` (repeatable), the gateway of (c) as another checkout of this repository
has it, to compare two trees in the same rounds.
Every contender is measured once it has settled: ready, and its start-up work done (the gateway
loads Find_Tools' model in the background once it is ready).
Each round waits for a load average below 1.5 (at most `--quiet-timeout` s, then goes on and says
so with the load it started at); the report gives the median and range over the rounds.
"""

from __future__ import annotations

import argparse
import functools
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import anyio
import yaml
from mcp import Client

from benchmarks import peers

REPO = Path(__file__).resolve().parents[1]
CONCURRENCY = 16
# The gateway's targets (issue 15): what it may add per call, what share of direct throughput it must
# keep, how much CPU its process may spend per call; and the load average a round waits for.
TARGET_ADDED_P50_MS = 1.0
TARGET_THROUGHPUT_SHARE = 0.7
TARGET_CPU_MS = 0.8
QUIET_LOAD = 1.5
WARMUP_CALLS = 50
# A bound on every wait for a process to come up or go away.
START_TIMEOUT = 30.0
# A process has settled once it spends under SETTLE_SHARE of a core over SETTLE_STEPS samples
# SETTLE_STEP s apart (one second), at most SETTLE_TIMEOUT s after it is ready.
SETTLE_SHARE = 0.05
SETTLE_STEP = 0.25
SETTLE_STEPS = 5
SETTLE_TIMEOUT = 60.0
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

    @property
    def path_cpu_ms(self) -> float:
        """CPU per call of every process on the call's path: client, serving process, stdio upstream."""
        return self.client_cpu_ms + self.server_cpu_ms + (self.upstream_cpu_ms or 0.0)


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds used during a throughput run: by the serving process, the stdio upstreams below
    it (None: it has none), and the benchmark's client."""

    server: float
    upstream: float | None
    client: float


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


def upstream_pids(server: int) -> list[int]:
    """The echo server processes below `server` (a gateway's under their watchers), found through /proc:
    those whose own program is `python -m servers.echo` (a watcher names it among its arguments)."""
    found: list[int] = []
    pending = [server]
    while pending:
        for child in children_of(pending.pop()):
            pending.append(child)
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[1:3] == [b"-m", b"servers.echo"]:
                found.append(child)
    return found


@contextmanager
def started(
    command: Sequence[str], *, log: Path, env: Mapping[str, str] | None = None, cwd: Path = REPO
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` (with `env`, else this environment) in `cwd` in its own process group; stop it
    (and anything it started) on the way out."""
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
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


def settle(pid: int, timeout: float = SETTLE_TIMEOUT) -> float:
    """Wait until the ready process `pid` has finished its start-up work in the background (the
    gateway loads Find_Tools' model and builds its index once ready): until it spends under
    SETTLE_SHARE of a core over a second, at most `timeout` s. The seconds waited."""
    started_at = time.monotonic()
    window = [cpu_seconds(pid)]
    while time.monotonic() - started_at < timeout:
        time.sleep(SETTLE_STEP)
        window = [*window[-(SETTLE_STEPS - 1) :], cpu_seconds(pid)]
        if len(window) == SETTLE_STEPS and window[-1] - window[0] < SETTLE_SHARE * SETTLE_STEP * (SETTLE_STEPS - 1):
            break
    return time.monotonic() - started_at


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


async def throughput(url: str, mode: str, seconds: float, tool: str, server: int) -> tuple[int, float, Cpu]:
    """Calls done by CONCURRENCY sessions in `seconds`, the elapsed time, and the CPU seconds used
    meanwhile by the serving process, by the stdio echo servers below it and by this client."""
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

        # Found once every session is open: a peer may start an upstream per session.
        upstreams = upstream_pids(server)
        pids = [server, *upstreams]
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
    return sum(counts), elapsed, Cpu(cpu_used[0], sum(cpu_used[1:]) if upstreams else None, client_cpu)


def percentile(samples: Sequence[float], share: float) -> float:
    """The `share` quantile of `samples` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(url: str, mode: str, calls: int, seconds: float, server: int) -> Measurement:
    """Latency at concurrency 1, then throughput at CONCURRENCY, against the MCP endpoint `url`
    served by process `server`."""
    tool = anyio.run(echo_tool, url, mode)
    samples = anyio.run(latency, url, mode, calls, tool)
    done, elapsed, cpu = anyio.run(throughput, url, mode, seconds, tool, server)
    return Measurement(
        p50_ms=statistics.median(samples) * 1000,
        p99_ms=percentile(samples, 0.99) * 1000,
        calls_per_s=done / elapsed,
        server_cpu_ms=cpu.server / done * 1000,
        upstream_cpu_ms=None if cpu.upstream is None else cpu.upstream / done * 1000,
        client_cpu_ms=cpu.client / done * 1000,
    )


def gateway_config(directory: Path, traces: str | None = None, **settings: object) -> Path:
    """A gateway config with one required stdio upstream, `echo`, its data under `directory`,
    `settings` in its `gateway` section, and a `tracing` section exporting to `traces` when given."""
    path = directory / "gateway.yaml"
    echo = {"command": sys.executable, "args": ["-m", "servers.echo"], "cwd": str(REPO)}
    # Required, so that `/readyz` answers 200 only once its tool is listed.
    document: dict[str, object] = {
        "gateway": {"data_dir": str(directory / "data"), **settings},
        "servers": {"echo": {**echo, "required": True}},
    }
    if traces is not None:
        document["tracing"] = {"endpoint": traces}
    path.write_text(yaml.safe_dump(document))
    return path


@dataclass(frozen=True, slots=True)
class Contender:
    """One way to serve the echo tool: its name, the command serving it at a port, and the path
    that answers once it is ready."""

    name: str
    command: Callable[[int, Path], list[str]]
    ready_path: str = "/mcp"
    cwd: Path = REPO


def contenders(
    json_responses: bool, mode: str, with_peers: bool, traces: str | None = None, trees: Sequence[Path] = ()
) -> list[Contender]:
    """Direct first (every ratio is to it), the relay (the floor, handshake era only), then the peers
    that speak `mode`, then the gateway, and with `traces` (an OTLP/HTTP receiver's URL) the gateway
    exporting every span there."""

    def direct(port: int, directory: Path) -> list[str]:
        return [sys.executable, "-c", ECHO_HTTP, str(port)]

    def gateway(port: int, directory: Path, traces: str | None = None) -> list[str]:
        # The default configuration: the default log level (INFO) and response mode.
        command = [
            sys.executable,
            "-m",
            "gateway",
            "serve",
            "--config",
            str(gateway_config(directory, traces, http_json_responses=json_responses)),
        ]
        return [*command, "--port", str(port)]

    def relay(port: int, directory: Path) -> list[str]:
        return [sys.executable, "-m", "benchmarks.floors", "relay", str(port)]

    chosen = [Contender("direct", direct)]
    if mode == "legacy":
        chosen.append(Contender("relay", relay))
    if with_peers:
        for peer in peers.PEERS:
            if mode == "legacy" or peer.modern:
                environment = peers.ensure(peer)
                chosen.append(Contender(peer.name, functools.partial(_peer_command, peer, environment)))
    chosen.append(Contender("gateway", gateway, "/readyz"))
    if traces is not None:
        chosen.append(Contender("traced", functools.partial(gateway, traces=traces), "/readyz"))
    # Another checkout's gateway (`python -m gateway` run in it), with the same configuration.
    chosen += [Contender(f"gateway@{tree.name}", gateway, "/readyz", tree) for tree in trees]
    return chosen


def _peer_command(peer: peers.Peer, environment: Path, port: int, directory: Path) -> list[str]:
    return peer.command(environment, port, REPO)


def run_one(contender: Contender, calls: int, seconds: float, mode: str, directory: Path) -> Measurement:
    """Start one contender, measure it, stop it (and whatever it started)."""
    port = free_port()
    log = directory / f"{contender.name}.log"
    with started(contender.command(port, directory), log=log, cwd=contender.cwd) as process:
        wait_until_ready(process, f"http://127.0.0.1:{port}{contender.ready_path}", log)
        settle(process.pid)
        return measure(f"http://127.0.0.1:{port}/mcp", mode, calls, seconds, process.pid)


def wait_for_quiet(threshold: float, timeout: float) -> float:
    """Wait until the 1-minute load average is below `threshold`, at most `timeout` s; the load then."""
    deadline = time.monotonic() + timeout
    load = os.getloadavg()[0]
    while load >= threshold and time.monotonic() < deadline:
        time.sleep(5)
        load = os.getloadavg()[0]
    return load


def rounds(
    chosen: Sequence[Contender], count: int, calls: int, seconds: float, mode: str, quiet: tuple[float, float]
) -> tuple[dict[str, list[Measurement]], list[float]]:
    """`count` rounds, each started once the machine is quiet, the contenders in a rotated order."""
    results: dict[str, list[Measurement]] = {contender.name: [] for contender in chosen}
    loads = []
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as temp:
        for index in range(count):
            loads.append(wait_for_quiet(*quiet))
            print(f"round {index + 1} of {count}, load average {loads[-1]:.2f}", file=sys.stderr)
            order = [*chosen[index % len(chosen) :], *chosen[: index % len(chosen)]]
            for contender in order:
                directory = Path(temp) / f"{contender.name}-{index}"
                directory.mkdir()
                results[contender.name].append(run_one(contender, calls, seconds, mode, directory))
    return results, loads


def spread(values: Sequence[float], form: str, unit: str = "") -> str:
    """`median<unit> [min-max]` of `values`, each formatted with `form`."""
    low, high = format(min(values), form), format(max(values), form)
    return f"{format(statistics.median(values), form)}{unit} [{low}-{high}]"


def report(results: dict[str, list[Measurement]], loads: Sequence[float], mode: str, calls: int, seconds: float) -> str:
    """Each figure per contender (median [range] over rounds) beside its ratio to direct and the target."""
    direct = results["direct"]
    rows = [
        f"echo tool, mode={mode}, {calls} sequential calls, {CONCURRENCY} sessions for {seconds:g} s, "
        f"{len(direct)} rounds, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}",
        f"load average at the start of each round: {', '.join(f'{load:.2f}' for load in loads)}",
        "each figure: median [min-max] over the rounds; ratios are taken round by round against direct",
        "",
        f"{'path':<10} {'p50 ms':>20} {'added p50 ms':>20} {'calls/s':>16} {'share of direct':>20} "
        f"{'server CPU ms/call':>20} {'CPU / direct':>18}",
    ]
    figures: dict[str, tuple[float, float, float]] = {}
    for name, runs in results.items():
        added_by_round = [m.p50_ms - d.p50_ms for m, d in zip(runs, direct, strict=True)]
        share_by_round = [m.calls_per_s / d.calls_per_s for m, d in zip(runs, direct, strict=True)]
        cpu_by_round = [m.server_cpu_ms / d.server_cpu_ms for m, d in zip(runs, direct, strict=True)]
        own_cpu = statistics.median(r.server_cpu_ms for r in runs)
        figures[name] = (statistics.median(added_by_round), statistics.median(share_by_round), own_cpu)
        rows.append(
            f"{name:<10} {spread([r.p50_ms for r in runs], '.2f'):>20} "
            f"{'-' if name == 'direct' else spread(added_by_round, '+.2f'):>20} "
            f"{spread([r.calls_per_s for r in runs], '.0f'):>16} "
            f"{'-' if name == 'direct' else spread(share_by_round, '.0%'):>20} "
            f"{spread([r.server_cpu_ms for r in runs], '.2f'):>20} {spread(cpu_by_round, '.2f'):>18}"
        )
    added, share, cpu = figures["gateway"]
    rows += [
        "(server CPU: CPU time per call of the serving process alone, its stdio upstream not counted)",
        "",
        "CPU per call of each process on the call's path in the throughput run; with every core busy,",
        "a path's share of direct throughput tends to direct's path CPU over its own (CPU-bound share)",
        f"{'path':<10} {'client ms':>18} {'server ms':>18} {'stdio upstream ms':>18} {'path ms':>18} "
        f"{'CPU-bound share':>18}",
    ]
    for name, runs in results.items():
        bound = [d.path_cpu_ms / m.path_cpu_ms for m, d in zip(runs, direct, strict=True)]
        upstream = [r.upstream_cpu_ms for r in runs if r.upstream_cpu_ms is not None]
        rows.append(
            f"{name:<10} {spread([r.client_cpu_ms for r in runs], '.2f'):>18} "
            f"{spread([r.server_cpu_ms for r in runs], '.2f'):>18} "
            f"{spread(upstream, '.2f') if upstream else '-':>18} "
            f"{spread([r.path_cpu_ms for r in runs], '.2f'):>18} "
            f"{'-' if name == 'direct' else spread(bound, '.0%'):>18}"
        )
    rows += [
        "",
        f"gateway adds {added:+.2f} ms at p50 (target <= {TARGET_ADDED_P50_MS} ms): "
        f"{'met' if added <= TARGET_ADDED_P50_MS else 'MISSED'}",
        f"gateway keeps {share:.0%} of direct throughput (target >= {TARGET_THROUGHPUT_SHARE:.0%}): "
        f"{'met' if share >= TARGET_THROUGHPUT_SHARE else 'MISSED'}",
        f"gateway CPU per call {cpu:.2f} ms (target <= {TARGET_CPU_MS} ms): "
        f"{'met' if cpu <= TARGET_CPU_MS else 'MISSED'}",
    ]
    if "traced" in figures:
        traced_added, _, traced_cpu = figures["traced"]
        rows.append(
            f"tracing every call costs the gateway {traced_cpu - cpu:+.3f} ms of CPU a call (its export thread "
            f"included) and {traced_added - added:+.3f} ms at p50"
        )
    if "relay" in figures:
        floor_added, floor_share, floor_cpu = figures["relay"]
        rows.append(
            f"the relay, the floor of a gateway on uvicorn with one stdio hop, adds {floor_added:+.2f} ms and keeps "
            f"{floor_share:.0%} at {floor_cpu:.2f} ms of CPU a call; the gateway adds {added - floor_added:+.2f} ms "
            f"to it"
        )
    if "mcp-proxy" in figures:
        peer_added, peer_share, peer_cpu = figures["mcp-proxy"]
        ahead = added < peer_added and share > peer_share and cpu < peer_cpu
        rows.append(
            f"ahead of mcp-proxy on all three (it: {peer_added:+.2f} ms, {peer_share:.0%}, {peer_cpu:.2f} ms): "
            f"{'met' if ahead else 'MISSED'}"
        )
    return "\n".join(rows)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, run every contender in each round and print the comparison."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway_latency", description=__doc__)
    parser.add_argument("--calls", type=int, default=1000, help="sequential calls timed for latency (default 1000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the throughput run (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every contender (default 3)")
    parser.add_argument(
        "--mode", default="legacy", choices=["legacy", "2026-07-28"], help="protocol era the client speaks"
    )
    parser.add_argument(
        "--json-responses",
        action="store_true",
        help="run the gateway with http_json_responses: true (one JSON body per request, as the direct server)",
    )
    parser.add_argument("--no-peers", action="store_true", help="only direct, the relay and the gateway")
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="also run the gateway exporting a trace of every call to an OTLP receiver in this process ('traced')",
    )
    parser.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        metavar="CHECKOUT",
        help="also run the gateway of another checkout of this repository, as 'gateway@<its directory name>'",
    )
    parser.add_argument(
        "--quiet-timeout",
        type=float,
        default=600.0,
        help=f"seconds to wait for a load average below {QUIET_LOAD} before each round (default 600)",
    )
    args = parser.parse_args(argv)
    if args.calls < 1 or not 0 < args.seconds <= 600 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1 and --seconds between 0 and 600")
    # A SIGTERM unwinds like Ctrl-C, so the subprocesses are stopped on the way out either way.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with ExitStack() as stack:
            traces = None
            if args.tracing:
                # OpenTelemetry's protobuf classes load only for a run that traces.
                from tests.support.otlp import otlp_receiver

                traces = stack.enter_context(otlp_receiver()).url
            chosen = contenders(args.json_responses, args.mode, not args.no_peers, traces, args.against)
            quiet = (QUIET_LOAD, args.quiet_timeout)
            results, loads = rounds(chosen, args.rounds, args.calls, args.seconds, args.mode, quiet)
    except KeyboardInterrupt:
        print("interrupted; every process the benchmark started has been stopped", file=sys.stderr)
        raise SystemExit(130) from None
    responses = "JSON bodies" if args.json_responses else "its default response mode"
    print(f"gateway answers with {responses}, at its default log level")
    print(report(results, loads, args.mode, args.calls, args.seconds))


if __name__ == "__main__":
    main()
