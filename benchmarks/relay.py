"""The least a gateway on this stack adds to a call: a bare ASGI app on uvicorn that relays each
JSON-RPC request to one `servers.echo` over stdio and its answer back, with nothing in between (no
SDK layers, catalog, validation, roles, audit or result shaping). It answers the handshake itself
and speaks the handshake era only.

`python -m benchmarks.relay PORT` serves it at http://127.0.0.1:PORT/mcp; `gateway_latency`
measures it beside the gateway as the floor.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from typing import Any

import uvicorn

from benchmarks.gateway_latency import REPO

Scope = dict[str, Any]
Receive = Any
Send = Any
HEADERS = [(b"content-type", b"application/json"), (b"mcp-session-id", b"relay")]


class Relay:
    """One echo server over stdio, each request written to it under an id of the relay's own."""

    def __init__(self) -> None:
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the echo server and complete its handshake."""
        pipe = asyncio.subprocess.PIPE
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "servers.echo", cwd=REPO, stdin=pipe, stdout=pipe
        )
        self._reader = asyncio.get_running_loop().create_task(self._read())
        client = {"name": "relay", "version": "0"}
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        await self.forward({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def forward(self, request: dict[str, Any]) -> dict[str, Any]:
        """`request` answered by the echo server, under its own id."""
        own, relayed = request["id"], next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        self._pending[relayed] = answer
        self._write({**request, "id": relayed})
        return {**await answer, "id": own}

    def _write(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(message).encode() + b"\n")

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        while line := await self._process.stdout.readline():
            message = json.loads(line)
            answer = self._pending.pop(message.get("id"), None)
            if answer is not None:
                answer.set_result(message)


relay = Relay()


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Lifespan starts the echo server; a POST is answered locally (handshake, notifications) or relayed."""
    if scope["type"] == "lifespan":
        await receive()
        await relay.start()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    body, more = b"", True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    if scope["method"] != "POST":
        await _answer(send, 405, b"")
        return
    request = json.loads(body)
    if "id" not in request:
        await _answer(send, 202, b"")
        return
    if request["method"] == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "relay", "version": "0"},
        }
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    else:
        reply = await relay.forward(request)
    await _answer(send, 200, json.dumps(reply).encode())


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [*HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", ws="none", access_log=False)
