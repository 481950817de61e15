"""`serve` says where it serves and, once its servers have connected or failed, how many are ready."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.harness import gateway_process, toy_stdio

pytestmark = pytest.mark.anyio


async def test_serve_prints_its_urls_then_how_many_servers_are_ready_and_which_are_not(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    servers = {"toy": toy_stdio(), "broken": toy_stdio("broken", "--fail-at-start")}
    # A connect timeout a loaded machine's process start cannot miss: the line counts servers, not speed.
    settings = {"data_dir": str(tmp_path / "data"), "upstream_connect_timeout": 60}
    config.write_text(yaml.safe_dump({"gateway": settings, "servers": servers}))
    output = tmp_path / "output"
    async with gateway_process(config, output) as served:
        await served.output.until(lambda line: "servers ready;" in line, "the line saying how many servers are ready")
    url, lines = served.url, output.read_text().splitlines()
    [serving] = [index for index, line in enumerate(lines) if line.startswith("Serving MCP at")]
    [ready] = [index for index, line in enumerate(lines) if "servers ready;" in line]
    assert lines[serving].startswith(f"Serving MCP at {url}/mcp and the web page at {url}/ (")
    assert serving < ready and lines[ready].startswith("1/2 servers ready; not ready: broken (")
