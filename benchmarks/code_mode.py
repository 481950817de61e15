"""Code mode against classic tool calling: bytes into the model's context, and what a script's calls cost.

Run: `.venv/bin/python -m benchmarks.code_mode [--runs 10] [--settle 2]` with Docker up and the sandbox
image built. It starts a gateway in this process (code mode on) over the bundled sqlite, files,
calc and echo servers, with generated data: a 5,000-row `sales` table, 200 customers, a 5,000-row
`orders.csv`, twenty notes and a 30 kB report. Each of eight multi-step tasks is done twice through
the SDK client:

- classic: the tools are called one by one and every result goes through the model (here, Python
  that reads only what the model would read: the results' text);
- code mode: one Run_Code whose script calls the same tools and prints the answer.

Both ways must give the same answer. The bytes that would enter the model's context are counted
as: tool definitions (classic: the whole tools/list; code mode: Run_Code's definition and one
browsing call that prints the stubs of the modules used), every call's arguments (what the model
writes: the script text for code mode) and every result's text.

Then the costs: a direct call of `echo__echo` by the client (p50) against the same call made from
a script (p50 of every call of `--runs` scripts of 100 calls, each timed by the script: stub,
channel both ways, pipeline, server), the mean per call (a 100-call script's p50 minus an empty
script's, divided by 100), the time of a 100-call script, and the first and later Run_Code of new
sessions (`--settle` seconds between sessions, so that the warm pool refills).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.context import ClientRequestContext

from gateway.config.loading import parse_config
from gateway.frontdoors.mcpserver import build_server
from gateway.sandbox import DEFAULT_IMAGE
from gateway.service import Gateway

REPO = Path(__file__).resolve().parents[1]
REGIONS = ("north", "south", "east", "west")
COUNTRIES = ("DE", "FR", "NL", "PL", "SE", "IT")


def generate(root: Path) -> None:
    """The data the tasks work on, the same for every run (seeded)."""
    rng = random.Random(33)
    db = sqlite3.connect(root / "shop.db")
    db.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, region TEXT, product TEXT, amount REAL, day TEXT)")
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
    db.execute("CREATE TABLE documents (name TEXT, body TEXT)")
    db.executemany(
        "INSERT INTO sales VALUES (?,?,?,?,?)",
        [
            (
                n,
                rng.choice(REGIONS),
                f"P{rng.randint(1, 40)}",
                round(rng.uniform(1, 1000), 2),
                f"2026-{1 + n % 12:02d}-{1 + n % 28:02d}",
            )
            for n in range(1, 5001)
        ],
    )
    db.executemany(
        "INSERT INTO customers VALUES (?,?,?)", [(n, f"customer {n}", rng.choice(COUNTRIES)) for n in range(1, 201)]
    )
    db.commit()
    db.close()
    files = root / "files"
    (files / "notes").mkdir(parents=True)
    with (files / "orders.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "customer", "amount", "status"])
        for n in range(1, 5001):
            status = rng.choice(("shipped", "shipped", "shipped", "open", "refunded"))
            writer.writerow([n, rng.randint(1, 200), round(rng.uniform(1, 1000), 2), status])
    words = ("gateway", "tool", "call", "audit", "budget", "sandbox", "script", "role", "loop", "result")
    for n in range(20):
        text = " ".join(rng.choice(words) for _ in range(300))
        (files / "notes" / f"note{n:02d}.txt").write_text(text + "\n")
    paragraphs = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(70)]
    (files / "report.md").write_text("# Report\n\n" + "\n\n".join(paragraphs) + "\n")


def config(root: Path, image: str) -> Any:
    """The gateway: code mode on, results uncut (the classic way must see whole tables), low risk."""
    python = {"command": sys.executable, "cwd": str(REPO), "risk": "low"}
    servers = {
        "sqlite": {
            **python,
            "args": [
                "-m",
                "servers.sqlite",
                "--database",
                str(root / "shop.db"),
                "--max-rows",
                "10000",
                "--max-result-bytes",
                "50000000",
            ],
        },
        "files": {**python, "args": ["-m", "servers.files", "--root", str(root / "files")]},
        "calc": {**python, "args": ["-m", "servers.calc"]},
        "echo": {**python, "args": ["-m", "servers.echo"]},
    }
    gateway = {
        "data_dir": str(root / "data"),
        "sandbox_image": image,
        "code_mode": True,
        "sandbox_warm": 2,
        "max_result_chars": 10_000_000,
        "max_result_bytes": 200_000_000,
    }
    return parse_config({"gateway": gateway, "servers": servers}, source=str(root / "gateway.yaml"), base_dir=root)


def text_of(result: types.CallToolResult) -> str:
    """The text a model reads of a result."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


class Context:
    """Counts the bytes that enter the model's context, and calls tools through the client."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.bytes = 0

    def add(self, text: str) -> None:
        self.bytes += len(text.encode())

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """One call: its arguments (the model writes them) and its result's text (the model reads it)."""
        self.add(json.dumps({"name": name, "arguments": arguments}))
        with anyio.fail_after(120):
            result = await self.client.call_tool(name, arguments)
        text = text_of(result)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {text[:500]}")
        self.add(text)
        return text


def rows_of(text: str) -> list[list[Any]]:
    """The rows of a sqlite query as the model reads its text: `a | b` lines under a header, then a count."""
    lines = text.splitlines()[1:-1]
    return [[_cell(cell) for cell in line.split(" | ")] for line in lines]


def _cell(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@dataclass(frozen=True)
class Task:
    """One multi-step task: the classic way (calls through the model) and its script, which prints the answer."""

    name: str
    what: str
    modules: tuple[str, ...]
    classic: Callable[[Context], Awaitable[Any]]
    script: str


async def filter_csv(ctx: Context) -> Any:
    text = await ctx.call("files__read_file", {"path": "orders.csv"})
    rows = list(csv.DictReader(io.StringIO(text)))
    return sorted(int(row["id"]) for row in rows if row["status"] == "refunded" and float(row["amount"]) > 990)


async def median_per_region(ctx: Context) -> Any:
    rows = rows_of(await ctx.call("sqlite__query", {"sql": "SELECT region, amount FROM sales"}))
    grouped: dict[str, list[float]] = defaultdict(list)
    for region, amount in rows:
        grouped[region].append(float(amount))
    return {region: round(statistics.median(values), 2) for region, values in sorted(grouped.items())}


async def top_products(ctx: Context) -> Any:
    rows = rows_of(await ctx.call("sqlite__query", {"sql": "SELECT product, amount, day FROM sales"}))
    totals: dict[str, float] = defaultdict(float)
    for product, amount, day in rows:
        if str(day).startswith("2026-07"):
            totals[product] += float(amount)
    return [name for name, _ in sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:3]]


async def join_servers(ctx: Context) -> Any:
    customers = rows_of(await ctx.call("sqlite__query", {"sql": "SELECT id, country FROM customers"}))
    country = {int(cid): str(code) for cid, code in customers}
    orders = csv.DictReader(io.StringIO(await ctx.call("files__read_file", {"path": "orders.csv"})))
    totals: dict[str, float] = defaultdict(float)
    for row in orders:
        if row["status"] == "shipped":
            totals[country[int(row["customer"])]] += float(row["amount"])
    return {code: round(total, 2) for code, total in sorted(totals.items())}


async def copy_document(ctx: Context) -> Any:
    body = await ctx.call("files__read_file", {"path": "report.md"})
    await ctx.call(
        "sqlite__execute", {"sql": "INSERT INTO documents VALUES (?, ?)", "params": ["report-classic", body]}
    )
    return len(body)


async def copy_rows(ctx: Context) -> Any:
    rows = rows_of(await ctx.call("sqlite__query", {"sql": "SELECT id, amount FROM sales WHERE region = 'east'"}))
    content = "".join(f"{rid},{amount}\n" for rid, amount in rows)
    await ctx.call("files__write_file", {"path": "east-classic.csv", "content": content, "overwrite": True})
    return len(rows)


async def many_calls(ctx: Context) -> Any:
    total = 0.0
    for year in range(1, 41):
        total += float(await ctx.call("calc__evaluate", {"expression": f"round(1000 * 1.03 ** {year}, 2)"}))
    return round(total, 2)


async def read_many(ctx: Context) -> Any:
    listing = await ctx.call("files__list_directory", {"path": "notes"})
    names = sorted(line.split()[0] for line in listing.splitlines() if line.split()[0].endswith(".txt"))
    counts = {}
    for name in names:
        counts[name] = (await ctx.call("files__read_file", {"path": f"notes/{name}"})).split().count("sandbox")
    return max(counts.items(), key=lambda item: (item[1], item[0]))[0]


TASKS = [
    Task(
        "filter-csv",
        "refunded orders over 990 in a 5,000-row CSV",
        ("files",),
        filter_csv,
        """import csv, io
from tools import files
rows = csv.DictReader(io.StringIO(files.read_file(path="orders.csv")["content"]))
print(sorted(int(r["id"]) for r in rows if r["status"] == "refunded" and float(r["amount"]) > 990))
""",
    ),
    Task(
        "median-per-region",
        "median sale per region over a 5,000-row table (SQLite has no median)",
        ("sqlite",),
        median_per_region,
        """import statistics
from collections import defaultdict
from tools import sqlite
grouped = defaultdict(list)
for region, amount in sqlite.query(sql="SELECT region, amount FROM sales")["rows"]:
    grouped[region].append(float(amount))
print({k: round(statistics.median(v), 2) for k, v in sorted(grouped.items())})
""",
    ),
    Task(
        "top-products",
        "three best products of July over 5,000 rows",
        ("sqlite",),
        top_products,
        """from collections import defaultdict
from tools import sqlite
totals = defaultdict(float)
for product, amount, day in sqlite.query(sql="SELECT product, amount, day FROM sales")["rows"]:
    if day.startswith("2026-07"):
        totals[product] += amount
print([name for name, _ in sorted(totals.items(), key=lambda i: (-i[1], i[0]))[:3]])
""",
    ),
    Task(
        "join-servers",
        "shipped totals per country: sqlite customers joined with a CSV of the files server",
        ("sqlite", "files"),
        join_servers,
        """import csv, io
from collections import defaultdict
from tools import files, sqlite
country = {cid: code for cid, code in sqlite.query(sql="SELECT id, country FROM customers")["rows"]}
totals = defaultdict(float)
for r in csv.DictReader(io.StringIO(files.read_file(path="orders.csv")["content"])):
    if r["status"] == "shipped":
        totals[country[int(r["customer"])]] += float(r["amount"])
print({k: round(v, 2) for k, v in sorted(totals.items())})
""",
    ),
    Task(
        "copy-document",
        "copy a 30 kB report from the files server into a sqlite table",
        ("files", "sqlite"),
        copy_document,
        """from tools import files, sqlite
body = files.read_file(path="report.md")["content"]
sqlite.execute(sql="INSERT INTO documents VALUES (?, ?)", params=["report-code", body])
print(len(body))
""",
    ),
    Task(
        "copy-rows",
        "copy the east region's sales rows from sqlite into a CSV file",
        ("sqlite", "files"),
        copy_rows,
        """from tools import files, sqlite
rows = sqlite.query(sql="SELECT id, amount FROM sales WHERE region = 'east'")["rows"]
files.write_file(path="east-code.csv", content="".join(f"{i},{a}\\n" for i, a in rows), overwrite=True)
print(len(rows))
""",
    ),
    Task(
        "many-calls",
        "sum of 40 compound-interest values, one calculator call each",
        ("calc",),
        many_calls,
        """from tools import calc
total = sum(float(calc.evaluate(expression=f"round(1000 * 1.03 ** {y}, 2)")["result"]) for y in range(1, 41))
print(round(total, 2))
""",
    ),
    Task(
        "read-many",
        "which of 20 notes says 'sandbox' most: a listing, then 20 reads",
        ("files",),
        read_many,
        """from tools import files
names = sorted(e["name"] for e in files.list_directory(path="notes")["entries"] if e["name"].endswith(".txt"))
counts = {n: files.read_file(path=f"notes/{n}")["content"].split().count("sandbox") for n in names}
print(max(counts.items(), key=lambda i: (i[1], i[0]))[0])
""",
    ),
]


def browse_script(modules: tuple[str, ...]) -> str:
    """What the model runs first in code mode to read the stubs it needs."""
    return "import tools\n" + "".join(f"help(tools.{name})\n" for name in modules)


async def run_task(client: Client, task: Task, run_code_definition: str, listing: str) -> dict[str, Any]:
    """One task both ways; their answers must match."""
    classic = Context(client)
    classic.add(listing)
    classic_answer = await task.classic(classic)
    code = Context(client)
    code.add(run_code_definition)
    await code.call("Run_Code", {"code": browse_script(task.modules)})
    printed = await code.call("Run_Code", {"code": task.script})
    answer_text = printed.strip().splitlines()[-1]
    expected = repr(classic_answer) if not isinstance(classic_answer, str) else classic_answer
    if answer_text != expected:
        raise AssertionError(f"{task.name}: code mode said {answer_text[:200]!r}, classic {expected[:200]!r}")
    return {"task": task.name, "what": task.what, "classic": classic.bytes, "code": code.bytes}


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


async def answer_yes(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


# 100 calls, each timed by the script itself (stub, channel both ways, the gateway's pipeline, the server).
HUNDRED_CALLS = """import time
from tools import echo
took = []
for n in range(100):
    started = time.perf_counter()
    echo.echo(text=f"{tag} {n}")
    took.append((time.perf_counter() - started) * 1000)
print(" ".join(f"{value:.3f}" for value in took))
"""


async def costs(gateway: Gateway, runs: int, settle: float) -> dict[str, float]:
    """Per-call overhead, 100-call script, first and later Run_Code of new sessions."""
    server = build_server(gateway)
    async with Client(server, mode="legacy", elicitation_callback=answer_yes) as client:
        direct = [
            await timed(partial(client.call_tool, "echo__echo", {"text": f"direct {n}"})) for n in range(runs * 10)
        ]
        empty = [await timed(partial(client.call_tool, "Run_Code", {"code": "0"})) for _ in range(runs)]
        hundred, inside = [], []
        for r in range(runs):
            script = f"tag = 'run{r}'\n" + HUNDRED_CALLS
            started = time.perf_counter()
            printed = text_of(await client.call_tool("Run_Code", {"code": script}))
            hundred.append((time.perf_counter() - started) * 1000)
            inside += [float(value) for value in printed.split()]
    first, later = [], []
    for _ in range(runs):
        await anyio.sleep(settle)
        async with Client(server, mode="legacy") as fresh:
            first.append(await timed(lambda: fresh.call_tool("Run_Code", {"code": "1"})))
            later.append(await timed(lambda: fresh.call_tool("Run_Code", {"code": "2"})))
    return {
        "direct_call_p50_ms": p50(direct),
        "script_call_p50_ms": p50(inside),
        "overhead_per_call_p50_ms": p50(inside) - p50(direct),
        "script_call_mean_ms": (p50(hundred) - p50(empty)) / 100,
        "empty_script_p50_ms": p50(empty),
        "hundred_call_script_p50_ms": p50(hundred),
        "first_run_code_p50_ms": p50(first),
        "first_run_code_max_ms": max(first),
        "later_run_code_p50_ms": p50(later),
    }


async def main_async(runs: int, settle: float, image: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        generate(root)
        async with Gateway(config(root, image)) as gateway:
            async with Client(build_server(gateway), mode="legacy", elicitation_callback=answer_yes) as client:
                tools = (await client.list_tools()).tools
                dumped = [tool.model_dump(by_alias=True, exclude_none=True) for tool in tools]
                run_code = next(tool for tool in dumped if tool["name"] == "Run_Code")
                listing = json.dumps([tool for tool in dumped if tool["name"] != "Run_Code"])
                # Warm the servers and the sandbox pool before anything is counted or timed.
                await client.call_tool("Run_Code", {"code": "0"})
                rows = [await run_task(client, task, json.dumps(run_code), listing) for task in TASKS]
            figures = await costs(gateway, runs, settle)
    print("| task | classic bytes | code mode bytes | saved |")
    print("|---|---:|---:|---:|")
    saved = []
    for row in rows:
        share = 1 - row["code"] / row["classic"]
        saved.append(share)
        print(f"| {row['task']}: {row['what']} | {row['classic']:,} | {row['code']:,} | {share:.1%} |")
    print(f"\nmedian saving: {statistics.median(saved):.1%} over {len(rows)} tasks (target >= 90%)")
    print()
    for name, value in figures.items():
        print(f"{name:<28} {value:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    args = parser.parse_args()
    anyio.run(main_async, args.runs, args.settle, args.image)


if __name__ == "__main__":
    main()
