"""How fast `GET /api/v1/tools` searches a catalog of 5,000 tools (budget: at most 20 ms p50).

Run `python -m benchmarks.catalog_api` from the repository root. It builds a gateway whose catalog
holds `--tools` generated tools from 50 sources (tags, risks and layers varied), with roles and
an API key, and sends each search through the real ASGI application (authentication, Host and
Origin checks, routing, JSON) with httpx's ASGI transport, no network. As the reference it calls
the search function itself in-process on the same role's entries, with the same paging. Each
query runs `--runs` times; p50 and p99 are printed side by side.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types

from gateway.api.tools import Entry, ToolQuery, search
from gateway.catalog.merged import SourceListing, page
from gateway.catalog.tools import Risk, ToolRecord
from gateway.clients.session import SessionContext
from gateway.config.loading import parse_config
from gateway.frontdoors.httpapp import create_app
from gateway.service import Gateway

KEY = "benchmark-key-0123456789abcdef"
BUDGET_MS = 20.0
QUERIES = {
    "first page": {},
    "text": {"q": "invoice"},
    "text + server": {"q": "report", "server": "source07"},
    "tag + risk": {"tag": "finance", "risk": "high"},
    "layer, deep page": {"layer": "extended", "limit": "500"},
}
WORDS = ("invoice", "report", "customer", "weather", "ticket", "deploy", "metric", "archive", "search", "schedule")


def catalog(count: int) -> list[SourceListing]:
    """`count` tools over 50 sources, with descriptions, tags, risks and layers that vary."""
    per_source: dict[int, list[ToolRecord]] = {}
    for index in range(count):
        source = index % 50
        word = WORDS[index % len(WORDS)]
        record = ToolRecord(
            name=f"{word}_{index}",
            source=f"source{source:02d}",
            original_name=f"{word}_{index}",
            description=f"Handles the {word} workflow, step {index}; returns a summary of what changed.",
            input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
            annotations=types.ToolAnnotations(read_only_hint=index % 3 == 0),
            risk=Risk.HIGH if index % 7 == 0 else None,
            layer="extended" if index % 4 == 0 else "core",
            tags=frozenset({"finance"} if index % 5 == 0 else {"ops"}),
        )
        per_source.setdefault(source, []).append(record)
    return [
        SourceListing(source=f"source{source:02d}", namespace=f"source{source:02d}", tools=tuple(tools))
        for source, tools in per_source.items()
    ]


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


async def measure(count: int, runs: int) -> list[tuple[str, float, float, float, float]]:
    """Per query: p50 and p99 through the app, then of the direct search."""
    with tempfile.TemporaryDirectory() as data:
        document: dict[str, Any] = {
            "gateway": {"data_dir": data},
            "auth": {"api_keys": [{"caller": "ops", "role": "ops", "key": KEY}]},
            "roles": {"ops": {"allow": ["*"], "deny": [{"tag": "secret"}], "admin": True}},
        }
        config = parse_config(document, source="benchmark", base_dir=Path(data))
        gateway = Gateway(config)
        app = create_app(config, gateway=gateway)
        rows = []
        async with gateway.running():
            for listing in catalog(count):
                gateway.catalog.update(listing)
            session = SessionContext("bench", "api_key:ops", "http", 0.0, 0.0, role="ops")
            # The API keeps each role's visible entries until the catalog changes; so does the reference.
            entries = [Entry.of(tool) for tool in gateway.visibility.tools(session)]
            transport = httpx2.ASGITransport(app=app)
            headers = {"Authorization": f"Bearer {KEY}"}
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as http:
                for label, params in QUERIES.items():
                    through: list[float] = []
                    direct: list[float] = []
                    for _ in range(runs):
                        started = time.perf_counter()
                        response = await http.get("/api/v1/tools", params=params)
                        through.append(time.perf_counter() - started)
                        assert response.status_code == 200, response.text
                        started = time.perf_counter()
                        query = ToolQuery(
                            q=params.get("q"),
                            server=params.get("server"),
                            tag=params.get("tag"),
                            risk=params.get("risk"),
                            layer=params.get("layer"),
                        )
                        found = search(entries, query)
                        page(found, None, int(params.get("limit", "50")), lambda tool: tool.name)
                        direct.append(time.perf_counter() - started)
                    rows.append((label, *percentiles(through), *percentiles(direct)))
        return rows


def main() -> None:
    """Print the table and whether the budget holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=200)
    options = parser.parse_args()
    rows = anyio.run(measure, options.tools, options.runs)
    print(f"{options.tools} tools, {options.runs} runs per query (ms)")
    print(f"{'query':<18} {'API p50':>8} {'API p99':>8} {'direct p50':>11} {'direct p99':>11}")
    for label, p50, p99, d50, d99 in rows:
        print(f"{label:<18} {p50:8.2f} {p99:8.2f} {d50:11.2f} {d99:11.2f}")
    worst = max(row[1] for row in rows)
    verdict = "within" if worst <= BUDGET_MS else "OVER"
    print(f"slowest p50 through the API: {worst:.2f} ms, {verdict} the {BUDGET_MS:g} ms budget")


if __name__ == "__main__":
    main()
