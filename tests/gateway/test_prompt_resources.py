"""A prompt's embedded resources and resource links come back under the URIs a client reads them by
through the gateway, as a tool result's do."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from tests.support.faithful import build_server as faithful
from tests.support.harness import gateway_client, in_memory, make_config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_prompt_s_embedded_resource_and_link_read_back_through_the_gateway(tmp_path: Path, mode: str) -> None:
    config = make_config(tmp_path, {"faithful": {"command": "unused"}})
    async with gateway_client(config, transports=in_memory({"faithful": faithful()}), mode=mode) as (_, client):
        prompt = await client.get_prompt("faithful__briefing", {"topic": "tides"})
        embedded, link = prompt.messages[1].content, prompt.messages[2].content
        assert isinstance(embedded, types.EmbeddedResource) and isinstance(link, types.ResourceLink)
        again = await client.read_resource(embedded.resource.uri)
        linked = await client.read_resource(link.uri)
    assert embedded.resource.uri == "faithful+faithful://notes/tides"
    assert link.uri == "faithful+faithful://notes/tides-more"
    assert again.contents[0].text == "note about tides"  # type: ignore[union-attr]
    assert linked.contents[0].text == "note about tides-more"  # type: ignore[union-attr]
    assert prompt.messages[0].content == types.TextContent(text="Brief me on tides.")
