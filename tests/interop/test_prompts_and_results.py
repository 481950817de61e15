"""Through a real gateway over stdio, as directly: a prompt of `@modelcontextprotocol/server-everything`
that embeds a resource gives a URI that reads back, and a large structured result of a server written
with the SDK's `MCPServer` for the purpose arrives cut to `max_result_chars` with its text in agreement."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from gateway.pipeline.shaping import SHAPED_KEY, json_size
from tests.support.harness import REPO, http_gateway, make_config
from tests.support.node import require_node_command

pytestmark = pytest.mark.anyio
LIMIT = 8000


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_server_everything_s_embedded_resource_in_a_prompt_reads_back_through_the_gateway(
    tmp_path: Path, mode: str
) -> None:
    everything = StdioServerParameters(command=str(require_node_command("mcp-server-everything")), args=["stdio"])
    arguments = {"resourceType": "Text", "resourceId": "1"}
    async with Client(everything, mode="legacy") as direct:
        embedded = (await direct.get_prompt("resource-prompt", arguments)).messages[1].content
    config = make_config(tmp_path, {"everything": {"command": everything.command, "args": list(everything.args)}})
    async with http_gateway(config) as (_, url), Client(f"{url}/mcp", mode=mode) as client:
        through = (await client.get_prompt("everything__resource-prompt", arguments)).messages[1].content
        assert isinstance(through, types.EmbeddedResource)
        read = (await client.read_resource(through.resource.uri)).contents[0]
    assert isinstance(embedded, types.EmbeddedResource)
    assert through.resource.uri == f"everything+{embedded.resource.uri}" == "everything+demo://resource/dynamic/text/1"
    assert isinstance(read, types.TextResourceContents) and read.text.startswith("Resource 1: ")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_large_structured_result_arrives_cut_with_its_text_in_agreement(tmp_path: Path, mode: str) -> None:
    server = {"command": sys.executable, "args": ["-m", "tests.support.faithful"], "cwd": str(REPO)}
    launch = StdioServerParameters(command=server["command"], args=server["args"], cwd=server["cwd"])
    async with Client(launch, mode="legacy") as direct:
        whole = (await direct.call_tool("report", {"rows": 400})).structured_content
    config = make_config(tmp_path, {"faithful": server}, max_result_chars=LIMIT)
    async with http_gateway(config) as (_, url), Client(f"{url}/mcp", mode=mode) as client:
        result = await client.call_tool("faithful__report", {"rows": 400})
    text = result.content[0]
    cut = result.structured_content
    assert whole is not None and json_size(whole) > 19_000
    assert isinstance(text, types.TextContent) and cut is not None and json.loads(text.text) == cut
    assert len(text.text) <= LIMIT and json_size(cut) <= LIMIT
    assert cut["rows"][0] == whole["rows"][0] and cut["rows"][-1] == whole["rows"][-1]
    assert (result.meta or {})[SHAPED_KEY]["structuredContent"] == {"chars": json_size(whole), "kept": json_size(cut)}
