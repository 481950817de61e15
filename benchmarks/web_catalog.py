"""How fast the web catalog answers over 5,000 tools, and how much the page weighs.

Targets: the catalog page's first byte p50 at most 100 ms, a live-search request's p50 at most
50 ms, the page (HTML, CSS and script; there are no images) at most 150 KB. Run
`python -m benchmarks.web_catalog` from the repository root. It builds the catalog of
`benchmarks.catalog_api` (`--tools` generated tools over 50 sources), signs in on the page with an
admin API key, and sends each request through the real ASGI application (Host and Origin checks,
the web session, rendering) with httpx's ASGI transport, no network. A page is sent in one body,
so the time to the whole response is also the time to its first byte.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

from benchmarks.catalog_api import catalog, percentiles
from gateway.config.loading import parse_config
from gateway.frontdoors.httpapp import create_app
from gateway.service import Gateway

KEY = "benchmark-key-0123456789abcdef"
PAGE_MS, SEARCH_MS, WEIGHT_KB = 100.0, 50.0, 150.0
REQUESTS = {
    "catalog page": ("/", {}),
    "catalog page, filtered": ("/", {"q": "report", "risk": "high"}),
    "search: text": ("/catalog/results", {"q": "invoice"}),
    "search: text + server": ("/catalog/results", {"q": "report", "server": "source07"}),
    "search: no match": ("/catalog/results", {"q": "nothing-like-this"}),
}


async def measure(count: int, runs: int) -> tuple[list[tuple[str, float, float]], int]:
    """p50 and p99 per request, and the catalog page's weight in bytes with its CSS and script."""
    with tempfile.TemporaryDirectory() as data:
        document: dict[str, Any] = {
            "gateway": {"data_dir": data},
            "auth": {"api_keys": [{"caller": "ops", "role": "ops", "key": KEY}]},
            "roles": {"ops": {"allow": ["*"], "admin": True}},
        }
        config = parse_config(document, source="benchmark", base_dir=Path(data))
        gateway = Gateway(config)
        app = create_app(config, gateway=gateway)
        rows = []
        async with gateway.running():
            for listing in catalog(count):
                gateway.catalog.update(listing)
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                form = await http.get("/signin")
                token = re.search(r'name="csrf" value="([^"]+)"', form.text)
                assert token is not None
                signed = await http.post("/signin", data={"csrf": token.group(1), "credential": KEY})
                assert signed.status_code == 303, signed.text
                for label, (path, params) in REQUESTS.items():
                    samples = []
                    for _ in range(runs):
                        started = time.perf_counter()
                        response = await http.get(path, params=params)
                        samples.append(time.perf_counter() - started)
                        assert response.status_code == 200, response.text[:500]
                    rows.append((label, *percentiles(samples)))
                page = await http.get("/")
                weight = len(page.content)
                for asset in re.findall(r'(?:href|src)="(/static/[^"]+)"', page.text):
                    weight += len((await http.get(asset)).content)
        return rows, weight


def main() -> None:
    """Print the table and whether each target holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=100)
    options = parser.parse_args()
    rows, weight = anyio.run(measure, options.tools, options.runs)
    print(f"{options.tools} tools, {options.runs} runs per request (ms)")
    print(f"{'request':<26} {'p50':>7} {'p99':>7}")
    for label, p50, p99 in rows:
        target = PAGE_MS if label.startswith("catalog page") else SEARCH_MS
        print(f"{label:<26} {p50:7.2f} {p99:7.2f}  {'ok' if p50 <= target else 'OVER'} (target {target:g})")
    kb = weight / 1024
    print(f"catalog page weight: {kb:.1f} KB  {'ok' if kb <= WEIGHT_KB else 'OVER'} (target {WEIGHT_KB:g} KB)")


if __name__ == "__main__":
    main()
