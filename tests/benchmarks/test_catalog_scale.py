"""The large-catalog benchmark's floor answers a raw client exactly as the gateway did."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from benchmarks.catalog_scale import RawSession, floor_server

pytestmark = pytest.mark.anyio


def page(names: list[str], next_cursor: str | None) -> str:
    tools = [{"name": name, "inputSchema": {"type": "object"}} for name in names]
    return json.dumps({"tools": tools} | ({"nextCursor": next_cursor} if next_cursor else {}), separators=(",", ":"))


async def test_the_floor_serves_a_handshake_and_every_page_of_a_listing_from_memory(tmp_path: Path) -> None:
    pages = {"": page(["a__one", "a__two"], "next"), "next": page(["b__three", "local"], None)}
    async with floor_server(tmp_path, pages) as (url, _), httpx2.AsyncClient() as http:
        raw = RawSession(http, url)
        await raw.open()
        assert await raw.catalog_size() == 3
        assert await raw.pages() == pages
