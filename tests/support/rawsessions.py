"""Handshake-era HTTP sessions driven with raw JSON-RPC requests, where the session itself is the subject."""

from __future__ import annotations

import httpx2

VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
MCP_HEADERS = {"Accept": ACCEPT, "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "limits", "version": "1"}},
}


def headers(key: str | None, session: str | None = None) -> dict[str, str]:
    """The headers of a request of the caller holding `key` (None: anonymous), in `session` if given."""
    found = dict(MCP_HEADERS)
    if key is not None:
        found["Authorization"] = f"Bearer {key}"
    if session is not None:
        found |= {"Mcp-Session-Id": session, "Mcp-Protocol-Version": VERSION}
    return found


async def open_raw(http: httpx2.AsyncClient, url: str, key: str | None) -> httpx2.Response:
    """The answer to an `initialize` opening a session."""
    return await http.post(url, json=INITIALIZE, headers=headers(key))


async def raw_session(http: httpx2.AsyncClient, url: str, key: str | None) -> str:
    """A new initialized session of the caller holding `key`, with its gateway state created."""
    response = await open_raw(http, url, key)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers(key, session))).status_code == 202
    assert await raw_status(http, url, key, session, "tools/list") == 200
    return session


async def raw_status(http: httpx2.AsyncClient, url: str, key: str | None, session: str, method: str = "ping") -> int:
    """The HTTP status of one request in `session` (404: the session does not exist)."""
    response = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": method}, headers=headers(key, session))
    return response.status_code
