"""tools/call and tools/list of a known session answered in the POST's own task (the hot path): the
same answers as the SDK's way, streams where they carry something, cancellation kept."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from gateway.frontdoors import responsemode
from gateway.frontdoors.responsemode import HotPath
from tests.support.harness import http_gateway, in_memory, make_config, placeholder
from tests.support.rawhttp import RawSession, content_type, events
from tests.support.toy import build_server as toy
from tests.support.waiting import catalog_until

pytestmark = pytest.mark.anyio

REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {"name": "toy__echo", "arguments": {"text": "same"}}),
    ("tools/call", {"name": "toy__weather", "arguments": {"city": "Oslo"}}),
    ("tools/call", {"name": "toy__fail", "arguments": {"message": "it broke"}}),
    ("tools/call", {"name": "toy__nope", "arguments": {}}),
    ("tools/call", {"name": "toy__add", "arguments": {"a": "one", "b": 2}}),
    ("tools/call", {"arguments": {"text": "no name"}}),
    ("tools/call", {"name": "toy__echo", "arguments": {"text": "x"}, "_meta": {"note": 1}}),
    ("tools/list", {}),
    ("tools/list", {"cursor": "not a cursor"}),
]


class HotCalls:
    """Which request ids took the hot path: `HotPath.answer` wrapped, as nothing on the wire tells
    the two ways apart (that is the point), and the test must know the hot one ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ids: list[Any] = []
        self.entered = anyio.Event()
        original = HotPath.answer

        async def answer(path: HotPath, connection: Any, request: Any, message: Any, calls: Any) -> bytes:
            self.ids.append(message["id"])
            self.entered.set()
            return await original(path, connection, request, message, calls)

        monkeypatch.setattr(HotPath, "answer", answer)


@asynccontextmanager
async def served(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[httpx2.AsyncClient, str]]:
    config = make_config(tmp_path, placeholder(["toy"]), **settings)
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        yield http, f"{url}/mcp"


async def known_session(http: httpx2.AsyncClient, url: str) -> RawSession:
    """A session the gateway knows (from its notifications/initialized, and requests), so that its
    requests take the hot path."""
    session = RawSession(http, url)
    await session.open()
    await session.post("ping", {})
    await session.post("resources/list", {})
    return session


async def test_a_known_session_gets_the_answers_the_sdk_s_way_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hot = HotCalls(monkeypatch)
    async with served(tmp_path) as (http, url):
        sdk_answers, hot_answers = [], []
        with pytest.MonkeyPatch.context() as sdk_way:
            # A session whose connection the hot path cannot find is served through the SDK's dispatcher.
            sdk_way.setattr(HotPath, "connection", lambda path, session_id: None)
            for index, (method, params) in enumerate(REQUESTS):
                fresh = RawSession(http, url)
                await fresh.open()
                sdk_answers.append(await fresh.post(method, params, request_id=100 + index))
        assert hot.ids == []
        known = await known_session(http, url)
        for index, (method, params) in enumerate(REQUESTS):
            hot_answers.append(await known.post(method, params, request_id=100 + index))
    assert hot.ids == [100 + index for index in range(len(REQUESTS))]
    for (method, params), sdk, fast in zip(REQUESTS, sdk_answers, hot_answers, strict=True):
        assert (fast.status_code, content_type(fast)) == (sdk.status_code, content_type(sdk)), (method, params)
        assert fast.json() == sdk.json(), (method, params)
    outcomes = [answer.json() for answer in hot_answers]
    assert outcomes[0]["result"]["content"][0]["text"] == "same"
    assert outcomes[1]["result"]["structuredContent"]["city"] == "Oslo"
    assert outcomes[2]["result"]["isError"] is True
    assert outcomes[3]["error"]["code"] == -32602 and "toy__nope" in outcomes[3]["error"]["message"]
    assert outcomes[4]["result"]["isError"] is True
    assert outcomes[5]["error"] == {"code": -32602, "message": "Invalid request parameters", "data": ""}
    assert "toy__echo" in {tool["name"] for tool in outcomes[7]["result"]["tools"]}
    assert outcomes[8]["error"]["code"] == -32602


async def test_a_call_that_needs_a_stream_still_gets_one_on_a_known_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hot = HotCalls(monkeypatch)
    async with served(tmp_path) as (http, url):
        session = await known_session(http, url)
        params = {"name": "toy__sleep", "arguments": {"seconds": 0.1}, "_meta": {"progressToken": "p1"}}
        answer = await session.post("tools/call", params, request_id=7)
    assert hot.ids == []
    assert content_type(answer) == "text/event-stream"
    messages = events(answer)
    assert any(message.get("method") == "notifications/progress" for message in messages)
    assert messages[-1]["id"] == 7 and not messages[-1]["result"].get("isError")


async def test_with_json_bodies_configured_even_a_progress_call_takes_the_hot_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hot = HotCalls(monkeypatch)
    async with served(tmp_path, http_json_responses=True) as (http, url):
        session = await known_session(http, url)
        params = {"name": "toy__sleep", "arguments": {"seconds": 0.05}, "_meta": {"progressToken": "p1"}}
        answer = await session.post("tools/call", params, request_id=3)
    assert hot.ids == [3]
    assert content_type(answer) == "application/json"
    assert answer.json()["id"] == 3 and not answer.json()["result"].get("isError")


async def test_a_session_that_is_not_known_is_not_found(tmp_path: Path) -> None:
    async with served(tmp_path) as (http, url):
        session = await known_session(http, url)
        headers = {**dict(http.headers), "Accept": "application/json, text/event-stream", "mcp-session-id": "f" * 32}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "toy__echo"}}
        answer = await http.post(url, json=body, headers=headers)
        still = await session.post("tools/call", {"name": "toy__echo", "arguments": {"text": "mine"}})
    assert answer.status_code == 404
    assert still.json()["result"]["content"][0]["text"] == "mine"


async def interrupted_sleep(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request_id: int,
    interrupt: Callable[[httpx2.AsyncClient, str, RawSession], Awaitable[Any]],
) -> tuple[httpx2.Response, Any]:
    """A 30 s sleep called on the hot path of a known session, `interrupt`ed once it runs there: the
    call's answer and what `interrupt` returned."""
    hot = HotCalls(monkeypatch)
    answers: list[httpx2.Response] = []
    async with served(tmp_path) as (http, url):
        session = await known_session(http, url)

        async def slow() -> None:
            arguments = {"name": "toy__sleep", "arguments": {"seconds": 30}}
            answers.append(await session.post("tools/call", arguments, request_id))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(slow)
                await hot.entered.wait()
                interrupted = await interrupt(http, url, session)
    (answer,) = answers
    return answer, interrupted


async def test_a_hot_call_the_client_cancels_is_answered_as_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def cancel(http: httpx2.AsyncClient, url: str, session: RawSession) -> None:
        await session.notify("notifications/cancelled", {"requestId": 9, "reason": "no longer needed"})

    answer, _ = await interrupted_sleep(tmp_path, monkeypatch, 9, cancel)
    assert answer.json() == {"jsonrpc": "2.0", "id": 9, "error": {"code": -32800, "message": "Request cancelled"}}


async def test_a_hot_call_of_a_session_the_client_ends_is_answered_as_the_sdk_answers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def end(http: httpx2.AsyncClient, url: str, session: RawSession) -> httpx2.Response:
        return await http.delete(url, headers={"mcp-session-id": session.session_id})

    answer, ended = await interrupted_sleep(tmp_path, monkeypatch, 4, end)
    assert ended.status_code == 200
    assert answer.status_code == 500
    assert answer.json()["error"]["message"] == "Session terminated before the request completed"


async def test_a_hot_call_outlasting_the_keepalive_interval_becomes_a_kept_alive_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short interval stands in for the 15 s a client's read timeout is measured against.
    monkeypatch.setattr(responsemode, "KEEPALIVE_INTERVAL", 0.05)
    hot = HotCalls(monkeypatch)
    async with served(tmp_path) as (http, url):
        session = await known_session(http, url)
        answer = await session.post("tools/call", {"name": "toy__sleep", "arguments": {"seconds": 0.5}}, 5)
        quick = await session.post("tools/call", {"name": "toy__echo", "arguments": {"text": "quick"}}, 6)
    assert hot.ids == [5, 6]
    assert content_type(answer) == "text/event-stream"
    assert ": ping" in answer.text
    (message,) = events(answer)
    assert message["id"] == 5 and not message["result"].get("isError")
    assert content_type(quick) == "application/json"


async def test_a_hot_listing_shows_a_tool_added_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hot = HotCalls(monkeypatch)
    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url),
        httpx2.AsyncClient() as http,
    ):
        session = await known_session(http, f"{url}/mcp")
        before = (await session.post("tools/list", {})).json()["result"]["tools"]
        await session.post("tools/call", {"name": "toy__grow", "arguments": {"tool_name": "sprout"}})
        await catalog_until(gateway, lambda: gateway.catalog.tool("toy__sprout") is not None, "toy__sprout")
        after = (await session.post("tools/list", {})).json()["result"]["tools"]
    assert "toy__sprout" not in {tool["name"] for tool in before}
    assert "toy__sprout" in {tool["name"] for tool in after}
    assert len(hot.ids) >= 3
