"""Test helpers for the gateway's spine: an observable upstream, a silent one, one not there, toy processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.client._memory import InMemoryTransport
from mcp.server import MCPServer
from mcp.types import EmbeddedResource, TextContent, TextResourceContents

from tests.support.harness import REPO, free_port
from tests.support.waiting import Lines, containing


@dataclass
class Observed:
    """What the probe server saw: calls of `hang` that started, and those cancelled on it."""

    started: anyio.Event = field(default_factory=anyio.Event)
    cancelled: anyio.Event = field(default_factory=anyio.Event)


def probe_server(observed: Observed, name: str = "probe") -> MCPServer:
    """An upstream whose `hang` tool reports when it starts and when it is cancelled."""
    server = MCPServer(name)

    @server.tool(structured_output=False)
    async def hang() -> str:
        """Wait until cancelled."""
        observed.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            observed.cancelled.set()
        return "never"

    @server.tool(structured_output=False)
    async def document() -> list[TextContent | EmbeddedResource]:
        """Return a caption and an embedded text resource."""
        contents = TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="the notes")
        return [TextContent(text="see attached"), EmbeddedResource(resource=contents)]

    return server


def gated(server: MCPServer, gate: anyio.Event) -> Callable[[], AbstractAsyncContextManager[Any]]:
    """A transport to `server` in memory that connects only once `gate` is set: an upstream ready when the test says."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[Any]:
        await gate.wait()
        async with InMemoryTransport(server) as streams:
            yield streams

    return connect


@asynccontextmanager
async def silent_transport() -> AsyncIterator[tuple[Any, Any]]:
    """Streams to a server that never answers, like a process that hangs before its handshake."""
    to_server, from_client = anyio.create_memory_object_stream[Any](16)
    to_client, from_server = anyio.create_memory_object_stream[Any](16)
    async with to_server, from_client, to_client, from_server:
        yield from_server, to_server


@asynccontextmanager
async def refused_transport() -> AsyncIterator[tuple[Any, Any]]:
    """A server that is not there: connecting fails at once, as to a port nobody listens on."""
    raise ConnectionRefusedError("nobody listens there")
    yield  # a generator, for asynccontextmanager


@asynccontextmanager
async def toy_process(transport: str, name: str = "toy") -> AsyncIterator[int]:
    """A toy server process serving `transport` on a free loopback port; yields the port once it listens."""
    port = free_port()
    command = [sys.executable, "-m", "tests.support.toy", "--name", name, "--transport", transport]
    said = Lines()
    async with (
        await anyio.open_process([*command, "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL) as process,
        anyio.create_task_group() as group,
    ):
        assert process.stderr is not None
        group.start_soon(said.read, process.stderr)
        try:
            await said.until(containing("Uvicorn running on"), "the toy server's word that it listens")
            yield port
        finally:
            process.terminate()
            with anyio.fail_after(10):
                await process.wait()
