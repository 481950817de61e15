"""Plain calls to a stdio server go straight down its pipe, with the SDK session's semantics:
results held to the output schema, errors, cancellation of abandoned calls, a connection that ends."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from gateway.upstreams.directcalls import DirectCalls
from tests.support.harness import REPO, gateway_client, make_config, toy_stdio
from tests.support.waiting import Inbox, read_fifo

pytestmark = pytest.mark.anyio


def answers(cancelled: Path, **entry: Any) -> dict[str, Any]:
    """The config entry of `tests.support.answers` run as a stdio process."""
    args = ["-m", "tests.support.answers", "--cancelled", str(cancelled)]
    return {"command": sys.executable, "args": args, "cwd": str(REPO), **entry}


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_plain_calls_to_a_stdio_server_are_answered_and_held_to_the_output_schema(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"answers": answers(tmp_path / "cancelled")})
    async with gateway_client(config) as (_, client):
        echoed = await client.call_tool("answers__echo", {"text": "straight through"})
        assert not echoed.is_error and text_of(echoed) == "straight through"
        shaped = await client.call_tool("answers__shaped", {"n": 3})
        assert not shaped.is_error and shaped.structured_content == {"n": 3}
        broken = await client.call_tool("answers__shaped", {"n": "three"})
        assert broken.is_error and "Invalid structured content returned by tool shaped" in text_of(broken)


async def test_calls_that_ask_for_progress_take_the_session_and_are_held_to_the_output_schema_too(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path, {"answers": answers(tmp_path / "cancelled")})
    progressed: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        progressed.append(done)

    async with gateway_client(config) as (_, client):
        shaped = await client.call_tool("answers__shaped", {"n": 3}, progress_callback=progress)
        assert not shaped.is_error and shaped.structured_content == {"n": 3}
        broken = await client.call_tool("answers__shaped", {"n": "three"}, progress_callback=progress)
        assert broken.is_error and "Invalid structured content returned by tool shaped" in text_of(broken)


async def test_an_error_answer_of_a_stdio_server_reaches_the_caller_with_its_message(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"answers": answers(tmp_path / "cancelled")})
    async with gateway_client(config) as (_, client):
        try:
            said = text_of(await client.call_tool("answers__refuse", {}))
        except MCPError as error:
            said = error.error.message
        assert "Server 'answers' answered: refused on purpose" in said
        assert not (await client.call_tool("answers__echo", {"text": "still here"})).is_error


async def test_a_stdio_call_abandoned_at_its_deadline_is_cancelled_on_the_server(tmp_path: Path) -> None:
    cancelled = tmp_path / "cancelled"
    os.mkfifo(cancelled)
    config = make_config(tmp_path, {"answers": answers(cancelled, tools={"hang": {"timeout": 0.5}})})
    async with gateway_client(config) as (_, client):
        result = await client.call_tool("answers__hang", {})
        assert result.is_error and "did not finish within 0.5 s" in text_of(result)
        assert await read_fifo(cancelled, "the server's word that the call was cancelled") == "cancelled"
        assert text_of(await client.call_tool("answers__echo", {"text": "after"})) == "after"


async def test_progress_of_a_call_to_a_stdio_server_still_reaches_the_client(tmp_path: Path) -> None:
    seen: Inbox[float] = Inbox()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.add(progress)

    config = make_config(tmp_path, {"toy": toy_stdio()})
    async with gateway_client(config) as (_, client):
        result = await client.call_tool("toy__sleep", {"seconds": 0.05}, progress_callback=on_progress)
        assert text_of(result) == "slept 0.05"
        await seen.until(lambda: seen[-1:] == [9], "the last progress report")


def response(ident: object, **body: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, **body}).encode()


async def test_only_the_response_to_a_waiting_direct_call_is_taken_off_the_pipe() -> None:
    direct = DirectCalls()
    sent: Inbox[dict[str, Any]] = Inbox()

    async def send(line: bytes) -> None:
        sent.add(json.loads(line))

    direct.attach(send)
    outcome: list[dict[str, Any]] = []

    async def call() -> None:
        outcome.append(await direct.call("echo", {"text": "hi"}))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await sent.until(lambda: bool(sent), "the call sent down the pipe")
        ident = sent[0]["id"]
        assert sent[0]["method"] == "tools/call" and sent[0]["params"] == {"name": "echo", "arguments": {"text": "hi"}}
        # Not its own: the session's integer ids, a server's request, a malformed response.
        assert not direct.take(response(1, result={}))
        assert not direct.take(json.dumps({"jsonrpc": "2.0", "id": ident, "method": "ping"}).encode())
        assert not direct.take(response(ident, result="not an object"))
        assert direct.take(response(ident, result={"content": []}))
    assert outcome == [{"content": []}]
    assert not direct.take(response(ident, result={"content": []}))


async def test_a_direct_call_fails_as_closed_when_its_connection_ends() -> None:
    direct = DirectCalls()

    async def send(line: bytes) -> None:
        direct.close()

    direct.attach(send)
    with pytest.raises(MCPError) as failed:
        await direct.call("echo", {})
    assert failed.value.error.code == types.CONNECTION_CLOSED
    with pytest.raises(MCPError):
        await direct.call("echo", {})


async def test_a_direct_call_answered_after_a_notification_returns_once_the_session_took_it() -> None:
    direct = DirectCalls()
    sent: Inbox[dict[str, Any]] = Inbox()

    async def send(line: bytes) -> None:
        sent.add(json.loads(line))

    direct.attach(send)
    outcome: list[dict[str, Any]] = []

    async def call() -> None:
        outcome.append(await direct.call("echo", {"text": "hi"}))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await sent.until(lambda: bool(sent), "the call sent")
        # The server logged, then answered: the reader handed the session the log message first.
        direct.handed()
        assert direct.take(response(sent[0]["id"], result={"content": []}))
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        assert outcome == []
        direct.seen()
    assert outcome == [{"content": []}]
