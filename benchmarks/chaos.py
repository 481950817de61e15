"""Replicas through an outage: PostgreSQL, then Redis, then both stopped and started again under calls.

Run `python -m benchmarks.chaos [--sessions 16] [--outage 10] [--settle 5]` from the repository
root (redis-server, haproxy and PostgreSQL's binaries installed: `.ci/redis.sh`, `.ci/postgres.sh`).
It starts a private PostgreSQL cluster and a private redis-server (tests/support/services.py), two
`python -m gateway serve` replicas sharing them behind HAProxy (tests/support/replicas.py) with one
stdio upstream (`tests.support.toy`), and N SDK clients through HAProxy calling `toy__echo` without
pause, half of them 2026-07-28 clients, half handshake-era; each call carries a text no other call
has. A client whose call raised opens a new session. Beside them, one 2026-era client per replica,
straight to it, calls every 0.1 s: the probes that tell when that replica serves again.

First S seconds of calls without an outage, the reference; then, in turn, PostgreSQL stopped for
`--outage` seconds and started again, Redis the same, and both. After each, once both replicas'
probes answer again, S more seconds of calls. Per window (from the outage until the end of its
calls): calls made, calls failed per second of outage and by era and kind, each era's longest call,
recovery (from the service answering again until the replica's probes succeed, each replica),
whether both replicas are the processes started at first and answer `/healthz`, and audit rows
missing: calls answered ok whose row (found by the digest of the call's arguments) is not in
PostgreSQL once the spools had up to SHIP_LIMIT seconds to ship. Targets: both replicas the same
processes, 0 rows missing; it exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
from mcp import Client

from benchmarks.gateway_latency import _interrupt
from benchmarks.load_faults import error_kind
from gateway.pipeline.audit import arguments_digest
from tests.support.access import KEYS, http_client
from tests.support.harness import toy_stdio
from tests.support.replicas import Cluster, cluster, replica_config
from tests.support.services import Postgres, Redis, postgres_server, redis_server

MODERN = "2026-07-28"
TOOL = "toy__echo"
ROLES: dict[str, Any] = {
    "admin": {"admin": True, "allow": ["*"]},
    "analyst": {"allow": ["*"]},
    "intern": {"allow": ["*"]},
}
# A call still unanswered then froze: beyond the pool's 10 s connect timeout and a retry's wait.
ANSWER_TIMEOUT = 30.0
PROBE_INTERVAL = 0.1
# Probes answered in a row, each started after the service came back, that make a replica recovered.
RECOVERED_AFTER = 3
# Bounds on waiting, never claims about speed: a replica serving again, the spools shipping.
RECOVERY_LIMIT = 120.0
SHIP_LIMIT = 60.0
# A client whose session broke waits this long before opening another.
REOPEN_PAUSE = 0.1


@dataclass(frozen=True, slots=True)
class Call:
    """One call: its client's protocol era, its arguments' digest, when it started and ended, and what it
    failed with (None: answered ok)."""

    mode: str
    digest: str
    started: float
    ended: float
    error: str | None


@dataclass(slots=True)
class Window:
    """One outage (or the reference): when it began, when the services answered again, when its calls ended,
    and when each replica's probes succeeded again."""

    name: str
    outage: float
    started: float
    back: float = 0.0
    ended: float = 0.0
    recovered: list[float | None] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Figures:
    """What one window's calls came to."""

    window: Window
    calls: int
    failed: int
    errors: Counter[str]
    missing: int
    longest: dict[str, float]


@dataclass(frozen=True, slots=True)
class Result:
    """One run: each window's figures, whether the replicas lived through it, and the spools' shipping time."""

    figures: list[Figures]
    same_processes: bool
    healthy: list[int]
    shipped_in: float


def _failure(failure: BaseException) -> str:
    """The kind of an exception: the first leaf of an exception group, its class and its text's kind."""
    while isinstance(failure, BaseExceptionGroup) and failure.exceptions:
        failure = failure.exceptions[0]
    return f"{type(failure).__name__}: {error_kind(str(failure))}"


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def _call(client: Client, mode: str, text: str, calls: list[Call]) -> bool:
    """Call the tool with `text`, appending the call to `calls`; whether the session is still usable."""
    started = time.perf_counter()
    error: str | None = None
    usable = True
    try:
        with anyio.fail_after(ANSWER_TIMEOUT):
            result = await client.call_tool(TOOL, {"text": text})
    except Exception as failure:
        error, usable = _failure(failure), False
    else:
        if result.is_error:
            error = f"tool error: {error_kind(_text(result))}"
        elif _text(result) != text:
            error = "wrong answer"
    calls.append(Call(mode, arguments_digest({"text": text}), started, time.perf_counter(), error))
    return usable


async def _caller(url: str, key: str, mode: str, name: str, calls: list[Call], stop: anyio.Event, pause: float) -> None:
    """Call without end (`pause` between calls) until `stop`, opening a new session whenever one breaks."""
    nonce = secrets.token_hex(3)
    number = 0
    while not stop.is_set():
        started = time.perf_counter()
        try:
            async with http_client(url, key, mode=mode) as client:
                while not stop.is_set():
                    number += 1
                    if not await _call(client, mode, f"{name}.{nonce}.{number}", calls):
                        break
                    await anyio.sleep(pause)
        except Exception as failure:
            # The session could not open (or close): a failed call of this client's.
            calls.append(Call(mode, "", started, time.perf_counter(), f"opening: {_failure(failure)}"))
        if not stop.is_set():
            await anyio.sleep(REOPEN_PAUSE)


def _recovered(probes: list[Call], back: float) -> float | None:
    """When a replica's probes succeeded again: the end of the first of the last RECOVERED_AFTER (or more)
    probes in a row answered ok, each started after `back` or, when none failed since the outage, `back`."""
    failed = [index for index, probe in enumerate(probes) if probe.error is not None]
    streak = probes[failed[-1] + 1 :] if failed else probes
    after = [probe for probe in streak if probe.started >= back]
    if len(after) < RECOVERED_AFTER:
        return None
    return max(back, streak[0].ended)


class Chaos:
    """The outages made one after another, and the calls and probes they met."""

    def __init__(self, gateways: Cluster, sessions: int, outage: float, settle: float) -> None:
        self.gateways = gateways
        self.sessions = sessions
        self.outage = outage
        self.settle = settle
        self.calls: list[Call] = []
        self.probes: list[list[Call]] = [[] for _ in gateways.replicas]
        self.windows: list[Window] = []

    async def run(self, database: Postgres, store: Redis) -> None:
        """Open the callers and probes, warm up, then the reference and each outage in turn."""
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            for index in range(self.sessions):
                mode = MODERN if index % 2 == 0 else "legacy"
                group.start_soon(_caller, self.gateways.url, KEYS["analyst"], mode, f"s{index}", self.calls, stop, 0.0)
            for index, replica in enumerate(self.gateways.replicas):
                probes = self.probes[index]
                group.start_soon(_caller, replica.url, KEYS["admin"], MODERN, f"p{index}", probes, stop, PROBE_INTERVAL)
            try:
                # Calls first reach every session's connection and the code paths warm.
                await anyio.sleep(self.settle)
                reference = Window("none (reference)", 0.0, time.perf_counter())
                self.windows.append(reference)
                await anyio.sleep(self.settle)
                reference.back = reference.ended = time.perf_counter()
                await self.outage_of("PostgreSQL", [database.stop], [database.start])
                await self.outage_of("Redis", [store.stop], [store.start])
                await self.outage_of("both", [database.stop, store.stop], [database.start, store.start])
            finally:
                stop.set()

    async def outage_of(
        self, name: str, stops: Sequence[Callable[[], None]], starts: Sequence[Callable[[], None]]
    ) -> None:
        """Stop the services, wait the outage, start them, wait until both replicas serve, then `settle` s of calls."""
        window = Window(name, self.outage, time.perf_counter())
        self.windows.append(window)
        for stop in stops:
            await anyio.to_thread.run_sync(stop)
        await anyio.sleep(self.outage - (time.perf_counter() - window.started))
        for start in starts:
            await anyio.to_thread.run_sync(start)
        window.back = time.perf_counter()
        await self.until(lambda: all(_recovered(probes, window.back) is not None for probes in self.probes))
        window.recovered = [_recovered(probes, window.back) for probes in self.probes]
        await anyio.sleep(self.settle)
        window.ended = time.perf_counter()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Poll `condition` until it holds; call the run off when it does not within RECOVERY_LIMIT."""
        with anyio.move_on_after(RECOVERY_LIMIT):
            # The probes' answers are polled: each is one of many calls, no event marks the streak.
            while True:
                if condition():
                    return
                await anyio.sleep(PROBE_INTERVAL)
        logs = ", ".join(str(replica.log) for replica in self.gateways.replicas)
        raise SystemExit(f"a replica did not serve again within {RECOVERY_LIMIT:g} s; see {logs}")


async def _audited(url: str, wanted: set[str]) -> tuple[set[str], float]:
    """The digests of `wanted` with an audit row, polled until all have one or SHIP_LIMIT passed; and the wait."""
    started = time.perf_counter()
    found: set[str] = set()
    while True:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            cursor = await connection.execute("SELECT DISTINCT args_digest FROM audit WHERE outcome = 'ok'")
            found = {row[0] for row in await cursor.fetchall()} & wanted
        if found == wanted or time.perf_counter() - started > SHIP_LIMIT:
            return found, time.perf_counter() - started
        await anyio.sleep(0.5)


async def _healthz(url: str) -> int:
    async with httpx2.AsyncClient(timeout=10) as http:
        return (await http.get(f"{url}/healthz")).status_code


def _figures(window: Window, calls: Sequence[Call], following: float, audited: set[str]) -> Figures:
    during = [call for call in calls if window.started <= call.started < following]
    return Figures(
        window,
        calls=len(during),
        failed=sum(call.error is not None for call in during),
        errors=Counter(f"{call.mode}: {call.error}" for call in during if call.error is not None),
        missing=sum(call.error is None and call.digest not in audited for call in during),
        longest={
            mode: max(call.ended - call.started for call in during if call.mode == mode) for mode in _modes(during)
        },
    )


def _modes(calls: Sequence[Call]) -> list[str]:
    """The protocol eras of `calls`, 2026-era first."""
    return sorted({call.mode for call in calls}, key=lambda mode: mode != MODERN)


async def _drive(
    workdir: Path, database: Postgres, store: Redis, sessions: int, outage: float, settle: float
) -> Result:
    # Replicas sharing a database share the key its registrations are encrypted with.
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    servers = {"toy": {**toy_stdio("toy"), "required": True}}
    # Every session a client reopens after a break counts until it ends idle.
    limits = {"max_sessions_per_caller": 64 + sessions * 16}
    configs = [
        replica_config(
            workdir,
            f"r{n}",
            store.url,
            servers=servers,
            store={"url": database.url, "key": key},
            roles=ROLES,
            gateway=limits,
        )
        for n in range(2)
    ]
    async with cluster(configs, workdir) as gateways:
        pids = [replica.process.pid for replica in gateways.replicas]
        chaos = Chaos(gateways, sessions, outage, settle)
        await chaos.run(database, store)
        alive = all(replica.process.returncode is None for replica in gateways.replicas)
        same = alive and pids == [replica.process.pid for replica in gateways.replicas]
        healthy = [await _healthz(replica.url) for replica in gateways.replicas]
        answered = {call.digest for call in chaos.calls if call.error is None}
        audited, shipped_in = await _audited(database.url, answered)
    windows = chaos.windows
    ends = [window.started for window in windows[1:]] + [windows[-1].ended]
    figures = [_figures(window, chaos.calls, end, audited) for window, end in zip(windows, ends, strict=True)]
    return Result(figures, same, healthy, shipped_in)


def run(sessions: int, outage: float, settle: float) -> Result:
    """One run on a private PostgreSQL and Redis and two fresh replicas, all stopped before this returns."""
    with (
        tempfile.TemporaryDirectory(prefix="gateway-chaos-") as temp,
        postgres_server() as database,
        redis_server() as store,
    ):
        return anyio.run(_drive, Path(temp), database, store, sessions, outage, settle)


def missed_targets(result: Result) -> str:
    """The targets the run missed, named; empty when it met them all."""
    missed = [] if result.same_processes and result.healthy == [200, 200] else ["a replica ended or is unhealthy"]
    missing = sum(entry.missing for entry in result.figures)
    return ", ".join([*missed, *([f"{missing} audit rows missing"] if missing else [])])


def report(result: Result, sessions: int, settle: float, load: float) -> str:
    """The table of outages, then what the failures said."""
    modern = (sessions + 1) // 2
    rows = [
        f"2 replicas behind HAProxy, {modern} 2026-07-28 and {sessions - modern} handshake-era sessions calling "
        f"{TOOL}, {settle:g} s of calls after each recovery, {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}, load average {load:.2f} before the run",
        "",
        f"{'outage':<18} {'down':>6} {'calls':>7} {'failed':>7} {'failed/s down':>13} {'recovery r0, r1':>17} "
        f"{'rows missing':>12}  longest call (2026-era, handshake-era)",
    ]
    for entry in result.figures:
        window = entry.window
        recovered = ", ".join("-" if at is None else f"{at - window.back:.2f}" for at in window.recovered) or "-"
        per_second = f"{entry.failed / window.outage:.1f}" if window.outage else "-"
        down = f"{window.outage:g} s" if window.outage else "-"
        rows.append(
            f"{window.name:<18} {down:>6} {entry.calls:>7} {entry.failed:>7} {per_second:>13} "
            f"{recovered + (' s' if window.recovered else ''):>17} {entry.missing:>12}  "
            + ", ".join(f"{seconds:.2f} s" for seconds in entry.longest.values())
        )
    rows.append(
        "(calls started from the outage until the next one; recovery: from the service answering again until the "
        "replica's own probes succeed)"
    )
    for entry in result.figures:
        if entry.errors:
            rows.append(f"{entry.window.name}: failures by era and kind:")
            rows += [f"  {count:>6}  {kind}" for kind, count in entry.errors.most_common()]
    healthz = ", ".join(str(code) for code in result.healthy)
    rows.append(
        f"replicas the same processes: {'yes' if result.same_processes else 'NO'}; /healthz {healthz}; "
        f"audit rows checked after {result.shipped_in:.1f} s of shipping"
    )
    missed = missed_targets(result)
    rows += ["", f"no restart, 0 rows missing: {'met' if not missed else 'MISSED: ' + missed}"]
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run, print the table; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__)
    parser.add_argument("--sessions", type=int, default=16, help="client sessions through HAProxy (default 16)")
    parser.add_argument("--outage", type=float, default=10.0, help="seconds each service is down (default 10)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of calls after each recovery (default 5)")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 500 or not 0 < args.outage <= 600 or not 0 < args.settle <= 600:
        parser.error("--sessions must be 1 to 500, --outage and --settle above 0, at most 600")
    signal.signal(signal.SIGTERM, _interrupt)
    load = os.getloadavg()[0]
    try:
        result = run(args.sessions, args.outage, args.settle)
    except KeyboardInterrupt:
        return 130
    print(report(result, args.sessions, args.settle, load))
    return 1 if missed_targets(result) else 0


if __name__ == "__main__":
    sys.exit(main())
