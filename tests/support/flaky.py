"""An in-memory upstream connection that drops, once per tool, when chosen tools are called.

`DroppingLink(server, drop={"echo"})` is a transport factory for the gateway: the first
`tools/call` of each tool in `drop` is swallowed and the connection is ended at once, as when
a server process dies mid-call; the gateway then reconnects through the same factory. Every
`tools/call` the gateway sends is noted in `attempts`, dropped or not, so a test can count
how often the gateway tried a tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage


class DroppingLink:
    """A transport factory whose connection drops on the first call of each tool in `drop`."""

    def __init__(self, server: MCPServer, drop: set[str]) -> None:
        self._server = server
        self._pending_drops = set(drop)
        self.attempts: list[str] = []

    def __call__(self) -> Any:
        """A fresh connection to the server (the gateway calls this on every (re)connect)."""
        return self._connect()

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[tuple[Any, Any]]:
        async with InMemoryTransport(self._server) as (inner_read, inner_write):
            relay_send, relay_read = anyio.create_memory_object_stream[Any](16)

            async def pump() -> None:
                try:
                    async for item in inner_read:
                        await relay_send.send(item)
                except anyio.ClosedResourceError:
                    pass

            with relay_send, relay_read:
                async with anyio.create_task_group() as group:
                    group.start_soon(pump)
                    try:
                        yield relay_read, _Writer(self, inner_write, relay_send)
                    finally:
                        group.cancel_scope.cancel()

    def should_drop(self, message: SessionMessage) -> bool:
        """Note a tools/call and say whether this one ends the connection."""
        request = message.message
        if not isinstance(request, types.JSONRPCRequest) or request.method != "tools/call":
            return False
        name = str((request.params or {}).get("name"))
        self.attempts.append(name)
        if name in self._pending_drops:
            self._pending_drops.discard(name)
            return True
        return False


class _Writer:
    """The client's write end: forwards messages, or ends the connection instead of sending one."""

    def __init__(self, link: DroppingLink, inner: Any, relay: MemoryObjectSendStream[Any]) -> None:
        self._link = link
        self._inner = inner
        self._relay = relay

    async def send(self, message: SessionMessage) -> None:
        if self._link.should_drop(message):
            # The client then reads end-of-stream, exactly as when a server process exits.
            self._relay.close()
            return
        await self._inner.send(message)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Writer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
