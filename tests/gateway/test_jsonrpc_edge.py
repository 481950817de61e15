"""Malformed JSON-RPC at `/mcp`: each gets HTTP 400 and a one-line error, in both eras, and the
gateway goes on serving well-formed requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.harness import http_gateway, in_memory, make_config, placeholder
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

HANDSHAKE = "2025-06-18"
STATELESS = "2026-07-28"
ERAS = ["legacy", STATELESS]
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
SUPPORTED = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
BAD_ID = "The id must be a string or an integer"
BAD_BODIES: dict[str, tuple[Any, str]] = {
    "id is an object": ({"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"}, BAD_ID),
    "id is an array": ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, BAD_ID),
    "id is a bool": ({"jsonrpc": "2.0", "id": True, "method": "ping"}, BAD_ID),
    "id is a float": ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, BAD_ID),
    "id is null": ({"jsonrpc": "2.0", "id": None, "method": "ping"}, BAD_ID),
    "batch": (
        [{"jsonrpc": "2.0", "id": 7, "method": "ping"}],
        "Batches are not supported: send one JSON-RPC message per request",
    ),
    "bare null": (None, "The body must be one JSON-RPC message object"),
    "no jsonrpc member": ({"id": 7, "method": "ping"}, 'The "jsonrpc" member must be "2.0"'),
    "jsonrpc 1.0": ({"jsonrpc": "1.0", "id": 7, "method": "ping"}, 'The "jsonrpc" member must be "2.0"'),
}


class Caller:
    """Raw HTTP to a gateway's `/mcp` in one era: the headers of its session (handshake era) or of
    a 2026-era request, and a tools/list that must still be answered."""

    def __init__(self, http: httpx2.AsyncClient, url: str, era: str, headers: dict[str, str]) -> None:
        self.http, self.url, self.era, self.headers = http, url, era, headers

    async def post(self, body: Any, **headers: str) -> httpx2.Response:
        return await self.http.post(self.url, content=json.dumps(body), headers={**self.headers, **headers})

    async def tools(self) -> set[str]:
        """The tool names a well-formed tools/list is answered with."""
        if self.era == STATELESS:
            body = {"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {"_meta": ENVELOPE}}
            response = await self.post(body, **{"Mcp-Method": "tools/list"})
        else:
            response = await self.post({"jsonrpc": "2.0", "id": 99, "method": "tools/list"})
        assert response.status_code == 200, response.text
        return {tool["name"] for tool in _message(response)["result"]["tools"]}


def _message(response: httpx2.Response) -> dict[str, Any]:
    """The one JSON-RPC message of a JSON or event-stream answer."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return dict(json.loads(data[-1]))
    return dict(response.json())


@asynccontextmanager
async def caller(tmp_path: Path, era: str) -> AsyncIterator[Caller]:
    """A raw caller of a gateway in front of the toy server; in the handshake era, in an initialized session."""
    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        if era == STATELESS:
            yield Caller(http, f"{url}/mcp", era, {**ACCEPT, "MCP-Protocol-Version": STATELESS})
            return
        opened = await http.post(f"{url}/mcp", json=INITIALIZE, headers=ACCEPT)
        assert opened.status_code == 200, opened.text
        headers = {**ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": HANDSHAKE}
        session = Caller(http, f"{url}/mcp", era, headers)
        initialized = await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202
        yield session


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_a_malformed_envelope_gets_400_and_a_one_line_invalid_request_then_serving_goes_on(
    tmp_path: Path, era: str, case: str
) -> None:
    body, message = BAD_BODIES[case]
    async with caller(tmp_path, era) as session:
        response = await session.post(body)
        assert (response.status_code, response.json()) == (
            400,
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}},
        )
        assert "toy__echo" in await session.tools()


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("params", [[1, 2], "tools", 5, True])
async def test_params_that_are_not_an_object_get_400_and_one_line_invalid_params_then_serving_goes_on(
    tmp_path: Path, era: str, params: Any
) -> None:
    async with caller(tmp_path, era) as session:
        response = await session.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
        assert (response.status_code, response.json()) == (
            400,
            {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": 'The "params" member must be an object'}},
        )
        assert "toy__echo" in await session.tools()


@pytest.mark.parametrize("era", ERAS)
async def test_a_body_with_a_string_that_is_not_unicode_gets_400_parse_error_then_serving_goes_on(
    tmp_path: Path, era: str
) -> None:
    # JSON's grammar lets a string escape half a surrogate pair; no UTF-8 text can hold one.
    params = b'{"name":"toy__echo","arguments":{"text":"a\\ud800"}}'
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + params + b"}"
    async with caller(tmp_path, era) as session:
        response = await session.http.post(session.url, content=call, headers=session.headers)
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == -32700
        assert error["message"].startswith("Parse error: the body is not JSON (unexpected end of hex escape")
        assert "toy__echo" in await session.tools()


async def test_a_second_initialize_on_a_live_session_is_refused_and_the_session_goes_on(tmp_path: Path) -> None:
    async with caller(tmp_path, "legacy") as session:
        again = {**INITIALIZE, "id": 2, "params": {**INITIALIZE["params"], "protocolVersion": "2024-11-05"}}
        response = await session.post(again)
        message = "Session already initialized: send initialize without an Mcp-Session-Id header to start a new session"
        assert (response.status_code, response.json()) == (
            400,
            {"jsonrpc": "2.0", "id": 2, "error": {"code": -32600, "message": message}},
        )
        assert "toy__echo" in await session.tools()


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("value", ["2099-01-01", "2025-06-18x", "v" * 10_000])
async def test_an_unsupported_protocol_version_header_is_named_with_the_supported_versions(
    tmp_path: Path, era: str, value: str
) -> None:
    shown = value if len(value) <= 100 else value[:99] + "…"
    async with caller(tmp_path, era) as session:
        response = await session.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, **{"MCP-Protocol-Version": value})
        message = f"Unsupported MCP-Protocol-Version header {shown!r}: supported versions are {', '.join(SUPPORTED)}"
        assert (response.status_code, response.json()["error"]) == (
            400,
            {"code": -32022, "message": message, "data": {"supported": SUPPORTED, "requested": shown}},
        )
        assert "toy__echo" in await session.tools()


@pytest.mark.parametrize("mode", ERAS)
async def test_a_10_kb_tool_name_is_cut_in_the_unknown_tool_answer(tmp_path: Path, mode: str) -> None:
    name = "n" * 10_240
    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        Client(f"{url}/mcp", mode=mode) as client,
    ):
        with pytest.raises(MCPError) as raised:
            await client.call_tool(name, {})
        assert raised.value.error.message == f"Unknown tool: {'n' * 99 + '…'!r}"
        assert (await client.call_tool("toy__echo", {"text": "still here"})).content[0].text == "still here"  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ERAS)
async def test_a_body_over_the_sdks_size_limit_gets_413_and_serving_goes_on(tmp_path: Path, era: str) -> None:
    async with caller(tmp_path, era) as session:
        padding = "p" * (4 * 1024 * 1024)
        response = await session.post({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"p": padding}})
        assert (response.status_code, response.text) == (413, "Request body too large")
        assert "toy__echo" in await session.tools()
