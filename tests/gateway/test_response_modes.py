"""A handshake-era request over HTTP gets an event stream only when one can carry something."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp import Client

from gateway.frontdoors import responsemode
from gateway.frontdoors.responsemode import needs_stream
from tests.support.harness import http_gateway, in_memory, make_config, placeholder
from tests.support.rawhttp import RawSession, content_type, events
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio


async def test_a_call_without_a_progress_token_is_answered_with_a_json_body(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        session = RawSession(http, f"{url}/mcp")
        await session.open()
        answer = await session.post("tools/call", {"name": "toy__echo", "arguments": {"text": "plain"}})
        listing = await session.post("tools/list", {})
    assert answer.status_code == 200
    assert content_type(answer) == "application/json"
    assert answer.json()["result"]["content"][0]["text"] == "plain"
    assert content_type(listing) == "application/json"
    assert "toy__echo" in {tool["name"] for tool in listing.json()["result"]["tools"]}


async def test_a_call_with_a_progress_token_gets_an_event_stream_with_its_progress(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        session = RawSession(http, f"{url}/mcp")
        await session.open()
        params = {"name": "toy__sleep", "arguments": {"seconds": 0.1}, "_meta": {"progressToken": "p1"}}
        answer = await session.post("tools/call", params)
    assert content_type(answer) == "text/event-stream"
    messages = events(answer)
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert progress and all(m["params"]["progressToken"] == "p1" for m in progress)
    assert "result" in messages[-1] and not messages[-1]["result"].get("isError")


@pytest.mark.parametrize("capability", ["elicitation", "sampling", "roots"])
async def test_a_client_that_can_be_asked_something_gets_event_streams(tmp_path: Path, capability: str) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        session = RawSession(http, f"{url}/mcp")
        await session.open({capability: {}})
        answer = await session.post("tools/call", {"name": "toy__echo", "arguments": {"text": "askable"}})
    assert content_type(answer) == "text/event-stream"
    assert events(answer)[-1]["result"]["content"][0]["text"] == "askable"


async def test_a_client_that_asked_for_log_messages_gets_event_streams(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        session = RawSession(http, f"{url}/mcp")
        await session.open()
        before = await session.post("tools/call", {"name": "toy__echo", "arguments": {"text": "one"}})
        await session.post("logging/setLevel", {"level": "info"})
        after = await session.post("tools/call", {"name": "toy__echo", "arguments": {"text": "two"}})
    assert content_type(before) == "application/json"
    assert content_type(after) == "text/event-stream"


async def test_the_sdk_client_gets_its_answers_either_way(tmp_path: Path) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        Client(f"{url}/mcp", mode="legacy") as client,
    ):
        plain = await client.call_tool("toy__echo", {"text": "json"})
        streamed = await client.call_tool("toy__sleep", {"seconds": 0.05}, progress_callback=on_progress)
        again = await client.call_tool("toy__echo", {"text": "json again"})
    assert [plain.is_error, streamed.is_error, again.is_error] == [False, False, False]
    assert plain.content[0].text == "json"  # type: ignore[union-attr]
    assert seen and seen[0] == 0


def test_only_progress_an_askable_client_or_wanted_logs_call_for_a_stream() -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    with_token = {**call, "params": {"name": "t", "_meta": {"progressToken": 7}}}
    assert not needs_stream(call, askable=False, logs_wanted=False)
    assert needs_stream(with_token, askable=False, logs_wanted=False)
    assert needs_stream(call, askable=True, logs_wanted=False)
    assert needs_stream(call, askable=False, logs_wanted=True)
    assert not needs_stream({**call, "params": {"_meta": {"progressToken": None}}}, askable=False, logs_wanted=False)


async def test_a_call_outlasting_the_keepalive_interval_becomes_a_kept_alive_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short interval stands in for the 15 s a client's read timeout is measured against.
    monkeypatch.setattr(responsemode, "KEEPALIVE_INTERVAL", 0.05)
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        session = RawSession(http, f"{url}/mcp")
        await session.open()
        answer = await session.post("tools/call", {"name": "toy__sleep", "arguments": {"seconds": 0.5}})
        quick = await session.post("tools/call", {"name": "toy__echo", "arguments": {"text": "quick"}})
    assert content_type(answer) == "text/event-stream"
    assert ": ping" in answer.text
    (message,) = events(answer)
    assert not message["result"].get("isError") and message["id"] == 2
    assert content_type(quick) == "application/json"
