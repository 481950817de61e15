"""The stdio client transport, with a reader that frames messages in linear time and caps their size.

The SDK's `stdio_client` joins each chunk it reads onto the line so far and splits the whole
again: a 20 MB message costs seconds of event-loop time (measured: 2.4 s of the loop's 2.8 s
while the message arrived), during which every other session waits. This transport spawns and
stops the server exactly as the SDK does, with the SDK's own helpers, but keeps a line as a list
of chunks, looks for the end of a line only in the new chunk, and stops keeping a line once it
is longer than `max_message_bytes`: an oversized response is answered with a JSON-RPC error for
its request, so its call fails at once with a clear message instead of waiting for its deadline.
Other oversized messages, and lines that are not JSON-RPC messages, are dropped and counted in
the server's `FaultLog` (one warning per kind, then summaries). The spawn and stop helpers are private to
the SDK and reached through `gateway.upstreams.sdkclient`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
import pydantic_core
from anyio.abc import ByteReceiveStream, Process
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.message import SessionMessage

from gateway.errors import clip
from gateway.upstreams.directcalls import DirectCalls
from gateway.upstreams.faults import FaultLog
from gateway.upstreams.sdkclient import drain_stdout, executable_command, open_server_process, stop_server_process
from gateway.upstreams.spawn import spawn

# JSON-RPC's range for implementation-defined server errors; the gateway's own code for the cap.
RESULT_TOO_LARGE = -32001
# Enough of an oversized line's ends to find the id of the response it carries.
_ENDS = 4096
_SCALAR = rb'(?:"(?:[^"\\]|\\.)*"|-?\d+|null)'
# A response names `result` or `error` before any nested value; only `jsonrpc` and `id` may precede it.
_RESPONSE_HEAD = re.compile(rb'\s*\{(?:\s*"(?:jsonrpc|id)"\s*:\s*' + _SCALAR + rb'\s*,)*\s*"(?:result|error)"')
_LEADING_ID = re.compile(rb'\s*\{(?:\s*"jsonrpc"\s*:\s*"2\.0"\s*,)?\s*"id"\s*:\s*(' + _SCALAR + rb")")
# Anchored at the very end: a nested "id" is always followed by at least one more closing brace.
_TRAILING_ID = re.compile(rb',\s*"id"\s*:\s*(' + _SCALAR + rb')\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit: its size and its two ends, the middle dropped unread."""

    size: int
    head: bytes
    tail: bytes


class LineReader:
    """Splits a byte stream into lines in linear time; lines over `limit` bytes come out as `Oversized`."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines that `chunk` completes."""
        lines: list[bytes | Oversized] = []
        start = 0
        while (newline := chunk.find(b"\n", start)) != -1:
            self._add(chunk[start:newline])
            lines.append(self._finish())
            start = newline + 1
        self._add(chunk[start:])
        return lines

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if len(self._head) < _ENDS:
            self._head += piece[: _ENDS - len(self._head)]
        self._tail = (self._tail + piece[-_ENDS:])[-_ENDS:]
        # Past the limit the line is only counted: its middle is never kept.
        if self._size <= self._limit:
            self._parts.append(piece)
        else:
            self._parts.clear()

    def _finish(self) -> bytes | Oversized:
        line = Oversized(self._size, self._head, self._tail) if self._size > self._limit else b"".join(self._parts)
        self._parts, self._size, self._head, self._tail = [], 0, b"", b""
        return line


def response_id(line: Oversized) -> types.RequestId | None:
    """The id of the response `line` carries, or None when it is not recognisably a response."""
    if _RESPONSE_HEAD.match(line.head) is None:
        return None
    found = _LEADING_ID.match(line.head) or _TRAILING_ID.search(line.tail)
    if found is None:
        return None
    value = found[1].decode()
    return value[1:-1] if value.startswith('"') else None if value == "null" else int(value)


def refusal(line: Oversized, limit: int) -> SessionMessage | None:
    """The error response standing in for an oversized response, or None for another kind of message."""
    request = response_id(line)
    if request is None:
        return None
    message = (
        f"The result is {line.size:,} bytes, over the gateway's limit of {limit:,} bytes for one "
        "message from a server (gateway.max_result_bytes)"
    )
    error = types.ErrorData(code=RESULT_TOO_LARGE, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request, error=error))


def parse(line: bytes, faults: FaultLog) -> SessionMessage | None:
    """The message on `line`, or None (noted in `faults`) for a line that is not one.

    A response whose JSON the decoder refuses (a string that is not Unicode: a lone surrogate
    escape; nesting past its limit) becomes an error response for its request, so that its call
    fails at once with the reason, and the text never reaches a client or the audit trail, where
    it could not be encoded again.

    Decoded by pydantic's JSON decoder, as the SDK's other transports decode (and a listing is
    held in less memory than `json.loads` builds: a page of 100 tools, 176 KB against 258 KB),
    then checked."""
    try:
        data = pydantic_core.from_json(line)
    except ValueError as error:
        _report(line, error, faults)
        return _unreadable(line, error)
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(data, by_name=False))
    except ValueError as error:
        _report(line, error, faults)
        return None


def _unreadable(line: bytes, error: ValueError) -> SessionMessage | None:
    """The error response standing in for a response the decoder refused, or None when `line` is
    not recognisably a response."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    request = message.get("id") if isinstance(message, dict) and "method" not in message else None
    if not isinstance(request, str | int) or isinstance(request, bool):
        return None
    reason = types.ErrorData(code=types.PARSE_ERROR, message=f"The server's response cannot be read: {error}")
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request, error=reason))


def _report(line: bytes, error: ValueError, faults: FaultLog) -> None:
    # The session would only drop it; a server writing garbage must not fill our log line by line.
    text = clip(line.decode("utf-8", "replace"))
    faults.report("line that is not a JSON-RPC message", f"{text!r} ({_first_line(error)})")


def _first_line(error: ValueError) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _refused_directly(direct: DirectCalls | None, message: SessionMessage) -> bool:
    """Whether `message`, an error standing in for a response, failed one of `direct`'s calls."""
    refused = message.message
    return direct is not None and isinstance(refused, types.JSONRPCError) and direct.refuse(refused.id, refused.error)


@asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters,
    errlog: TextIO,
    max_message_bytes: int,
    faults: FaultLog,
    direct: DirectCalls | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn `server` and exchange newline-delimited JSON-RPC with it, no message over `max_message_bytes`;
    lines that are not messages are dropped and counted in `faults`. `direct` gets the server's
    input for its calls, and the responses to them before the session sees anything."""
    command = await executable_command(server.command)
    env = get_default_environment() | (server.env or {})
    process: Process
    if sys.platform == "linux":  # pidfds are Linux's; see gateway/upstreams/spawn.py
        process = spawn([command, *server.args], env, errlog, server.cwd)
    else:
        process = await open_server_process(command, server.args, env, errlog, server.cwd)
    # No awaits from the spawn to the task group: a cancellation in the gap would leak the process.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    stdout = process.stdout
    stdin = process.stdin
    assert stdout is not None and stdin is not None

    async def deliver(stream: ByteReceiveStream) -> None:
        lines = LineReader(max_message_bytes)
        async for chunk in stream:
            for line in lines.feed(chunk):
                if isinstance(line, Oversized):
                    message = refusal(line, max_message_bytes)
                    if message is None:
                        faults.report("message over the size limit", f"dropped a message of {line.size:,} bytes")
                        continue
                elif not line.strip() or (direct is not None and direct.take(line)):
                    continue
                else:
                    message = parse(line, faults)
                    if message is None:
                        continue
                if not _refused_directly(direct, message):
                    if direct is not None and isinstance(message.message, types.JSONRPCNotification):
                        direct.handed()
                    await read_writer.send(message)

    async def reader() -> None:
        try:
            async with read_writer:
                try:
                    await deliver(stdout)
                finally:
                    if direct is not None:
                        direct.close()
                    await drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # shutdown closed a stream under the read; the session sees the read stream end

    async def writer() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: end the read side so no request waits forever.
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        # The SDK's order: unblock the reader into its drain, let the writer flush, stop the process.
        if direct is not None:
            direct.close()
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(0.5):
            await writer_done.wait()
        await stop_server_process(process)
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    if direct is not None:
        direct.attach(stdin.send)
    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            # Every wait inside is bounded; shielded so that a cancelled caller cannot leak the process.
            with anyio.CancelScope(shield=True):
                await shutdown()
            group.cancel_scope.cancel()
