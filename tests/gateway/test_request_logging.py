"""A call writes no log line at the default level; at DEBUG each request has its access line, scrubbed."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import yaml

from tests.support.access import http_client
from tests.support.harness import gateway_process, toy_stdio, until_listed

pytestmark = pytest.mark.anyio

TOKEN = "query-token-61c0a9f3e2"


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "gateway.yaml"
    document = {"gateway": {"data_dir": str(tmp_path / "data")}, "servers": {"toy": toy_stdio()}}
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    return config


async def _calls_and_probe(url: str) -> None:
    async with http_client(url) as client:
        await until_listed(client, "toy__echo")
        for i in range(5):
            assert not (await client.call_tool("toy__echo", {"text": f"call {i}"})).is_error
    async with httpx2.AsyncClient() as http:
        await http.get(f"{url}/readyz?token={TOKEN}")


async def test_calls_and_probes_write_no_log_line_at_the_default_level(tmp_path: Path) -> None:
    output = tmp_path / "gateway.log"
    async with gateway_process(_config(tmp_path), output) as served:
        await _calls_and_probe(served.url)
    text = output.read_text()
    assert "upstream toy ready" in text
    # The start-up banner names the MCP URL once; no request writes a line.
    lines = [line for line in text.splitlines() if not line.startswith("Serving MCP at ")]
    assert not [line for line in lines if "/mcp" in line or "/readyz" in line or "toy__echo" in line]


async def test_at_debug_each_request_has_an_access_line_without_its_query(tmp_path: Path) -> None:
    output = tmp_path / "gateway.log"
    async with gateway_process(_config(tmp_path), output, "--log-level", "DEBUG") as served:
        await _calls_and_probe(served.url)
    text = output.read_text()
    assert "POST /mcp" in text and "GET /readyz" in text
    assert TOKEN not in text
