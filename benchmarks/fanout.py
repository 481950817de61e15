"""Registration fan-out between replicas: how soon a server registered on replica A lists its tools
to a session open on replica B, beside A's own session and the server's own start.

Run `python -m benchmarks.fanout [--rounds 10]` from the repository root after `.ci/redis.sh` and
`.ci/postgres.sh` (their servers are the ones used: `--redis`, `--postgres`, or
`.cache/postgres/url`). It starts two `python -m gateway serve` processes sharing `store.url` (a
fresh PostgreSQL schema) and `store.redis`, opens one handshake-era session on each, and per round
registers two stdio servers in turn through A's admin API, each under a new name: `servers.echo`
(a Python process importing the MCP SDK) and a hand-written one that imports nothing but `json`,
so that what remains of its figures is the gateways' share. Each session lists its tools every
10 ms until the new tool is there; the server is removed again before the next one. The reference
is the same server started and listed by a fresh SDK client in this process (start +
tools/list): the least any registration costs.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.gateway_latency import REPO, _interrupt, free_port, percentile, started, wait_until_ready

ADMIN_KEY = secrets.token_hex(16)
URL_FILE = REPO / ".cache" / "postgres" / "url"
ROUND_LIMIT = 120.0
POLL_SECONDS = 0.01
# A stdio MCP server written by hand: no SDK to import, so it starts in tens of milliseconds and
# what remains of the fan-out is the gateways' own share.
PLAIN = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    method = message["method"]
    result = {}
    if method == "initialize":
        version = message["params"]["protocolVersion"]
        info = {"name": "plain", "version": "1"}
        result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "plain"}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""
SERVERS = {
    "echo": ["-m", "servers.echo"],
    "plain": ["-c", PLAIN],
}
LABELS = {
    "echo": "servers.echo (Python, MCP SDK)",
    "plain": "a hand-written stdio server (no SDK)",
}
# Per server kind, per round: seconds to A's session listing the tool, to B's, and the server alone.
Figures = dict[str, list[tuple[float, float, float]]]


def _config(directory: Path, name: str, redis_url: str, postgres_url: str, key: str) -> Path:
    document: dict[str, Any] = {
        "gateway": {"data_dir": str(directory / name / "data")},
        "servers": {},
        "auth": {"api_keys": [{"caller": "admin", "role": "admin", "key": ADMIN_KEY}]},
        "roles": {"admin": {"admin": True, "allow": ["*"]}},
        "registration": {"allow_commands": [sys.executable], "sandbox_stdio": False},
        "store": {"url": postgres_url, "redis": redis_url, "key": key},
    }
    path = directory / name / "gateway.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document), "utf-8")
    return path


async def server_alone(args: Sequence[str]) -> float:
    """Seconds for a fresh SDK client to start a server and list its tools."""
    parameters = StdioServerParameters(command=sys.executable, args=list(args), cwd=str(REPO))
    start = time.perf_counter()
    async with Client(stdio_client(parameters), mode="legacy") as client:
        await client.list_tools()
    return time.perf_counter() - start


async def seen(client: Client, tool: str) -> float:
    """When (by `time.perf_counter`) `client`'s session first lists `tool`, listing every 10 ms."""
    while True:
        listed = await client.list_tools(cache_mode="refresh")
        if any(found.name == tool for found in listed.tools):
            return time.perf_counter()
        await anyio.sleep(POLL_SECONDS)


async def one_round(
    admin: httpx2.AsyncClient, urls: Sequence[str], clients: Sequence[Client], name: str, kind: str
) -> tuple[float, float]:
    """Register a server of `kind` as `name` on the first replica; seconds from its API's answer
    to each session listing its tool. The server is removed again before it returns."""
    times = [0.0] * len(clients)

    async def watch(index: int) -> None:
        times[index] = await seen(clients[index], f"{name}__echo")

    entry = {"name": name, "command": sys.executable, "args": SERVERS[kind], "cwd": str(REPO)}
    with anyio.fail_after(ROUND_LIMIT):
        async with anyio.create_task_group() as group:
            for index in range(len(clients)):
                group.start_soon(watch, index)
            answer = await admin.post(f"{urls[0]}/api/v1/servers", json=entry)
            registered = time.perf_counter()
            if answer.status_code != 201:
                raise SystemExit(f"registration refused: {answer.status_code} {answer.text}")
        (await admin.delete(f"{urls[0]}/api/v1/servers/{name}")).raise_for_status()
    return times[0] - registered, times[1] - registered


async def rounds(urls: Sequence[str], count: int) -> Figures:
    """`count` rounds, each registering every kind of server once."""
    figures: Figures = {kind: [] for kind in SERVERS}
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with AsyncExitStack() as stack:
        admin = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=ROUND_LIMIT))
        clients = []
        for url in urls:
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            clients.append(await stack.enter_async_context(Client(transport, mode="legacy")))
        for number in range(count):
            for kind in SERVERS:
                alone = await server_alone(SERVERS[kind])
                first, second = await one_round(admin, urls, clients, f"{kind}{number}", kind)
                figures[kind].append((first, second, alone))
                print(
                    f"round {number + 1}, {kind}: A {first * 1000:.0f} ms, B {second * 1000:.0f} ms, "
                    f"server alone {alone * 1000:.0f} ms",
                    flush=True,
                )
    return figures


def run(count: int, redis_url: str, postgres_url: str) -> Figures:
    """Two replicas on a fresh schema, `count` rounds; every process is stopped before it returns."""
    schema = f"fanout_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in postgres_url else "?"
    scoped = f"{postgres_url}{separator}options=-csearch_path%3D{schema}"
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    try:
        with tempfile.TemporaryDirectory(prefix="fanout-bench-") as temp, ExitStack() as stack:
            directory = Path(temp)
            urls = []
            for name in ("a", "b"):
                config = _config(directory, name, redis_url, scoped, key)
                port = free_port()
                log = directory / f"{name}.log"
                command = [sys.executable, "-m", "gateway", "--log-level", "WARNING", "serve"]
                process = stack.enter_context(
                    started([*command, "--config", str(config), "--port", str(port)], log=log)
                )
                url = f"http://127.0.0.1:{port}"
                wait_until_ready(process, f"{url}/readyz", log)
                urls.append(url)
            return anyio.run(rounds, urls, count)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def report(figures: Figures) -> str:
    """p50 and p95 of each figure, in milliseconds."""
    rounds = len(next(iter(figures.values())))
    lines = [
        f"{rounds} rounds, each registering each server on replica A, one handshake-era session open on "
        f"each replica; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "",
        "| server | A's session lists its tool | B's session lists it | B after A "
        "| the server alone: start + tools/list |",
        "|---|---|---|---|---|",
    ]

    def spread(samples: Sequence[float]) -> str:
        ms = [sample * 1000 for sample in samples]
        return f"{statistics.median(ms):.0f} / {percentile(ms, 0.95):.0f} ms"

    for kind, rows in figures.items():
        first, second, alone = ([row[index] for row in rows] for index in range(3))
        lag = [b - a for a, b in zip(first, second, strict=True)]
        lines.append(f"| {LABELS[kind]} | {spread(first)} | {spread(second)} | {spread(lag)} | {spread(alone)} |")
    lines.append("")
    lines.append("p50 / p95, from replica A's API answering the registration")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--redis", default="redis://127.0.0.1:6390/0")
    parser.add_argument("--postgres", default=os.environ.get("GATEWAY_TEST_POSTGRES_URL", ""))
    args = parser.parse_args(argv)
    postgres_url = args.postgres or (URL_FILE.read_text().strip() if URL_FILE.exists() else "")
    if not postgres_url:
        raise SystemExit("no PostgreSQL: run .ci/postgres.sh or pass --postgres URL")
    signal.signal(signal.SIGTERM, _interrupt)
    print(report(run(args.rounds, args.redis, postgres_url)))


if __name__ == "__main__":
    main()
