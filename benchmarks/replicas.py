"""Replicas sharing Redis and PostgreSQL: round trips per call, CPU per call and calls/s, with 1 and 2
replicas, beside a single gateway on SQLite.

Run `python -m benchmarks.replicas [--seconds 10] [--sessions 16] [--rounds 1]` from the repository
root after `.ci/redis.sh` and `.ci/postgres.sh` (their servers are the ones used: `--redis`,
`--postgres`, or `.cache/postgres/url`). Each round first runs the reference: one `python -m gateway
serve` with the same configuration but no `store` section (SQLite in its data directory, budgets
and session state in the process). Then each run starts N processes with one stdio
upstream (`servers.echo`), `store.url` on a fresh PostgreSQL schema and `store.redis` on an
emptied Redis database, and drives them with 2026-07-28 clients, each its own caller (an API key
of a role with a per-minute budget, so every call passes the budget script and carries its loop
window; a `concurrent` limit would add one round trip, freeing the slot),
spread over the replicas in turn. It reads, per call: the Redis commands by name (INFO
commandstats; `hmget` and `hset` run inside the scripts: a round trip with an `hmget` is a call's
own, one without only writes session state behind the calls), the PostgreSQL transactions
committed (pg_stat_database, the whole database's) and the audit rows written with the transactions
that wrote them (their distinct `xmin`), and each replica's CPU time from /proc. No load balancer:
its CPU would blur the replicas'. Every run prints the load average at its end; "over one" is a
replica's CPU per call less the single gateway's of the same round. Each round also runs two
gateways on SQLite that share nothing, driven as two replicas are: "over as many on SQLite" is a
replica's CPU per call less that of as many gateways sharing nothing, each at about the same calls/s
(a process at half the calls/s spends more a call, whatever it shares).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import redis
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.gateway_latency import REPO, _interrupt, cpu_seconds, free_port, settle, started, wait_until_ready

MODE = "2026-07-28"
WARMUP_CALLS = 20
URL_FILE = REPO / ".cache" / "postgres" / "url"
# The commands the gateway sends; commandstats also counts those its scripts run inside Redis
# (zadd, expire, ...), which cost no round trip. Each is one round trip (older gateways sent a
# call's SETs of session state in one pipeline: here one SET a call, only the loop window).
_SENT = ("evalsha", "eval", "mget", "set", "zrem", "publish")
# Run inside the script that is each round trip: a call's own round trip reads its session's state
# (hmget); one that only carries written-behind state does not. hset: session states written.
_INSIDE = ("hmget", "hset")


@dataclass
class Run:
    """What one run measured."""

    replicas: int
    calls: int
    seconds: float
    cpu_per_replica: list[float]
    redis_commands: Counter[str]
    pg_commits: int
    audit_rows: int
    audit_commits: int
    redis_cpu: float
    load: float

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds


def _config(directory: Path, name: str, keys: Sequence[str], redis_url: str, postgres_url: str) -> Path:
    """A replica's configuration; without `postgres_url`, the single gateway's (no `store` section)."""
    document: dict[str, Any] = {
        "gateway": {"data_dir": str(directory / name / "data")},
        "servers": {
            "echo": {"command": sys.executable, "args": ["-m", "servers.echo"], "cwd": str(REPO), "required": True}
        },
        "auth": {
            "api_keys": [
                {"caller": f"caller-{n}", "role": "user", "key_sha256": hashlib.sha256(key.encode()).hexdigest()}
                for n, key in enumerate(keys)
            ]
        },
        "roles": {"user": {"allow": ["*"], "budget": {"calls_per_minute": 1_000_000}}},
    }
    if postgres_url:
        document["store"] = {"url": postgres_url, "redis": redis_url}
    path = directory / name / "gateway.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document), "utf-8")
    return path


async def _drive(
    urls: Sequence[str], keys: Sequence[str], seconds: float, pids: Sequence[int]
) -> tuple[int, float, list[float]]:
    counts = [0] * len(keys)
    async with AsyncExitStack() as stack:
        clients: list[Client] = []
        for n, key in enumerate(keys):
            http = await stack.enter_async_context(httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}))
            transport = streamable_http_client(f"{urls[n % len(urls)]}/mcp", http_client=http)
            clients.append(await stack.enter_async_context(Client(transport, mode=MODE)))
        for n, client in enumerate(clients):
            for i in range(WARMUP_CALLS // 4):
                await client.call_tool("echo__echo", {"text": f"warm-up {n} {i}"})
        cpu_before = [cpu_seconds(pid) for pid in pids]
        started_at = time.perf_counter()
        deadline = started_at + seconds

        async def drive(index: int, client: Client) -> None:
            while time.perf_counter() < deadline:
                result = await client.call_tool("echo__echo", {"text": f"caller {index} call {counts[index]}"})
                if result.is_error:
                    raise SystemExit(f"echo failed: {result.content}")
                counts[index] += 1

        async with anyio.create_task_group() as group:
            for index, client in enumerate(clients):
                group.start_soon(drive, index, client)
        elapsed = time.perf_counter() - started_at
        cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
    return sum(counts), elapsed, cpu


def _commandstats(client: redis.Redis) -> Counter[str]:
    stats: dict[str, Any] = client.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()})


def _redis_cpu(client: redis.Redis) -> float:
    stats: dict[str, Any] = client.info("cpu")
    return float(stats["used_cpu_user"]) + float(stats["used_cpu_sys"])


def _commits(postgres_url: str) -> int:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        row = connection.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        assert row is not None
        return int(row[0])


def _audit_rows(postgres_url: str) -> tuple[int, int]:
    """The audit rows, and the transactions that inserted them (distinct `xmin`): unlike the
    database's commit counter, the second counts only this run's audit commits, whatever else
    uses the database."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        row = connection.execute("SELECT count(*), count(DISTINCT xmin::text) FROM audit").fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


def _serve(
    stack: ExitStack, directory: Path, count: int, keys: Sequence[str], redis_url: str, scoped: str
) -> tuple[list[str], list[int]]:
    """Start `count` gateways (one on SQLite without `scoped`); their URLs and pids once all are ready."""
    urls: list[str] = []
    pids: list[int] = []
    for n in range(count):
        config = _config(directory, f"r{n}", keys, redis_url, scoped)
        port = free_port()
        log = directory / f"r{n}.log"
        command = [sys.executable, "-m", "gateway", "--log-level", "WARNING", "serve"]
        process = stack.enter_context(started([*command, "--config", str(config), "--port", str(port)], log=log))
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(process, f"{url}/readyz", log)
        settle(process.pid)
        urls.append(url)
        pids.append(process.pid)
    return urls, pids


def single(sessions: int, seconds: float, count: int = 1) -> Run:
    """The reference: `count` gateways on SQLite, each its budgets and session state in its process,
    sharing nothing, driven as that many replicas are."""
    keys = [secrets.token_hex(16) for _ in range(sessions)]
    with tempfile.TemporaryDirectory(prefix="replicas-bench-") as temp, ExitStack() as stack:
        urls, pids = _serve(stack, Path(temp), count, keys, "", "")
        calls, elapsed, cpu = anyio.run(_drive, urls, keys, seconds, pids)
    return Run(0, calls, elapsed, cpu, Counter(), 0, 0, 0, 0.0, os.getloadavg()[0])


def run(replicas: int, sessions: int, seconds: float, redis_url: str, postgres_url: str) -> Run:
    """One measured run with `replicas` gateway processes; every process is stopped before it returns."""
    keys = [secrets.token_hex(16) for _ in range(sessions)]
    schema = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in postgres_url else "?"
    scoped = f"{postgres_url}{separator}options=-csearch_path%3D{schema}"
    store = redis.Redis.from_url(redis_url)
    store.flushdb()
    try:
        with tempfile.TemporaryDirectory(prefix="replicas-bench-") as temp, ExitStack() as stack:
            urls, pids = _serve(stack, Path(temp), replicas, keys, redis_url, scoped)
            # Counted as a difference, not reset: another run may share the Redis server.
            commands_before = _commandstats(store)
            commits_before = _commits(scoped)
            audit_before, audit_commits_before = _audit_rows(scoped)
            redis_before = _redis_cpu(store)
            calls, elapsed, cpu = anyio.run(_drive, urls, keys, seconds, pids)
            load = os.getloadavg()[0]
            commands = _commandstats(store) - commands_before
            redis_cpu = _redis_cpu(store) - redis_before
            # The statistics collector reports a backend's commits within about a second.
            time.sleep(2)
            commits = _commits(scoped) - commits_before
            audit_after, audit_commits_after = _audit_rows(scoped)
            audit, audit_commits = audit_after - audit_before, audit_commits_after - audit_commits_before
    finally:
        store.close()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
    return Run(replicas, calls, elapsed, cpu, commands, commits, audit, audit_commits, redis_cpu, load)


def _cpu_per_call(run_: Run) -> list[float]:
    """Each process's CPU milliseconds per call it answered."""
    per_process = run_.calls / len(run_.cpu_per_replica)
    return [seconds / per_process * 1000 for seconds in run_.cpu_per_replica]


def report(runs: Sequence[Run], sessions: int) -> str:
    """The table of every run (each round's single gateway first), and per-call Redis and PostgreSQL traffic."""
    lines = [
        f"{sessions} 2026-07-28 callers, echo tool, on {os.cpu_count()} cores (load, clients and servers share them)",
        "",
        "| gateways | load | calls/s (all) | calls/s per process | CPU ms per call, each process | over one "
        "| over as many on SQLite | Redis round trips per call | Redis CPU per call | PostgreSQL commits per call "
        "| audit commits per call | audit rows per call |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    reference = 0.0
    # Each count's gateways on SQLite, the CPU a call of each: as many of them share the cores as replicas do.
    alike: dict[int, float] = {}
    for run_ in runs:
        cpu = _cpu_per_call(run_)
        count = len(run_.cpu_per_replica)
        per_process = run_.calls / count / run_.seconds
        shown = ", ".join(f"{ms:.2f}" for ms in cpu)
        if not run_.replicas:
            alike[count] = sum(cpu) / count
            if count == 1:
                reference = cpu[0]
            over = " " + ", ".join(f"{ms - reference:+.2f}" for ms in cpu) + " " if count > 1 else " "
            name = "one, SQLite" if count == 1 else f"{count} apart, SQLite"
            lines.append(
                f"| {name} | {run_.load:.1f} | {run_.calls_per_s:.0f} | {per_process:.0f} | {shown} |{over}"
                "| | | | | | |"
            )
            continue
        commands = {name: run_.redis_commands[name] for name in _SENT if run_.redis_commands[name]}
        total = sum(commands.values())
        inside = {name: run_.redis_commands[name] for name in _INSIDE if run_.redis_commands[name]}
        by_name = " ".join(f"{name} {count / run_.calls:.2f}" for name, count in (commands | inside).items())
        over = ", ".join(f"{ms - reference:+.2f}" for ms in cpu)
        over_alike = ", ".join(f"{ms - alike[count]:+.2f}" for ms in cpu) if count in alike else ""
        lines.append(
            f"| {run_.replicas} replica{'s' if run_.replicas > 1 else ''} | {run_.load:.1f} "
            f"| {run_.calls_per_s:.0f} | {per_process:.0f} | {shown} | {over} | {over_alike} | "
            f"{total / run_.calls:.2f} ({by_name}) | {run_.redis_cpu / run_.calls * 1e6:.0f} µs "
            f"| {run_.pg_commits / run_.calls:.3f} | {run_.audit_commits / run_.calls:.3f} | "
            f"{run_.audit_rows / run_.calls:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--redis", default="redis://127.0.0.1:6390/0")
    parser.add_argument("--postgres", default=os.environ.get("GATEWAY_TEST_POSTGRES_URL", ""))
    args = parser.parse_args(argv)
    postgres_url = args.postgres or (URL_FILE.read_text().strip() if URL_FILE.exists() else "")
    if not postgres_url:
        raise SystemExit("no PostgreSQL: run .ci/postgres.sh or pass --postgres URL")
    signal.signal(signal.SIGTERM, _interrupt)
    runs = []
    for _ in range(args.rounds):
        runs += [single(args.sessions, args.seconds, count) for count in (1, 2)]
        runs += [run(count, args.sessions, args.seconds, args.redis, postgres_url) for count in (1, 2)]
    print(report(runs, args.sessions))


if __name__ == "__main__":
    main()
