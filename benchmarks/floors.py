"""The floors the benchmarks measure the gateway against: bare ASGI apps on uvicorn, the gateway's
server, that do only what no gateway on this stack can skip. Each answers the handshake itself
(handshake era only), 202 to a notification and 405 to anything but a POST.

- `relay` (gateway_latency's floor per call): passes each request to one `servers.echo` over its
  stdio pipe, under an id of its own, and the answer back. No SDK layer, catalog, validation,
  roles, audit or result shaping.
- `pages` (catalog_scale's floor for a full listing): answers `tools/list` from a JSON file of
  pages (result JSON by cursor, '' for the first), each held as bytes and wrapped in the
  request's id by the gateway's own `result_body`.

`python -m benchmarks.floors relay PORT` or `python -m benchmarks.floors pages PORT PAGES` serves
one at http://127.0.0.1:PORT/mcp.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import uvicorn

from benchmarks.gateway_latency import REPO
from gateway.frontdoors.responsemode import result_body

Respond = Callable[[dict[str, Any]], Awaitable[bytes]]
"""A request (never `initialize`) to its encoded JSON-RPC answer."""
HEADERS = [(b"content-type", b"application/json"), (b"mcp-session-id", b"floor")]


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

    async def respond(self, request: dict[str, Any]) -> bytes:
        """`forward`, encoded."""
        return json.dumps(await self.forward(request)).encode()

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


def pages_from(path: Path) -> Respond:
    """Answers `tools/list` with the page of the request's cursor, from the pages stored at `path`."""
    pages: dict[str, bytes] = {
        cursor: page.encode() for cursor, page in json.loads(path.read_text(encoding="utf-8")).items()
    }

    async def respond(request: dict[str, Any]) -> bytes:
        page = pages[(request.get("params") or {}).get("cursor") or ""]
        return result_body(request["id"], page)

    return respond


def app(respond: Respond, startup: Callable[[], Awaitable[None]] | None = None) -> Any:
    """The ASGI app: lifespan runs `startup`; a POST is answered locally (handshake, notification) or by `respond`."""

    async def serve(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            if startup is not None:
                await startup()
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
        elif request["method"] == "initialize":
            result = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "floor", "version": "0"},
            }
            await _answer(send, 200, json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode())
        else:
            await _answer(send, 200, await respond(request))

    return serve


async def _answer(send: Any, status: int, body: bytes) -> None:
    headers = [*HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the floor named on the command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floors", description=__doc__)
    floors = parser.add_subparsers(dest="floor", required=True)
    floors.add_parser("relay", help="the echo server behind one stdio hop").add_argument("port", type=int)
    pages = floors.add_parser("pages", help="a full listing's pages from memory")
    pages.add_argument("port", type=int)
    pages.add_argument("pages", type=Path, help="JSON file: result JSON by cursor ('' for the first page)")
    args = parser.parse_args(argv)
    if args.floor == "relay":
        relay = Relay()
        served = app(relay.respond, relay.start)
    else:
        served = app(pages_from(args.pages))
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning", ws="none", access_log=False)


if __name__ == "__main__":
    main()
