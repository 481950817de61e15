"""A large catalog: 20 stdio upstreams of 100 tools each, listed directly and through the gateway.

Run `python -m benchmarks.catalog_scale [--rounds 3] [--listings 30]` from the repository root.
Each round, after waiting for a quiet machine (load average below `--quiet`, at most
`--quiet-timeout` seconds), measures in one go, the order of the two paths alternating by round:

- **direct** (the limit): the same 20 servers started in parallel by the SDK client over stdio,
  each initialized and listed; the time until all 2,000 tools are known; then every server
  listed again, all at once, `--listings` times (p50);
- **gateway**: `python -m gateway serve` with the 20 servers in its config; the time from starting
  it until a tools/list over HTTP shows all 2,000 tools; a full listing (every page) `--listings`
  times, once with the SDK client (what a client sees, its own parsing included) and once as raw
  JSON-RPC over HTTP (the gateway's part: the client only decodes JSON); the gateway's RSS;
- **floor**: the pages of that full listing answered from memory by a bare ASGI app on uvicorn,
  the server the gateway runs on, and listed by the same raw client: the least a full listing
  costs on this stack, whatever the gateway does.

Each figure is printed per round, then as median and range, as a ratio to direct where there is
one, with its target beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import ExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters

from benchmarks.gateway_latency import REPO, cpu_seconds, free_port, settle, started, wait_until_ready

SERVERS = 20
TOOLS = 100
TARGET_LIST_MS = 10.0
TARGET_STARTUP_RATIO = 1.2
TARGET_RSS_MB = 80.0
CATALOG_TIMEOUT = 120.0
PROTOCOL = "2025-11-25"

UPSTREAM = """
import sys
from mcp.server import MCPServer

name, count = sys.argv[1], int(sys.argv[2])
server = MCPServer(name)


def make(index):
    async def tool(query: str, limit: int = 10, verbose: bool = False) -> str:
        return f"{name} {index}: {query} ({limit}, {verbose})"

    return tool


for index in range(count):
    description = f"Looks up the {name} records numbered like {index} that match a query; at most `limit` of them."
    server.add_tool(make(index), name=f"tool_{index:03d}", description=description)
server.run("stdio")
"""


@dataclass(frozen=True, slots=True)
class PeerFigures:
    """What one peer (see `catalog_peers`) achieved in one round."""

    catalog_s: float
    raw_list_ms: float
    cpu_list_ms: float
    rss_mb: float


@dataclass(frozen=True, slots=True)
class Round:
    """One round's figures."""

    load: float
    limit_s: float
    direct_list_ms: float
    catalog_s: float
    startup_cpu_s: float
    sdk_list_ms: float
    raw_list_ms: float
    raw_decode_ms: float
    gateway_cpu_ms: float
    rss_mb: float
    floor_ms: float
    floor_cpu_ms: float
    peers: Mapping[str, PeerFigures] = field(default_factory=dict)


def upstream_command(name: str) -> list[str]:
    """The command of one upstream: an SDK server with TOOLS tools over stdio."""
    return [sys.executable, "-c", UPSTREAM, name, str(TOOLS)]


async def _all_tools(client: Client) -> int:
    count, cursor = 0, None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        count += len(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return count


async def direct(listings: int) -> tuple[float, float]:
    """The limit (seconds until the 20 servers, started in parallel, are all listed) and the p50 ms
    of listing all of them again at once."""
    clients: list[Client] = []
    listed, stop = anyio.Event(), anyio.Event()
    started_at = time.perf_counter()
    limit = 0.0

    async def serve(name: str) -> None:
        # Each client stays in the task that opened it (its task group must exit where it entered).
        nonlocal limit
        command = upstream_command(name)
        params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
        async with Client(params, mode="legacy", cache=None) as client:
            if await _all_tools(client) != TOOLS:
                raise SystemExit(f"server {name} did not list {TOOLS} tools")
            clients.append(client)
            if len(clients) == SERVERS:
                limit = time.perf_counter() - started_at
                listed.set()
            await stop.wait()

    samples = []
    async with anyio.create_task_group() as group:
        for index in range(SERVERS):
            group.start_soon(serve, f"s{index:02d}")
        with anyio.fail_after(CATALOG_TIMEOUT):
            await listed.wait()
        for _ in range(listings):
            began = time.perf_counter()
            async with anyio.create_task_group() as listing:
                for client in clients:
                    listing.start_soon(_all_tools, client)
            samples.append(time.perf_counter() - began)
        stop.set()
    return limit, statistics.median(samples) * 1000


class RawSession:
    """A handshake-era MCP session over plain HTTP: JSON-RPC bodies out, JSON (or one SSE event) back."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self._http, self._url = http, url
        self._headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        self._id = 0
        self.decoding = 0.0
        """Seconds spent decoding answers (their text and JSON), all of them."""

    @property
    def opened(self) -> bool:
        """Whether the handshake is done."""
        return "mcp-session-id" in self._headers

    async def post(self, method: str, params: dict[str, Any] | None = None, notify: bool = False) -> Any:
        """Send one request (or notification) and return its result."""
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self._id += 1
            body["id"] = self._id
        response = await self._http.post(self._url, content=json.dumps(body), headers=self._headers)
        response.raise_for_status()
        if notify:
            return None
        began = time.perf_counter()
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        message = json.loads(text)
        self.decoding += time.perf_counter() - began
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message["result"]

    async def open(self) -> None:
        """The handshake."""
        params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        response = await self._http.post(self._url, content=json.dumps(body), headers=self._headers)
        response.raise_for_status()
        self._headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self._headers["mcp-protocol-version"] = PROTOCOL
        await self.post("notifications/initialized", notify=True)

    async def results(self) -> AsyncIterator[dict[str, Any]]:
        """Each page's result of a full listing, following the cursors."""
        cursor = None
        while True:
            result = await self.post("tools/list", {"cursor": cursor} if cursor else {})
            yield result
            cursor = result.get("nextCursor")
            if cursor is None:
                return

    async def pages(self) -> dict[str, str]:
        """A full listing's results as compact JSON, by the cursor that asked for each ('' for the first)."""
        pages: dict[str, str] = {}
        cursor = ""
        async for result in self.results():
            pages[cursor] = json.dumps(result, separators=(",", ":"))
            cursor = result.get("nextCursor", "")
        return pages

    async def catalog_size(self, counts: Callable[[str], bool] = lambda name: "__" in name) -> int:
        """How many tools a full listing shows whose names `counts` (default: the gateway's
        upstream tools, named `<server>__<tool>`)."""
        return sum([sum(counts(tool["name"]) for tool in result["tools"]) async for result in self.results()])


def gateway_config(directory: Path) -> Path:
    """A gateway config naming the 20 upstreams, its data under `directory`."""
    servers = {}
    for index in range(SERVERS):
        name = f"s{index:02d}"
        servers[name] = {"command": sys.executable, "args": upstream_command(name)[1:], "cwd": str(REPO)}
    path = directory / "gateway.json"
    # The same bound on a server's start as the direct path's: a busy machine's slow start must not
    # become a timeout and a restart on one side only.
    settings = {"data_dir": str(directory / "data"), "upstream_connect_timeout": CATALOG_TIMEOUT}
    path.write_text(json.dumps({"gateway": settings, "servers": servers}))
    return path


def rss_mb(pid: int) -> float:
    """The resident set size of process `pid` in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for process {pid}")


@dataclass(frozen=True, slots=True)
class GatewayFigures:
    """What one gateway run measured."""

    catalog_s: float
    """Seconds until it lists all 2,000 tools."""
    startup_cpu_s: float
    """The CPU it used until then."""
    sdk_list_ms: float
    """p50 of a full listing with the SDK client."""
    raw_list_ms: float
    """p50 of a full listing as raw JSON-RPC."""
    raw_decode_ms: float
    """p50 of the client's decoding of the answers to a raw full listing."""
    cpu_list_ms: float
    """The gateway's CPU per raw full listing."""
    rss_mb: float
    """Its RSS afterwards."""
    pages: Mapping[str, str]
    """Its full listing, as `RawSession.pages` returns it."""


async def through_gateway(directory: Path, listings: int) -> GatewayFigures:
    """The gateway started on the 20 servers, until its full catalog, then listed."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "gateway", "--log-level", "warning", "serve"]
    command += ["--config", str(gateway_config(directory)), "--port", str(port)]
    with ExitStack() as stack:
        started_at = time.perf_counter()
        gateway = stack.enter_context(started(command, log=directory / "gateway.log"))
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
            raw = RawSession(http, url)
            with anyio.fail_after(CATALOG_TIMEOUT):
                while not raw.opened:
                    if gateway.poll() is not None:
                        raise SystemExit(f"the gateway exited early; see {directory / 'gateway.log'}")
                    with suppress(httpx2.HTTPError, KeyError):
                        await raw.open()
                    await anyio.sleep(0.02)
                await _until_full(url, raw)
            catalog = time.perf_counter() - started_at
            startup_cpu = cpu_seconds(gateway.pid)
            # Find_Tools' index is built once the catalog is full: listings are timed after it.
            await anyio.to_thread.run_sync(settle, gateway.pid)
            cpu_before = cpu_seconds(gateway.pid)
            decoding: list[float] = []

            async def listing() -> None:
                before = raw.decoding
                await raw.catalog_size()
                decoding.append(raw.decoding - before)

            raw_samples = await _timed(listing, listings)
            cpu = (cpu_seconds(gateway.pid) - cpu_before) / (listings + 1) * 1000
            pages = await raw.pages()
        async with Client(url, mode="legacy", cache=None) as client:
            sdk_samples = await _timed(lambda: _all_tools(client), listings)
        rss = rss_mb(gateway.pid)
    sdk_ms, raw_ms = statistics.median(sdk_samples) * 1000, statistics.median(raw_samples) * 1000
    decode_ms = statistics.median(decoding) * 1000
    return GatewayFigures(catalog, startup_cpu, sdk_ms, raw_ms, decode_ms, cpu, rss, pages)


@asynccontextmanager
async def floor_server(directory: Path, pages: Mapping[str, str]) -> AsyncIterator[tuple[str, int]]:
    """`benchmarks.floors pages` serving `pages` (as `RawSession.pages` returns them) on a free port;
    yields its URL and pid."""
    stored = directory / "pages.json"
    stored.write_text(json.dumps(pages), encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = directory / "floor.log"
    with started([sys.executable, "-m", "benchmarks.floors", "pages", str(port), str(stored)], log=log) as server:
        await anyio.to_thread.run_sync(wait_until_ready, server, url, log)
        yield url, server.pid


async def floor(directory: Path, pages: Mapping[str, str], listings: int) -> tuple[float, float]:
    """p50 ms of a full listing of `pages` from `floor_server` with the raw client, and the server's
    CPU ms per listing."""
    async with floor_server(directory, pages) as (url, pid), httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
        raw = RawSession(http, url)
        await raw.open()
        cpu_before = cpu_seconds(pid)
        samples = await _timed(raw.catalog_size, listings)
        cpu = (cpu_seconds(pid) - cpu_before) / (listings + 1) * 1000
    return statistics.median(samples) * 1000, cpu


async def _until_full(url: str, raw: RawSession) -> None:
    """List again at each tools/list_changed, as a client does, until the catalog is full; polling
    instead would have the gateway build listings of a half-full catalog without pause."""
    changed = anyio.Event()

    async def note(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(url, mode="legacy", cache=None, message_handler=note):
        while await raw.catalog_size() < SERVERS * TOOLS:
            # A notice may come between a listing and this wait: the timeout bounds that race.
            with anyio.move_on_after(1):
                await changed.wait()
            changed = anyio.Event()


async def _timed(listing: Callable[[], Any], times: int) -> list[float]:
    await listing()  # warm: the first listing of a visibility set builds its pages
    samples = []
    for _ in range(times):
        began = time.perf_counter()
        await listing()
        samples.append(time.perf_counter() - began)
    return samples


def wait_quiet(threshold: float, timeout: float) -> float:
    """Wait until the 1-minute load average is below `threshold` (at most `timeout` s); return it."""
    deadline = time.monotonic() + timeout
    while os.getloadavg()[0] >= threshold and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def one_round(index: int, listings: int, quiet: float, quiet_timeout: float, peers_dir: Path | None) -> Round:
    """Both paths, the direct one first in even rounds; then the peers when `peers_dir` is given."""
    load = wait_quiet(quiet, quiet_timeout)
    with tempfile.TemporaryDirectory(prefix="gateway-catalog-") as temp:
        if index % 2 == 0:
            limit, direct_ms = anyio.run(direct, listings)
            gateway = anyio.run(through_gateway, Path(temp), listings)
        else:
            gateway = anyio.run(through_gateway, Path(temp), listings)
            limit, direct_ms = anyio.run(direct, listings)
        peers: dict[str, PeerFigures] = {}
        if peers_dir is not None:
            from benchmarks import catalog_peers

            peers = catalog_peers.run_all(peers_dir, Path(temp), listings)
        floor_ms, floor_cpu_ms = anyio.run(floor, Path(temp), gateway.pages, listings)
    return Round(
        load,
        limit,
        direct_ms,
        gateway.catalog_s,
        gateway.startup_cpu_s,
        gateway.sdk_list_ms,
        gateway.raw_list_ms,
        gateway.raw_decode_ms,
        gateway.cpu_list_ms,
        gateway.rss_mb,
        floor_ms,
        floor_cpu_ms,
        peers,
    )


def _spread(values: Sequence[float], unit: str, digits: int = 1) -> str:
    return f"{statistics.median(values):.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def report(rounds: Sequence[Round]) -> str:
    """Per-round rows, then medians and ranges against the targets."""
    lines = [
        f"{SERVERS} stdio upstreams x {TOOLS} tools, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}",
        "",
        f"{'round':<6} {'load':>5} {'limit s':>8} {'catalog s':>10} {'ratio':>6} {'gw CPU s':>9} "
        f"{'direct list ms':>15} "
        f"{'gw SDK list ms':>15} {'gw raw list ms':>15} {'gw CPU/list ms':>15} {'gw RSS MB':>10}",
    ]
    for index, r in enumerate(rounds, 1):
        lines.append(
            f"{index:<6} {r.load:>5.2f} {r.limit_s:>8.2f} {r.catalog_s:>10.2f} {r.catalog_s / r.limit_s:>6.2f} "
            f"{r.startup_cpu_s:>9.2f} "
            f"{r.direct_list_ms:>15.1f} {r.sdk_list_ms:>15.1f} {r.raw_list_ms:>15.1f} {r.floor_ms:>14.1f} "
            f"{r.gateway_cpu_ms:>15.1f} "
            f"{r.rss_mb:>10.1f}"
        )
    ratio = [r.catalog_s / r.limit_s for r in rounds]
    raw = [r.raw_list_ms for r in rounds]
    rss = [r.rss_mb for r in rounds]
    sdk_ratio = [r.sdk_list_ms / r.direct_list_ms for r in rounds]
    lines += [
        "",
        f"time to full catalog / limit: {_spread(ratio, 'x', 2)}; target <= {TARGET_STARTUP_RATIO}: "
        f"{'met' if statistics.median(ratio) <= TARGET_STARTUP_RATIO else 'MISSED'}",
        f"gateway CPU from its start to the full catalog: {_spread([r.startup_cpu_s for r in rounds], 's', 2)}",
        f"tools/list of {SERVERS * TOOLS} tools, every page, raw JSON-RPC: {_spread(raw, 'ms')}; "
        f"target <= {TARGET_LIST_MS:g} ms: {'met' if statistics.median(raw) <= TARGET_LIST_MS else 'MISSED'}",
        f"of which the client decoding the answers (text, then JSON), p50: "
        f"{_spread([r.raw_decode_ms for r in rounds], 'ms')}",
        f"the same pages from memory on uvicorn (the floor), raw: {_spread([r.floor_ms for r in rounds], 'ms')}; "
        f"the gateway adds {_spread([r.raw_list_ms - r.floor_ms for r in rounds], 'ms')} to it",
        f"gateway CPU per full listing (raw): {_spread([r.gateway_cpu_ms for r in rounds], 'ms')}; "
        f"the floor's: {_spread([r.floor_cpu_ms for r in rounds], 'ms')}",
        f"tools/list with the SDK client: {_spread([r.sdk_list_ms for r in rounds], 'ms')}, "
        f"{_spread(sdk_ratio, 'x', 2)} of listing the {SERVERS} servers directly "
        f"({_spread([r.direct_list_ms for r in rounds], 'ms')})",
        f"gateway RSS: {_spread(rss, 'MB')}; target <= {TARGET_RSS_MB:g} MB: "
        f"{'met' if statistics.median(rss) <= TARGET_RSS_MB else 'MISSED'}",
    ]
    for name in rounds[0].peers:
        figures = [r.peers[name] for r in rounds]
        lines += [
            "",
            f"{name}: time to full catalog / limit "
            f"{_spread([f.catalog_s / r.limit_s for f, r in zip(figures, rounds, strict=True)], 'x', 2)}; "
            f"full listing, raw: {_spread([f.raw_list_ms for f in figures], 'ms')} "
            f"({_spread([f.raw_list_ms / r.raw_list_ms for f, r in zip(figures, rounds, strict=True)], 'x', 1)} "
            f"the gateway's); its CPU per listing {_spread([f.cpu_list_ms for f in figures], 'ms')}; "
            f"RSS {_spread([f.rss_mb for f in figures], 'MB')}",
        ]
    return "\n".join(lines)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, run the rounds and print the figures."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog_scale", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each with both paths (default 3)")
    parser.add_argument("--listings", type=int, default=30, help="timed full listings per path and round (default 30)")
    parser.add_argument("--quiet", type=float, default=1.5, help="load average to wait for (default 1.5)")
    parser.add_argument("--quiet-timeout", type=float, default=300, help="longest wait for it, seconds (default 300)")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run FastMCP (mounted proxies) and mcp-proxy, installed pinned into --peers-dir on first use",
    )
    parser.add_argument(
        "--peers-dir",
        type=Path,
        default=Path.home() / ".cache" / "mcp-gateway" / "bench-peers",
        help="where the peers' virtualenvs live (default ~/.cache/mcp-gateway/bench-peers)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.listings < 1:
        parser.error("--rounds and --listings must be at least 1")
    signal.signal(signal.SIGTERM, _interrupt)
    rounds = []
    try:
        for index in range(args.rounds):
            peers_dir = args.peers_dir if args.peers else None
            rounds.append(one_round(index, args.listings, args.quiet, args.quiet_timeout, peers_dir))
            print(f"round {index + 1} done", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted; every process the benchmark started has been stopped", file=sys.stderr)
        raise SystemExit(130) from None
    print(report(rounds))


if __name__ == "__main__":
    main()
