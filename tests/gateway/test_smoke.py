"""The gateway end to end: the smallest useful round trips."""

from pathlib import Path

import pytest
from mcp import Client

from tests.support.harness import gateway_client, http_gateway, in_memory, make_config, placeholder, toy_stdio
from tests.support.toy import build_server


@pytest.mark.anyio
async def test_tools_of_two_servers_are_listed_under_their_namespaces(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["alpha", "beta"]))
    transports = in_memory({"alpha": build_server("alpha"), "beta": build_server("beta")})
    async with gateway_client(config, transports=transports) as (_, client):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"alpha__echo", "beta__echo"} <= names
        result = await client.call_tool("beta__add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5}


@pytest.mark.anyio
async def test_a_stdio_upstream_is_reached_over_streamable_http(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": toy_stdio()})
    async with http_gateway(config) as (_, url), Client(f"{url}/mcp") as client:
        result = await client.call_tool("toy__echo", {"text": "hi"})
        assert result.content[0].text == "hi"  # type: ignore[union-attr]
