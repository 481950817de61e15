"""The gateway under more load than one client process can make: calls/s per core of its own CPU, p99.

Run `python -m benchmarks.saturation [--sessions 50 200 500] [--clients 4] [--seconds 5]
[--replicas 2]` from the repository root. For each session count, a single gateway (SQLite) and,
with `--replicas N` and `.ci/redis.sh` and `.ci/postgres.sh` run, N replicas sharing Redis and
PostgreSQL (`benchmarks.replicas`): `--clients` worker processes open the sessions between them
(plain JSON-RPC over HTTP, each session its own caller), spread over the replicas, warm each up,
and on one signal all call the echo tool without pause for `--seconds`. The gateway's CPU comes from
/proc over exactly that window: calls per CPU-second is its calls/s per core of its own CPU, which a
client that saturates first cannot inflate. The load average is printed with every line.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import anyio
import httpx2
import psycopg
import redis

from benchmarks.catalog_scale import RawSession
from benchmarks.gateway_latency import REPO, cpu_seconds, free_port, settle, started, wait_until_ready
from benchmarks.replicas import URL_FILE
from benchmarks.replicas import _config as replica_config

ECHO = [sys.executable, "-m", "servers.echo"]


def single_config(directory: Path, sessions: int) -> Path:
    """One gateway on SQLite with the echo server; without callers of their own, every session is
    the same anonymous caller's, so the limit per caller is raised to the session count."""
    path = directory / "gateway.json"
    server = {"command": ECHO[0], "args": ECHO[1:], "cwd": str(REPO), "required": True}
    settings = {"data_dir": str(directory / "data"), "max_sessions_per_caller": max(64, sessions)}
    path.write_text(json.dumps({"gateway": settings, "servers": {"echo": server}}))
    return path


async def worker(urls: Sequence[str], keys: Sequence[str], seconds: float) -> None:
    """One client process: its sessions opened and warmed, then, after `go` on stdin, calls until the end."""
    latencies: list[float] = []
    limits = httpx2.Limits(max_connections=len(keys) + 10)
    clients = [
        httpx2.AsyncClient(timeout=httpx2.Timeout(60), limits=limits, headers={"Authorization": f"Bearer {key}"})
        for key in keys
    ]
    sessions = [RawSession(client, f"{urls[n % len(urls)]}/mcp") for n, client in enumerate(clients)]

    async def call(index: int, n: int) -> None:
        params = {"name": "echo__echo", "arguments": {"text": f"{keys[index][:8]} {n}"}}
        await sessions[index].post("tools/call", params)

    async with anyio.create_task_group() as group:
        for index, session in enumerate(sessions):

            async def open_and_warm(index: int = index, session: RawSession = session) -> None:
                await session.open()
                for n in range(2):
                    await call(index, -n - 1)

            group.start_soon(open_and_warm)
    print("ready", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)
    deadline = time.perf_counter() + seconds

    async def drive(index: int) -> None:
        n = 0
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            await call(index, n)
            latencies.append(time.perf_counter() - began)
            n += 1

    async with anyio.create_task_group() as group:
        for index in range(len(sessions)):
            group.start_soon(drive, index)
    for client in clients:
        await client.aclose()
    print(json.dumps(latencies), flush=True)


def measure(urls: Sequence[str], pids: Sequence[int], keys: Sequence[str], clients: int, seconds: float) -> str:
    """Drive the gateways with `clients` worker processes; one report line."""
    shares = [keys[n::clients] for n in range(clients)]
    command = [sys.executable, "-m", "benchmarks.saturation", "--worker", ",".join(urls), "--seconds", str(seconds)]
    workers = [
        subprocess.Popen(
            [*command, "--keys", ",".join(share)], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for share in shares
        if share
    ]
    try:
        for process in workers:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise SystemExit("a client process failed to open its sessions")
        cpu_before = sum(cpu_seconds(pid) for pid in pids)
        began = time.perf_counter()
        for process in workers:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        latencies: list[float] = []
        for process in workers:
            assert process.stdout is not None
            latencies.extend(json.loads(process.stdout.readline()))
        elapsed = time.perf_counter() - began
        cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    finally:
        for process in workers:
            process.kill()
            process.communicate()  # reaps it and closes its pipes
    calls = len(latencies)
    p99 = statistics.quantiles(latencies, n=100)[98] * 1000 if calls >= 2 else float("nan")
    return (
        f"{len(keys):>8} {calls / elapsed:>8.0f} {cpu / elapsed:>6.2f} {calls / cpu if cpu else 0:>13.0f} "
        f"{statistics.median(latencies) * 1000:>8.1f} {p99:>8.1f} {os.getloadavg()[0]:>5.2f}"
    )


def run(sessions: int, replicas: int, clients: int, seconds: float, redis_url: str, postgres_url: str) -> str:
    """One point: `replicas` gateways sharing Redis and PostgreSQL (0: one gateway on SQLite)."""
    keys = [secrets.token_hex(16) for _ in range(sessions)]
    with tempfile.TemporaryDirectory(prefix="saturation-") as temp, ExitStack() as stack:
        directory = Path(temp)
        schema = ""
        if replicas:
            schema = f"bench_{secrets.token_hex(4)}"
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute(f"CREATE SCHEMA {schema}")
            separator = "&" if "?" in postgres_url else "?"
            scoped = f"{postgres_url}{separator}options=-csearch_path%3D{schema}"
            redis.Redis.from_url(redis_url).flushdb()
            configs = [replica_config(directory, f"r{n}", keys, redis_url, scoped) for n in range(replicas)]
        else:
            configs = [single_config(directory, sessions)]
        try:
            urls, pids = [], []
            for n, config in enumerate(configs):
                port, log = free_port(), directory / f"gateway{n}.log"
                command = [sys.executable, "-m", "gateway", "--log-level", "WARNING", "serve"]
                command += ["--config", str(config), "--port", str(port)]
                process = stack.enter_context(started(command, log=log))
                wait_until_ready(process, f"http://127.0.0.1:{port}/readyz", log)
                settle(process.pid)
                urls.append(f"http://127.0.0.1:{port}")
                pids.append(process.pid)
            return f"{replicas or 'single':>8} " + measure(urls, pids, keys, clients, seconds)
        finally:
            stack.close()
            if schema:
                with psycopg.connect(postgres_url, autocommit=True) as admin:
                    admin.execute(f"DROP SCHEMA {schema} CASCADE")


def main(argv: Sequence[str] | None = None) -> None:
    """Every session count, single and with replicas; a line each."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.saturation", description=__doc__)
    parser.add_argument("--sessions", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument("--clients", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds a point (default 5)")
    parser.add_argument("--replicas", type=int, default=0, help="also N replicas on Redis and PostgreSQL")
    parser.add_argument("--redis", default="redis://127.0.0.1:6390/0")
    parser.add_argument("--postgres", default=os.environ.get("GATEWAY_TEST_POSTGRES_URL", ""))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        anyio.run(worker, args.worker.split(","), args.keys.split(","), args.seconds)
        return
    postgres = args.postgres or (URL_FILE.read_text().strip() if URL_FILE.exists() else "")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.clients} client processes")
    columns = [("gateways", 8), ("sessions", 8), ("calls/s", 8), ("cores", 6), ("calls/CPU-s", 13)]
    columns += [("p50 ms", 8), ("p99 ms", 8), ("load", 5)]
    print(" ".join(f"{name:>{width}}" for name, width in columns))
    for sessions in args.sessions:
        for replicas in [0, args.replicas] if args.replicas else [0]:
            print(run(sessions, replicas, args.clients, args.seconds, args.redis, postgres), flush=True)


if __name__ == "__main__":
    main()
