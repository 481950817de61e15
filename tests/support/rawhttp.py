"""One MCP session spoken as plain HTTP, so that each answer's status, content type and body can be seen."""

from __future__ import annotations

import json
from typing import Any

import httpx2

VERSION = "2025-11-25"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class RawSession:
    """A handshake-era session over plain HTTP: JSON-RPC bodies out, whole HTTP answers back."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url
        self._headers = dict(HEADERS)
        self._next_id = 0

    @property
    def session_id(self) -> str:
        """The session's id, once opened."""
        return self._headers["mcp-session-id"]

    async def open(self, capabilities: dict[str, Any] | None = None) -> None:
        """Initialize with `capabilities` (none by default) and confirm it."""
        params = {"protocolVersion": VERSION, "capabilities": capabilities or {}, "clientInfo": {"name": "raw"}}
        answer = await self.post("initialize", params)
        self._headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        self._headers["MCP-Protocol-Version"] = VERSION
        await self.notify("notifications/initialized")

    async def post(self, method: str, params: dict[str, Any], request_id: int | None = None) -> httpx2.Response:
        """Send one request (numbered in turn unless `request_id` is given) and read its whole answer."""
        self._next_id += 1
        body = {"jsonrpc": "2.0", "id": self._next_id if request_id is None else request_id, "method": method}
        body["params"] = params
        return await self._http.post(self._url, headers=self._headers, json=body, timeout=30)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> httpx2.Response:
        """Send one notification."""
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        return await self._http.post(self._url, headers=self._headers, json=body, timeout=30)


def content_type(answer: httpx2.Response) -> str:
    """An answer's media type, without parameters."""
    return answer.headers["content-type"].split(";")[0]


def events(answer: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an event-stream answer, in order."""
    return [json.loads(line[len("data:") :]) for line in answer.text.splitlines() if line.startswith("data:")]
