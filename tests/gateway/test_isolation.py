"""Callers are kept apart: each has its own workspace on a session-scoped server, and a session
belongs to the caller who opened it, whatever session id another caller presents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from gateway.config import GatewayConfig
from tests.support.access import KEYS, access_config, http_client
from tests.support.harness import REPO, http_gateway, in_memory
from tests.support.skills import text
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOL = "2025-06-18"
ADA, IAN = KEYS["admin"], KEYS["intern"]


def _files_config(tmp_path: Path) -> GatewayConfig:
    files = {
        "command": sys.executable,
        "args": ["-m", "servers.files", "--root", "${WORKSPACE}"],
        "cwd": str(REPO),
        "scope": "session",
        # Writes stay inside the session's own workspace; medium risk keeps confirmation out of the way.
        "risk": "medium",
    }
    return access_config(tmp_path, {"files": files}, roles={role: {"allow": ["*"]} for role in KEYS})


async def test_two_callers_cannot_reach_each_others_files(tmp_path: Path) -> None:
    # One caller per era: a handshake-era session and a stateless caller each get their own workspace.
    async with (
        http_gateway(_files_config(tmp_path)) as (_, url),
        http_client(url, ADA, mode="legacy") as ada,
        http_client(url, IAN, mode="2026-07-28") as ian,
    ):
        with anyio.fail_after(30):
            written = await ada.call_tool("files__write_file", {"path": "secret.txt", "content": "ada's"})
            assert not written.is_error, text(written)
            mine = await ada.call_tool("files__read_file", {"path": "secret.txt"})
            theirs = await ian.call_tool("files__read_file", {"path": "secret.txt"})
            escape = await ian.call_tool("files__read_file", {"path": "../" * 6 + "secret.txt"})
            listing = await ian.call_tool("files__list_directory", {})
            own = await ian.call_tool("files__write_file", {"path": "secret.txt", "content": "ian's"})
            still_mine = await ada.call_tool("files__read_file", {"path": "secret.txt"})
        # While the sessions live: a size-limited workspace is unmounted when its session ends.
        on_disk = list((tmp_path / "data" / "workspaces").rglob("secret.txt"))
    assert "ada's" in text(mine)
    assert theirs.is_error and escape.is_error
    assert "secret.txt" not in text(listing)
    assert not own.is_error and "ada's" in text(still_mine)
    assert len(on_disk) == 2


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response, whether a JSON body or an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line.removeprefix("data:").strip() for line in response.text.splitlines()]
        return [json.loads(line) for line in lines if line.startswith("{")]
    return [response.json()] if response.content else []


class RawCaller:
    """One caller speaking the handshake-era protocol by hand, to present any session id it likes."""

    def __init__(self, http: httpx2.AsyncClient, url: str, key: str) -> None:
        self._http, self._url, self._key = http, f"{url}/mcp", key
        self._id = 0

    def _headers(self, session: str | None) -> dict[str, str]:
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {self._key}", "MCP-Protocol-Version": PROTOCOL}
        return headers | ({"Mcp-Session-Id": session} if session else {})

    async def initialize(self) -> str:
        """Open a session; its id."""
        params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        response = await self.post(None, "initialize", params)
        assert response.status_code == 200
        session: str = response.headers["mcp-session-id"]
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self._http.post(self._url, json=notice, headers=self._headers(session))).status_code == 202
        return session

    async def post(self, session: str | None, method: str, params: dict[str, Any]) -> httpx2.Response:
        """Send one request in `session`."""
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        return await self._http.post(self._url, json=body, headers=self._headers(session))

    async def delete(self, session: str) -> httpx2.Response:
        """Ask to end `session`."""
        return await self._http.delete(self._url, headers=self._headers(session))

    async def listen(self, session: str) -> int:
        """Open `session`'s event stream; the status it answers with."""
        headers = {**self._headers(session), "Accept": "text/event-stream"}
        async with self._http.stream("GET", self._url, headers=headers) as response:
            return response.status_code


async def test_a_caller_presenting_another_callers_session_id_does_not_get_that_session(tmp_path: Path) -> None:
    roles = {role: {"allow": ["*"]} for role in KEYS}
    # The toy as it comes: increment is a medium-risk tool that runs without confirmation.
    config = access_config(tmp_path, {"toy": {"command": "unused"}}, roles=roles)
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        ada, ian = RawCaller(http, url, ADA), RawCaller(http, url, IAN)
        session = await ada.initialize()
        count = {"name": "toy__increment", "arguments": {}}
        assert "error" not in _messages(await ada.post(session, "tools/call", count))[0]
        stolen = await ian.post(session, "tools/call", count)
        unknown = await ian.post("0" * 32, "tools/call", count)
        hijacked_listing = await ian.post(session, "tools/list", {})
        with anyio.fail_after(10):
            stream = await ian.listen(session)
        ended = await ian.delete(session)
        still_mine = _messages(await ada.post(session, "tools/call", count))
        callers = {context.caller for context in gateway.sessions.live()}
    # Answered exactly as a session that does not exist, whatever the method.
    assert unknown.status_code == 404
    assert stream == 404
    for response in (stolen, hijacked_listing, ended):
        assert (response.status_code, response.text) == (404, unknown.text)
    # Ian's call never ran: Ada's second increment is the second.
    assert still_mine[0]["result"]["content"][0]["text"] == "2"
    assert callers == {"ada"}
