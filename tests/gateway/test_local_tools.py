"""Local Python tools from the configuration, listed and called through a real gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from gateway.config.model import GatewayConfig
from tests.support import localfns
from tests.support.harness import gateway_client, make_config

pytestmark = pytest.mark.anyio

LOCAL_TOOLS: list[Any] = [
    "tests.support.localfns:greet",
    "tests.support.localfns",
    {"ref": "tests.support.localfns:divide", "namespace": "maths"},
]


def local_config(tmp_path: Path, **settings: Any) -> GatewayConfig:
    """A gateway with no upstream servers, only the local tools of `tests.support.localfns`."""
    return make_config(tmp_path, {}, local_tools=LOCAL_TOOLS, **settings)


def text_of(result: types.CallToolResult) -> str:
    """Every text block of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_local_tools_are_listed_under_their_namespace_with_schemas_from_signature_and_docstring(
    tmp_path: Path,
) -> None:
    async with gateway_client(local_config(tmp_path)) as (_, client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {
        "local__greet",
        "local__word_count",
        "local__explode",
        "local__nap",
        "local__process_id",
        "local__read_setting",
        "maths__divide",
    }
    greet = tools["local__greet"]
    assert greet.description == "Greet someone by name."
    assert greet.input_schema == {
        "title": "greetArguments",
        "type": "object",
        "properties": {
            "name": {"title": "Name", "type": "string", "description": "who to greet"},
            "punctuation": {
                "title": "Punctuation",
                "type": "string",
                "enum": ["!", "."],
                "default": ".",
                "description": "how the greeting ends",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert tools["maths__divide"].input_schema["properties"]["denominator"] == {
        "title": "Denominator",
        "type": "number",
        "description": "the number to divide by",
    }
    word_count = tools["local__word_count"]
    assert word_count.annotations is not None and word_count.annotations.read_only_hint
    assert tools["local__explode"].annotations is None


async def test_local_tools_return_text_and_structured_content(tmp_path: Path) -> None:
    async with gateway_client(local_config(tmp_path)) as (_, client):
        greeting = await client.call_tool("local__greet", {"name": "Ada", "punctuation": "!"})
        counted = await client.call_tool("local__word_count", {"text": "one two three"})
        quotient = await client.call_tool("maths__divide", {"numerator": 7, "denominator": 2})
    assert text_of(greeting) == "Hello, Ada!"
    assert counted.structured_content == {"words": 3}
    assert text_of(quotient) == "3.5"


async def test_bad_arguments_to_a_local_tool_are_refused_before_it_runs(tmp_path: Path) -> None:
    async with gateway_client(local_config(tmp_path)) as (gateway, client):
        result = await client.call_tool("local__greet", {"name": 5, "punctuation": "?", "mood": "happy"})
        rows = await gateway.audit.recent(limit=1)
    assert result.is_error
    message = text_of(result)
    assert "$.name: 5 is not of type 'string'" in message
    assert "$.punctuation: '?' is not one of ['!', '.']" in message
    assert "unexpected argument 'mood'; the tool takes name, punctuation" in message
    assert rows[0].outcome == "invalid_arguments"


async def test_an_exception_in_a_local_tool_is_an_error_result_without_traceback(tmp_path: Path) -> None:
    async with gateway_client(local_config(tmp_path)) as (gateway, client):
        exploded = await client.call_tool("local__explode", {"message": "the disk is on fire"})
        by_zero = await client.call_tool("maths__divide", {"numerator": 1, "denominator": 0})
        rows = await gateway.audit.recent(limit=2)
    assert exploded.is_error and by_zero.is_error
    assert text_of(exploded).startswith("Tool 'local__explode' failed: RuntimeError: the disk is on fire\nHint: ")
    assert "ZeroDivisionError" in text_of(by_zero)
    for result in (exploded, by_zero):
        assert "Traceback" not in text_of(result)
    assert [row.outcome for row in rows] == ["error", "error"]


async def test_a_local_tool_that_ignores_its_deadline_is_abandoned_and_the_gateway_keeps_serving(
    tmp_path: Path,
) -> None:
    async with gateway_client(local_config(tmp_path, call_timeout=0.2)) as (_, client):
        with anyio.fail_after(5):
            slow = await client.call_tool("local__nap", {"seconds": 1.0})
            quick = await client.call_tool("local__greet", {"name": "Bo"})
    assert slow.is_error
    assert "did not finish within 0.2 s" in text_of(slow)
    assert text_of(quick) == "Hello, Bo."


async def test_an_os_error_raised_by_a_read_only_local_tool_is_its_failure_and_is_not_retried(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "missing.ini")
    async with gateway_client(local_config(tmp_path, retries=3)) as (_, client):
        result = await client.call_tool("local__read_setting", {"path": missing})
    assert result.is_error
    assert text_of(result).startswith("Tool 'local__read_setting' failed: FileNotFoundError:")
    assert "unreachable" not in text_of(result)
    assert localfns.READS.count(missing) == 1


async def test_a_local_tools_entry_gives_its_tools_its_timeout_layer_and_tags(tmp_path: Path) -> None:
    entry = {"ref": "tests.support.localfns", "timeout": 0.2, "layer": "extended", "tags": ["slow"]}
    config = make_config(tmp_path, {}, local_tools=[entry], call_timeout=30)
    async with gateway_client(config) as (gateway, client):
        record = gateway.catalog.tool("local__nap")
        with anyio.fail_after(5):
            result = await client.call_tool("local__nap", {"seconds": 1.0})
    assert record is not None
    assert (record.layer, record.tags) == ("extended", frozenset({"slow"}))
    assert result.is_error
    assert "did not finish within 0.2 s" in text_of(result)
