"""N concurrent sessions calling a read-only tool through the gateway while its upstream is killed on a schedule.

Run `python -m benchmarks.load_faults [--sessions N] [--duration S] [--kill-every K]` from the repository
root. It starts `python -m gateway serve` as a subprocess (its RSS is then its own) with one stdio upstream,
`servers.echo`, and runs the same load twice, each time on a fresh gateway: once without faults (the
reference) and once with the upstream process sent SIGKILL every K seconds. Every session is a real SDK
client over streamable HTTP; every call sends a text no other call sends and checks that the answer is that
very text, so a wrong answer is a cross-session leak or a mix-up (there must be none). It reports calls, wrong
answers, errors by kind, p50/p99 latency of all calls, and the gateway's RSS before and after.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client

from benchmarks.gateway_latency import (
    _interrupt,
    cpu_seconds,
    free_port,
    gateway_config,
    percentile,
    started,
    upstream_pids,
    wait_until_ready,
)

# Sessions opening at once: a burst of hundreds of handshakes would measure the handshake, not the calls.
OPENING_AT_ONCE = 16
# How long the client waits for one answer beyond the gateway's own call deadline (its default, 60 s).
ANSWER_TIMEOUT = 90.0
OPEN_TIMEOUT = 120.0
# Error texts are grouped after these are blanked: numbers, and what is quoted.
_NUMBER = re.compile(r"\d+(\.\d+)?")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


@dataclass(slots=True)
class Tally:
    """What one run's calls came to."""

    latencies: list[float] = field(default_factory=list)
    # (start, end) of every answered call, and when each kill was sent: how long each outage lasted.
    answered: list[tuple[float, float]] = field(default_factory=list)
    kill_times: list[float] = field(default_factory=list)
    wrong: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    open_failures: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    missed_kills: int = 0
    sdk_client_errors: int = 0


class _Count(logging.Filter):
    """Counts a logger's records and drops them."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        self.count += 1
        return False


@dataclass(frozen=True, slots=True)
class Run:
    """One run's figures: the tally, its wall time and the gateway's memory in kB."""

    tally: Tally
    seconds: float
    gateway_cpu: float
    client_cpu: float
    rss_before_kb: int
    rss_peak_kb: int
    rss_after_kb: int


def error_kind(text: str) -> str:
    """The class of an error text: its first line with numbers and quoted parts blanked, cut to 100 characters."""
    line = text.strip().splitlines()[0] if text.strip() else "(empty)"
    return _NUMBER.sub("N", _QUOTED.sub("'…'", line))[:100]


def memory_kb(pid: int) -> tuple[int, int]:
    """The resident set size and its high-water mark of process `pid`, in kB, from /proc/<pid>/status."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


async def kill_on_schedule(gateway: int, every: float, tally: Tally) -> None:
    """Send SIGKILL to the upstream every `every` seconds until cancelled; a tick with none running is missed."""
    while True:
        await anyio.sleep(every)
        pids = upstream_pids(gateway)
        if not pids:
            tally.missed_kills += 1
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                tally.kills += 1
                tally.kill_times.append(time.perf_counter())
            except ProcessLookupError:
                tally.missed_kills += 1


async def call_until(client: Client, tool: str, index: int, deadline: float, tally: Tally) -> None:
    """Call `tool` with a fresh text until `deadline`, checking every answer is this session's own text."""
    nonce = secrets.token_hex(4)
    number = 0
    while time.perf_counter() < deadline:
        text = f"session {index} {nonce} call {number}"
        number += 1
        started_at = time.perf_counter()
        try:
            with anyio.fail_after(ANSWER_TIMEOUT):
                result = await client.call_tool(tool, {"text": text})
        except TimeoutError:
            tally.errors[f"no answer within {ANSWER_TIMEOUT:g} s"] += 1
        except Exception as error:
            tally.errors[f"{type(error).__name__}: {error_kind(str(error))}"] += 1
        else:
            answer = " ".join(getattr(block, "text", "") for block in result.content)
            if result.is_error:
                tally.errors[f"tool error: {error_kind(answer.replace(text, '<text>'))}"] += 1
            elif answer != text:
                tally.wrong += 1
            else:
                tally.answered.append((started_at, time.perf_counter()))
        tally.latencies.append(time.perf_counter() - started_at)


async def load(url: str, tool: str, sessions: int, duration: float, gateway: int, kill_every: float | None) -> Tally:
    """Open `sessions` sessions, let them all call for `duration` seconds (killing the upstream if asked), close."""
    tally = Tally()
    opening = anyio.Semaphore(OPENING_AT_ONCE)
    settled = [0]
    all_settled = anyio.Event()
    go = anyio.Event()
    finish = [0.0]

    async def session(index: int) -> None:
        async with AsyncExitStack() as stack:
            try:
                async with opening:
                    client = await stack.enter_async_context(Client(url, mode="legacy"))
            except Exception as error:
                tally.open_failures[f"{type(error).__name__}: {error_kind(str(error))}"] += 1
                return
            finally:
                settled[0] += 1
                if settled[0] == sessions:
                    all_settled.set()
            await go.wait()
            await call_until(client, tool, index, finish[0], tally)

    # The SDK client logs a traceback for each message that reaches a session it is closing; count them instead.
    counter = _Count()
    sdk_log = logging.getLogger("mcp.client.streamable_http")
    sdk_log.addFilter(counter)
    try:
        async with anyio.create_task_group() as group:
            for index in range(sessions):
                group.start_soon(session, index)
            with anyio.fail_after(OPEN_TIMEOUT):
                await all_settled.wait()
            finish[0] = time.perf_counter() + duration
            go.set()
            if kill_every is not None:
                with anyio.move_on_after(duration):
                    await kill_on_schedule(gateway, kill_every, tally)
    finally:
        sdk_log.removeFilter(counter)
    tally.sdk_client_errors = counter.count
    return tally


def run_once(sessions: int, duration: float, kill_every: float | None) -> Run:
    """One load run on a fresh gateway subprocess; it is stopped before this returns."""
    with tempfile.TemporaryDirectory(prefix="gateway-load-") as temp, ExitStack() as stack:
        directory = Path(temp)
        port = free_port()
        log = directory / "gateway.log"
        command = [sys.executable, "-m", "gateway", "--log-level", "warning", "serve"]
        command += [
            "--config",
            str(gateway_config(directory, max_sessions_per_caller=sessions + 16)),
            "--port",
            str(port),
        ]
        gateway = stack.enter_context(started(command, log=log))
        wait_until_ready(gateway, f"http://127.0.0.1:{port}/readyz", log)
        url = f"http://127.0.0.1:{port}/mcp"
        tool = anyio.run(tool_name, url)
        rss_before, _ = memory_kb(gateway.pid)
        started_at = time.perf_counter()
        gateway_cpu, client_cpu = cpu_seconds(gateway.pid), time.process_time()
        tally = anyio.run(load, url, tool, sessions, duration, gateway.pid, kill_every)
        gateway_cpu, client_cpu = cpu_seconds(gateway.pid) - gateway_cpu, time.process_time() - client_cpu
        seconds = time.perf_counter() - started_at
        rss_after, rss_peak = memory_kb(gateway.pid)
        if gateway.poll() is not None:
            raise SystemExit(f"the gateway exited during the run; see {log}")
    return Run(tally, seconds, gateway_cpu / seconds, client_cpu / seconds, rss_before, rss_peak, rss_after)


async def tool_name(url: str) -> str:
    """The exposed name of the echo tool (the gateway prefixes its server's name)."""
    async with Client(url, mode="legacy") as client:
        names = [tool.name for tool in (await client.list_tools()).tools if tool.name.endswith("echo")]
    if len(names) != 1:
        raise SystemExit(f"expected exactly one echo tool at {url}, found {names}")
    return names[0]


def report(runs: Sequence[tuple[str, Run]], sessions: int, duration: float, kill_every: float, load: float) -> str:
    """The side-by-side table, then the errors of each run by kind."""
    rows = [
        f"echo tool, {sessions} sessions for {duration:g} s, upstream SIGKILL every {kill_every:g} s in the fault run, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {load:.2f} before the run",
        "",
        f"{'run':<10} {'calls':>7} {'calls/s':>8} {'wrong':>6} {'errors':>7} {'error %':>8} {'p50 ms':>8} "
        f"{'p99 ms':>9} {'kills':>6} {'gw CPU':>7} {'client CPU':>10} "
        f"{'RSS before':>11} {'RSS peak':>9} {'RSS after':>10}",
    ]
    for name, run in runs:
        tally = run.tally
        calls = len(tally.latencies)
        failed = sum(tally.errors.values())
        p50 = percentile(tally.latencies, 0.5) * 1000 if calls else float("nan")
        p99 = percentile(tally.latencies, 0.99) * 1000 if calls else float("nan")
        rows.append(
            f"{name:<10} {calls:>7} {calls / duration:>8.0f} {tally.wrong:>6} {failed:>7} "
            f"{failed / max(calls, 1):>8.2%} {p50:>8.1f} {p99:>9.1f} {tally.kills:>6} "
            f"{run.gateway_cpu:>7.0%} {run.client_cpu:>10.0%} "
            f"{megabytes(run.rss_before_kb):>11} {megabytes(run.rss_peak_kb):>9} {megabytes(run.rss_after_kb):>10}"
        )
    rows.append(
        "(latency of every call, answered or failed; RSS of the gateway process, ready and idle / highest / "
        "after the sessions closed; CPU: share of one CPU from the sessions opening to their closing)"
    )
    for name, run in runs:
        tally = run.tally
        back = recoveries(tally)
        if back:
            rows.append(
                f"{name}: a call made after a kill was first answered {statistics.mean(back):.2f} s after it "
                f"on average, {max(back):.2f} s at most ({len(back)} of {tally.kills} kills)"
            )
        if tally.missed_kills:
            rows.append(f"{name}: {tally.missed_kills} kill ticks found no upstream running (it was restarting)")
        if tally.sdk_client_errors:
            rows.append(
                f"{name}: the SDK client logged {tally.sdk_client_errors} messages that reached a closing session"
            )
        if tally.open_failures:
            rows.append(f"{name}: sessions that could not open:")
            rows += [f"  {count:>6}  {kind}" for kind, count in tally.open_failures.most_common()]
        if tally.errors:
            rows.append(f"{name}: errors by kind:")
            rows += [f"  {count:>6}  {kind}" for kind, count in tally.errors.most_common()]
    wrong = sum(run.tally.wrong for _, run in runs)
    rows += ["", f"wrong answers: {wrong} (must be 0): {'met' if wrong == 0 else 'MISSED'}"]
    return "\n".join(rows)


def recoveries(tally: Tally) -> list[float]:
    """Seconds from each kill to the first right answer to a call made after it: how long the outage lasted."""
    found: list[float] = []
    for kill in tally.kill_times:
        ends = [end for start, end in tally.answered if start >= kill]
        if ends:
            found.append(min(ends) - kill)
    return found


def megabytes(kb: int) -> str:
    """`kb` kilobytes as megabytes, one decimal."""
    return f"{kb / 1024:.1f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run the reference and the fault run, print the comparison; exit 1 on a wrong answer."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load_faults", description=__doc__)
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions (default 50)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds each run calls for (default 60)")
    parser.add_argument("--kill-every", type=float, default=10.0, help="seconds between upstream kills (default 10)")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 5000 or not 0 < args.duration <= 3600 or args.kill_every <= 0:
        parser.error("--sessions must be 1 to 5000, --duration 0 to 3600 and --kill-every above 0")
    signal.signal(signal.SIGTERM, _interrupt)
    load = os.getloadavg()[0]
    runs: list[tuple[str, Run]] = []
    try:
        runs.append(("no kills", run_once(args.sessions, args.duration, None)))
        runs.append(("kills", run_once(args.sessions, args.duration, args.kill_every)))
    except KeyboardInterrupt:
        return 130
    print(report(runs, args.sessions, args.duration, args.kill_every, load))
    return 1 if any(run.tally.wrong for _, run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
