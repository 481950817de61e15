"""Tests for the echo server."""

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from servers.echo import build_server

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.anyio
async def test_echo_returns_the_text_unchanged() -> None:
    async with Client(build_server()) as client:
        result = await client.call_tool("echo", {"text": "héllo\nworld"})
    assert not result.is_error
    assert result.content[0].text == "héllo\nworld"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_echo_is_annotated_read_only_and_idempotent() -> None:
    async with Client(build_server()) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.name == "echo"
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is True
    assert tool.annotations.idempotent_hint is True


@pytest.mark.anyio
async def test_echo_server_answers_over_stdio_as_a_subprocess() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "servers.echo"], cwd=REPO)
    with anyio.fail_after(30):
        async with Client(params) as client:
            result = await client.call_tool("echo", {"text": "over stdio"})
    assert result.content[0].text == "over stdio"  # type: ignore[union-attr]
