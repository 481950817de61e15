"""`max_result_chars` holds a call's structured content to the same budget as its text, through a real
gateway: the two still agree, the result says what was cut, and the client's check of the tool's
output schema still passes."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest

from gateway.pipeline.shaping import SHAPED_KEY, json_size
from tests.support.faithful import build_server as faithful
from tests.support.harness import gateway_client, in_memory, make_config

pytestmark = pytest.mark.anyio
LIMIT = 8000


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_structured_result_over_the_limit_is_cut_with_its_text_and_they_agree(
    tmp_path: Path, mode: str
) -> None:
    config = make_config(tmp_path, {"faithful": {"command": "unused"}}, max_result_chars=LIMIT)
    async with gateway_client(config, transports=in_memory({"faithful": faithful()}), mode=mode) as (_, client):
        result = await client.call_tool("faithful__report", {"rows": 400, "note_chars": 6000})
    text, note = result.content[0], result.content[-1]
    assert isinstance(text, types.TextContent) and isinstance(note, types.TextContent)
    structured = result.structured_content
    assert structured is not None and json.loads(text.text) == structured
    assert len(text.text) <= LIMIT and json_size(structured) <= LIMIT
    rows = structured["rows"]
    assert rows[0]["index"] == 0 and rows[-1]["index"] == 399 and len(rows) < 400
    assert note.text.startswith(f"[structured content cut to the {LIMIT:,}-character limit: ")
    said = (result.meta or {})[SHAPED_KEY]["structuredContent"]
    assert said["kept"] == json_size(structured) and said["chars"] > 20_000


async def test_a_structure_its_output_schema_needs_whole_is_kept_whole_and_the_call_succeeds(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"faithful": {"command": "unused"}}, max_result_chars=LIMIT)
    async with gateway_client(config, transports=in_memory({"faithful": faithful()})) as (_, client):
        # The SDK client checks the result against the listed output schema (minItems 1000): it passes.
        result = await client.call_tool("faithful__readings", {})
    assert not result.is_error
    assert result.structured_content is not None and len(result.structured_content["values"]) == 1000
    note = result.content[-1]
    assert isinstance(note, types.TextContent) and "kept whole" in note.text and "output schema" in note.text
    text = result.content[0]
    assert isinstance(text, types.TextContent) and len(text.text) < 9000
