"""How fast the dashboard renders over a large audit trail, and what keeping its rollup costs a write.

Target: the dashboard page (`/dashboard`) renders in at most 150 ms over 1,000,000 audit rows, for
each window (1 h, 24 h, 7 d) and filtered to one server: the first request of a window (which reads
all of it) and the p50 of the next ones (which read again only its open bucket). Run `python -m
benchmarks.dashboard` from the repository root. It writes `--rows` audit rows spread over the 7 days
before the gateway's (fixed) clock, over 200 tools of 50 servers (the tools of
`benchmarks.catalog_api`), in batches of 10,000 as the audit trail writes them (each batch counted
in the rollup, `gateway.pipeline.rollupwrites`), and times the same batches inserted into a table of
the same shape without counting them (the reference: what each row costs the writer more). Then it
signs in with an admin API key and sends each request through the real ASGI application (Host and
Origin checks, the web session, the rollup's reads, rendering) with httpx's ASGI transport, no
network. With `--store-url` the audit trail is in that PostgreSQL database instead of SQLite (give a
fresh one: the rows stay); `--rows 0` with it times the reads of the rows an earlier run left there,
writing none. With `--browser` it then serves a second application of the same gateway
(its own kept sums, so that the first load of each window reads it whole) over HTTP on 127.0.0.1 and
times the dashboard's page loads in headless Chromium (`benchmarks.pageload`: the first byte and the
`load` event, from the Navigation Timing API).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import uvicorn

from benchmarks.catalog_api import catalog, percentiles
from gateway.config.loading import parse_config
from gateway.frontdoors.httpapp import create_app
from gateway.pipeline import rollupwrites
from gateway.service import Gateway
from gateway.stores import Database

if TYPE_CHECKING:
    from benchmarks.pageload import Load

KEY = "benchmark-key-0123456789abcdef"
TARGET_MS = 150.0
NOW = 1_800_000_000.0
WEEK = 7 * 86400
BATCH = 10_000
OUTCOMES = ("ok",) * 90 + ("error",) * 5 + ("refused:budget", "timeout", "unavailable", "invalid_arguments", "ok")
REQUESTS = {
    "dashboard, 1 h": ("/dashboard", {"window": "1h"}),
    "dashboard, 24 h": ("/dashboard", {"window": "24h"}),
    "dashboard, 7 d": ("/dashboard", {"window": "7d"}),
    "dashboard, 7 d, one server": ("/dashboard", {"window": "7d", "server": "source07"}),
    "live panels, 24 h": ("/dashboard/panels", {"window": "24h"}),
    "tool page (sparkline)": ("/tools/{tool}", {}),
    "servers rows (50 sparklines)": ("/servers/rows", {}),
}
PAGES = {
    "dashboard, 1 h": "/dashboard?window=1h",
    "dashboard, 24 h": "/dashboard?window=24h",
    "dashboard, 7 d": "/dashboard?window=7d",
    "dashboard, 7 d, one server": "/dashboard?window=7d&server=source07",
}


def rows(count: int, tools: list[str]) -> list[tuple[object, ...]]:
    """`count` audit rows over the week before `NOW`, oldest first: Zipf-like tool popularity, mostly ok."""
    chance = random.Random(7)
    weights = [1 / (rank + 1) for rank in range(len(tools))]
    chosen = chance.choices(tools, weights, k=count)
    made: list[tuple[object, ...]] = []
    for index in range(count):
        epoch = NOW - WEEK + WEEK * index / count
        duration = chance.lognormvariate(3.0, 1.0)
        made.append(
            (
                f"b-{index}",
                "t",
                epoch,
                "s",
                "ops",
                chosen[index],
                "d",
                chance.choice(OUTCOMES),
                duration,
                "",
                "",
                "",
                "",
            )
        )
    return made


def write(db: Database, made: list[tuple[object, ...]], table: str | None) -> float:
    """Seconds to write `made` in batches of `BATCH`, each one transaction: as the audit trail writes
    them (counted in the rollup) without `table`, else plainly inserted into `table`."""
    insert = f"INSERT INTO {table} ({rollupwrites.COLUMNS}) VALUES ({', '.join('?' * len(made[0]))})"
    started = time.perf_counter()
    for start in range(0, len(made), BATCH):
        if table is None:
            with db.transaction() as queries:
                rollupwrites.write(queries, db.dialect, made[start : start + BATCH])
        else:
            db.execute_many(insert, made[start : start + BATCH])
    return time.perf_counter() - started


async def browser_loads(app: Any, runs: int) -> dict[str, list[Load]]:
    """Each of `PAGES` loaded in Chromium `runs` times, `app` served over HTTP meanwhile."""
    from benchmarks.pageload import page_loads  # Selenium is a development dependency.

    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as group:
        # Listening already: a request made before uvicorn accepts waits for it.
        group.start_soon(server.serve, [listening])
        try:
            loads = await anyio.to_thread.run_sync(page_loads, f"http://127.0.0.1:{port}", KEY, PAGES, runs)
        finally:
            server.should_exit = True
    return loads


async def measure(count: int, runs: int, store_url: str | None, browser: bool) -> dict[str, Any]:
    """The write costs, each request's p50 and p99, and with `browser` the page loads in Chromium."""
    with tempfile.TemporaryDirectory() as data:
        document: dict[str, Any] = {
            "gateway": {"data_dir": data},
            "auth": {"api_keys": [{"caller": "ops", "role": "ops", "key": KEY}]},
            "roles": {"ops": {"allow": ["*"], "admin": True}},
        }
        if store_url:
            document["store"] = {"url": store_url}
        config = parse_config(document, source="benchmark", base_dir=Path(data))
        gateway = Gateway(config, wall_clock=lambda: NOW)
        app = create_app(config, gateway=gateway)
        figures: dict[str, Any] = {"requests": []}
        async with gateway.running():
            listings = catalog(200)
            for listing in listings:
                gateway.catalog.update(listing)
            tools = [tool.name for tool in gateway.catalog.tools]
            made = rows(count, tools)
            db = gateway.audit.database
            db.execute("CREATE TABLE plain_audit AS SELECT * FROM audit WHERE 1 = 0")
            figures["plain_s"] = write(db, made, "plain_audit")
            db.execute("DROP TABLE plain_audit")
            figures["kept_s"] = write(db, made, None)
            figures["rollup_rows"] = db.fetch_one("SELECT COUNT(*) FROM audit_rollup")
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                form = await http.get("/signin")
                token = re.search(r'name="csrf" value="([^"]+)"', form.text)
                assert token is not None
                signed = await http.post("/signin", data={"csrf": token.group(1), "credential": KEY})
                assert signed.status_code == 303, signed.text
                # The process's first render compiles the templates: a window no timed request reads.
                warm = await http.get("/dashboard", params={"window": "1h", "tool": tools[-1]})
                assert warm.status_code == 200, warm.status_code
                for label, (path, params) in REQUESTS.items():
                    path = path.format(tool=tools[0])
                    samples = []
                    for _ in range(runs):
                        started = time.perf_counter()
                        response = await http.get(path, params=params)
                        samples.append(time.perf_counter() - started)
                        assert response.status_code == 200, (label, path, response.status_code)
                    # The first read of a window reads all of it; later ones (the page's refreshes) only
                    # its open bucket anew (`ClosedBuckets`).
                    figures["requests"].append(
                        (label, samples[0] * 1000, *percentiles(samples[1:]), len(response.content))
                    )
            if browser:
                figures["browser"] = await browser_loads(create_app(config, gateway=gateway), runs)
        return figures


def main() -> None:
    """Print the write costs, the table, and whether the target holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--store-url", default=None, help="a PostgreSQL URL (a fresh database) instead of SQLite")
    parser.add_argument("--browser", action="store_true", help="time the dashboard's page loads in Chromium too")
    options = parser.parse_args()
    figures = anyio.run(measure, options.rows, options.runs, options.store_url, options.browser)
    count = options.rows
    plain, kept = figures["plain_s"], figures["kept_s"]
    print(f"{count} audit rows written over 7 days, 200 tools of 50 servers; rollup rows: {figures['rollup_rows'][0]}")
    if count:
        print(
            f"write, batches of {BATCH}: {plain / count * 1e6:.1f} us a row without the rollup,"
            f" {kept / count * 1e6:.1f} us with it (+{(kept - plain) / count * 1e6:.1f} us)"
        )
    print(f"{options.runs} runs per request (ms); load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    print(f"{'request':<30} {'first':>7} {'p50':>7} {'p99':>7} {'KB':>6}   (first: the window read whole)")
    for label, first, p50, p99, size in figures["requests"]:
        verdict = "ok" if max(first, p50) <= TARGET_MS else "OVER"
        print(f"{label:<30} {first:7.2f} {p50:7.2f} {p99:7.2f} {size / 1024:6.1f}  {verdict} (target {TARGET_MS:g})")
    if "browser" in figures:
        print("page loads in Chromium (ms; first byte: the request's wait, load: to the load event)")
        print(f"{'page':<30} {'first byte':>10} {'load':>7} {'p50 byte':>9} {'p50 load':>9}")
        for label, loads in figures["browser"].items():
            later = loads[1:] or loads
            byte, loaded = (
                statistics.median(getattr(load, name) for load in later) for name in ("first_byte", "loaded")
            )
            print(f"{label:<30} {loads[0].first_byte:10.1f} {loads[0].loaded:7.1f} {byte:9.1f} {loaded:9.1f}")


if __name__ == "__main__":
    main()
