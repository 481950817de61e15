"""Each of the gateway's performance bypasses of the `mcp` SDK, measured alone: the gateway as it is
beside the gateway with one bypass replaced by the SDK's own public path, in the same rounds.

Run `python -m benchmarks.bypasses [--rounds 5] [--calls 1000] [--seconds 5] [--listings 40]` from the
repository root. Each variant is `python -m gateway serve` in its default configuration with two
stdio upstreams, the echo server and a server of `--tools` tools; a variant without a bypass is
built in the serving process by the benchmark alone (the product has no switch for it):

- `kept`: the gateway as it is;
- `no-hot-path`: `tools/call` and `tools/list` answered with JSON take the SDK's dispatcher and streams
  (the hot path of `gateway.frontdoors.responsemode` off);
- `sdk-streams`: every handshake-era request answered with an event stream, as the SDK's transport
  answers when JSON responses are off (the per-request response mode off, and the hot path with it);
- `no-edge-lane`: a known session's POST takes the SDK's body limit, era routing and session look-up
  before its transport (`LimitedSessionManager.serve`'s lane off);
- `no-direct-calls`: every `tools/call` to a stdio upstream through the SDK's client session
  (`gateway.upstreams.directcalls` off).

Per variant and round: the p50 of `--calls` sequential echo calls over one session, calls/s at 16
sessions for `--seconds` and the serving process's CPU per call then (from /proc), and the p50 and
the serving process's CPU of a full `tools/list` (every page, raw JSON-RPC) `--listings` times. The
variants run in a rotated order each round; the report gives each figure's median and range over the
rounds, then each bypass's gain alone, taken round by round: what taking it out costs (the hot path,
the edge lane and direct calls against `kept`, the response mode as `sdk-streams` against `no-hot-path`).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import anyio
import httpx2

from benchmarks.catalog_scale import RawSession, upstream_command
from benchmarks.gateway_latency import (
    REPO,
    cpu_seconds,
    free_port,
    latency,
    settle,
    started,
    throughput,
    wait_for_quiet,
    wait_until_ready,
)

ECHO_TOOL = "echo__echo"
START_TIMEOUT = 120.0
QUIET_LOAD = 1.5

# What the serving process runs before `gateway serve`: the SDK's packages stood in for first, as
# `python -m gateway` does, then the variant's replacement of one bypass, which asserts that the
# name it replaces is there (a renamed one would otherwise leave the bypass in place, unsaid).
PRELUDE = "import sys\nfrom gateway.runtime import lazysdk\nlazysdk.install()\n"
SERVE = "from gateway.cli.main import main\nmain(sys.argv[1:])\n"
VARIANTS: dict[str, str] = {
    "kept": "",
    "no-hot-path": (
        "import gateway.frontdoors.httpsessions as sessions\n"
        "assert sessions.HotPath\n"
        "sessions.HotPath = lambda *args: None\n"
    ),
    "sdk-streams": (
        "import gateway.frontdoors.httpsessions as sessions\n"
        "from mcp.server.streamable_http import StreamableHTTPServerTransport\n"
        "class SdkTransport(StreamableHTTPServerTransport):\n"
        "    def __init__(self, *args, hot=None, **options):\n"
        "        super().__init__(*args, **options)\n"
        "assert sessions.ResponseModeTransport\n"
        "sessions.ResponseModeTransport = SdkTransport\n"
    ),
    "no-edge-lane": (
        "import gateway.frontdoors.httpsessions as sessions\n"
        "assert sessions.LimitedSessionManager._known\n"
        "sessions.LimitedSessionManager._known = lambda self, scope: None\n"
    ),
    "no-direct-calls": (
        "import gateway.upstreams.connection as connection\n"
        "class Closed(connection.DirectCalls):\n"
        "    def attach(self, send):\n"
        "        pass\n"
        "connection.DirectCalls = Closed\n"
    ),
}


@dataclass(frozen=True, slots=True)
class Figures:
    """What one variant achieved in one round."""

    call_p50_ms: float
    calls_per_s: float
    call_cpu_ms: float
    list_p50_ms: float
    list_cpu_ms: float


def config(directory: Path, tools: int) -> Path:
    """The gateway's config: the echo server and a server of `tools` tools, both required (so
    `/readyz` answers once both are listed), its data under `directory`."""
    catalog = upstream_command("catalog")
    catalog[-1] = str(tools)
    servers = {
        "echo": {"command": sys.executable, "args": ["-m", "servers.echo"], "cwd": str(REPO), "required": True},
        "catalog": {"command": catalog[0], "args": catalog[1:], "cwd": str(REPO), "required": True},
    }
    path = directory / "gateway.json"
    # A busy machine's slow start of the catalog server must not fail a required server.
    settings = {"data_dir": str(directory / "data"), "upstream_connect_timeout": START_TIMEOUT}
    path.write_text(json.dumps({"gateway": settings, "servers": servers}))
    return path


async def listings(url: str, count: int, pid: int) -> tuple[float, float]:
    """p50 ms of a full raw `tools/list` and the serving process's CPU ms per listing, over `count`."""
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
        raw = RawSession(http, url)
        await raw.open()
        await raw.catalog_size()
        samples = []
        before = cpu_seconds(pid)
        for _ in range(count):
            began = time.perf_counter()
            await raw.catalog_size()
            samples.append(time.perf_counter() - began)
        cpu = cpu_seconds(pid) - before
    return statistics.median(samples) * 1000, cpu / count * 1000


def run_variant(name: str, directory: Path, args: argparse.Namespace) -> Figures:
    """Serve the gateway as variant `name`, measure it, stop it."""
    port = free_port()
    command = [sys.executable, "-c", PRELUDE + VARIANTS[name] + SERVE, "serve"]
    command += ["--config", str(config(directory, args.tools)), "--port", str(port)]
    log = directory / "gateway.log"
    url = f"http://127.0.0.1:{port}/mcp"
    with started(command, log=log) as process:
        try:
            wait_until_ready(process, f"http://127.0.0.1:{port}/readyz", log)
            settle(process.pid)
        except SystemExit:
            print(log.read_text()[-4000:], file=sys.stderr)
            raise
        samples = anyio.run(latency, url, "legacy", args.calls, ECHO_TOOL)
        done, elapsed, cpu = anyio.run(throughput, url, "legacy", args.seconds, ECHO_TOOL, process.pid)
        list_p50, list_cpu = anyio.run(listings, url, args.listings, process.pid)
    return Figures(
        call_p50_ms=statistics.median(samples) * 1000,
        calls_per_s=done / elapsed,
        call_cpu_ms=cpu.server / done * 1000,
        list_p50_ms=list_p50,
        list_cpu_ms=list_cpu,
    )


def spread(values: Sequence[float], form: str) -> str:
    """`median [min-max]` of `values`, each formatted with `form`."""
    return f"{format(statistics.median(values), form)} [{format(min(values), form)}-{format(max(values), form)}]"


def report(results: dict[str, list[Figures]], loads: Sequence[float], args: argparse.Namespace) -> str:
    """Each variant's figures, then its difference to `kept`, round by round."""
    fields = [
        ("call p50 ms", "call_p50_ms", ".3f", "+.3f"),
        ("calls/s at 16", "calls_per_s", ".0f", "+.0f"),
        ("CPU ms/call", "call_cpu_ms", ".3f", "+.3f"),
        ("list p50 ms", "list_p50_ms", ".2f", "+.2f"),
        ("CPU ms/list", "list_cpu_ms", ".2f", "+.2f"),
    ]
    rows = [
        f"echo calls: {args.calls} sequential, 16 sessions for {args.seconds:g} s; full tools/list of "
        f"{args.tools + 1} tools x {args.listings}; {len(loads)} rounds",
        f"load average at the start of each round: {', '.join(f'{load:.2f}' for load in loads)}",
        "each figure: median [min-max] over the rounds",
        "",
        f"{'variant':<16}" + "".join(f"{title:>24}" for title, *_ in fields),
    ]
    for name, runs in results.items():
        rows.append(
            f"{name:<16}"
            + "".join(f"{spread([getattr(r, key) for r in runs], form):>24}" for _, key, form, _ in fields)
        )
    rows += ["", "what each bypass saves: the variant without it minus the one with it, round by round", ""]
    rows.append(f"{'bypass':<16}" + "".join(f"{title:>24}" for title, *_ in fields))
    # Each bypass alone: the event streams' cost is measured with the hot path already off.
    pairs = [("hot path", "no-hot-path", "kept"), ("response mode", "sdk-streams", "no-hot-path")]
    pairs.append(("direct calls", "no-direct-calls", "kept"))
    pairs.append(("edge lane", "no-edge-lane", "kept"))
    for bypass, without, with_it in pairs:
        if without not in results or with_it not in results:
            continue
        cells = []
        for _, key, _, signed in fields:
            pairs_of_runs = zip(results[without], results[with_it], strict=True)
            cells.append(f"{spread([getattr(a, key) - getattr(b, key) for a, b in pairs_of_runs], signed):>24}")
        rows.append(f"{bypass:<16}" + "".join(cells))
    return "\n".join(rows)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, run every variant in each round and print the comparison."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bypasses", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every variant (default 5)")
    parser.add_argument("--calls", type=int, default=1000, help="sequential calls timed for latency (default 1000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the throughput run (default 5)")
    parser.add_argument("--listings", type=int, default=40, help="full listings timed (default 40)")
    parser.add_argument("--tools", type=int, default=500, help="tools of the catalog server (default 500)")
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="the variants to run (kept always)",
    )
    parser.add_argument(
        "--quiet-timeout",
        type=float,
        default=120.0,
        help=f"seconds to wait for a load average below {QUIET_LOAD} before each round (default 120)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1 or args.listings < 1 or not 0 < args.seconds <= 600:
        parser.error("--rounds, --calls and --listings must be at least 1 and --seconds between 0 and 600")
    chosen = ["kept", *(name for name in args.variants if name != "kept")]
    signal.signal(signal.SIGTERM, _interrupt)
    results: dict[str, list[Figures]] = {name: [] for name in chosen}
    loads: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="gateway-bypasses-") as temp:
            for index in range(args.rounds):
                loads.append(wait_for_quiet(QUIET_LOAD, args.quiet_timeout))
                print(f"round {index + 1} of {args.rounds}, load average {loads[-1]:.2f}", file=sys.stderr)
                order = [*chosen[index % len(chosen) :], *chosen[: index % len(chosen)]]
                for name in order:
                    directory = Path(temp) / f"{name}-{index}"
                    directory.mkdir()
                    results[name].append(run_variant(name, directory, args))
    except KeyboardInterrupt:
        print("interrupted; every process the benchmark started has been stopped", file=sys.stderr)
        raise SystemExit(130) from None
    print(report(results, loads, args))


if __name__ == "__main__":
    main()
