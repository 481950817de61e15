"""Hardened containers through docker-py: launch, one-shot runs, and an MCP transport over attached stdio."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import anyio
import anyio.to_thread
import docker.errors
import mcp_types as types
import requests.exceptions
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from docker import DockerClient
from docker.models.containers import Container
from mcp.shared.message import SessionMessage

from gateway.config.limits import MiB, SandboxLimits
from gateway.errors import SandboxUnavailableError, ToolExecutionError
from gateway.sandbox.hardening import LABEL_DEADLINE, container_kwargs

logger = logging.getLogger(__name__)
# What the session reads from and writes to: the pair every SDK client transport yields.
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]

STDOUT, STDERR = 1, 2
BUILD_HINT = "run `python -m gateway sandbox build`"
# Extra life a one-shot container gets past its deadline, so our own kill always comes first.
_ONE_SHOT_GRACE = 5.0
_STDERR_TAIL = 8192


def unavailable(error: BaseException, image: str) -> SandboxUnavailableError:
    """The clear refusal for a docker-py or connection failure."""
    if isinstance(error, docker.errors.ImageNotFound):
        return SandboxUnavailableError(f"sandbox image {image} is missing: {BUILD_HINT}")
    return SandboxUnavailableError(f"Docker is not reachable: {error}")


DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


@dataclass(eq=False)
class SandboxContainer:
    """A created and started container whose stdin/stdout/stderr were attached before it started."""

    container: Container
    socket: socket.socket
    keepalive: Any  # docker-py's socket wrapper; it holds the HTTP response the socket belongs to
    expires_at: float
    workspace: Path | None = None
    """The spare workspace a container started ahead of its session mounts, until a session adopts it."""
    companions: list[SandboxContainer] = field(default_factory=list)
    """Containers started beside it on the same spare workspace, for the warm pool of the session
    that adopts it (a tool sandboxed per call)."""

    @property
    def id(self) -> str:
        """The container id."""
        return str(self.container.id)


def launch(client: DockerClient, kwargs: Mapping[str, Any]) -> SandboxContainer:
    """Create, attach and start a container (blocking; call it in a worker thread)."""
    image = str(kwargs["image"])
    try:
        container = client.containers.create(**kwargs)
    except DOCKER_ERRORS as error:
        raise unavailable(error, image) from error
    try:
        # Attach before start so not one byte of early output is lost.
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        wrapper = client.api.attach_socket(str(container.id), params=params)
        raw = getattr(wrapper, "_sock", wrapper)
        if not isinstance(raw, socket.socket) or isinstance(raw, ssl.SSLSocket):
            raise SandboxUnavailableError("Docker is not reachable: attach needs a unix or plain TCP socket")
        container.start()
    except BaseException as error:
        _remove(container)
        if isinstance(error, DOCKER_ERRORS):
            raise unavailable(error, image) from error
        raise
    return SandboxContainer(container, raw, wrapper, expires_at=float(kwargs["labels"][LABEL_DEADLINE]))


def destroy(handle: SandboxContainer) -> None:
    """Hang up the attach socket, then kill and remove the container (blocking; safe to repeat)."""
    _hang_up(handle)
    _remove(handle.container)


def _hang_up(handle: SandboxContainer) -> None:
    # Docker finishes a container's exit only after its output was copied out; an attach
    # socket that nobody reads any more would stall that copy, and with it kill and remove.
    with contextlib.suppress(OSError):  # the other side may have closed it already
        handle.socket.shutdown(socket.SHUT_RDWR)
    for closable in (handle.keepalive, handle.socket):
        closable.close()


def _remove(container: Container) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except DOCKER_ERRORS:
        # A removal already in progress answers 409; the sweeper catches any real leftover.
        logger.warning("could not remove sandbox container %s", container.id, exc_info=True)


async def destroy_now(handle: SandboxContainer) -> None:
    """Kill and remove the container from a worker thread, waiting for it."""
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(destroy, handle)


class Reaper:
    """Destroys containers in background threads, keeping removal off the request path."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sandbox-reaper")
        self._lock = threading.Lock()
        self._closed = False

    async def dispose(self, handle: SandboxContainer) -> None:
        """Queue the container for removal and return at once (removes inline once closed)."""
        with self._lock:
            if not self._closed:
                self._executor.submit(destroy, handle)
                return
        await destroy_now(handle)

    async def close(self) -> None:
        """Wait until every queued removal finished."""
        with self._lock:
            self._closed = True
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._executor.shutdown, True)


class FrameDecoder:
    """Splits Docker's multiplexed attach stream (8-byte header: stream, 0, 0, 0, size) into frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add bytes; return every complete `(stream, payload)` frame so far."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            size = int.from_bytes(self._buffer[4:8], "big")
            if len(self._buffer) < 8 + size:
                break
            frames.append((self._buffer[0], bytes(self._buffer[8 : 8 + size])))
            del self._buffer[: 8 + size]
        return frames


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a one-shot container produced."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    truncated: bool


async def run_once(
    client: DockerClient,
    image: str,
    command: Sequence[str],
    stdin_bytes: bytes,
    limits: SandboxLimits,
    workspace: Path | None,
    *,
    labels: Mapping[str, str] | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> RunResult:
    """Run `command` in a fresh hardened container with its own deadline and output cap, then remove it."""
    lifetime = limits.deadline + _ONE_SHOT_GRACE
    kwargs = container_kwargs(image, command, limits, labels or {}, workspace, now=wall_clock(), lifetime=lifetime)
    handle = await anyio.to_thread.run_sync(launch, client, kwargs)
    capture = _Capture(limits.max_output)
    try:
        stream = await SocketStream.from_socket(handle.socket.dup())
        async with stream:
            with anyio.move_on_after(limits.deadline) as deadline:
                await _exchange(stream, stdin_bytes, capture)
        timed_out = deadline.cancelled_caught
        exit_code, oom_killed = await anyio.to_thread.run_sync(_outcome, handle, timed_out or capture.truncated)
    finally:
        await destroy_now(handle)
    stdout, stderr = (bytes(capture.output[kind]) for kind in (STDOUT, STDERR))
    return RunResult(stdout, stderr, exit_code, timed_out, oom_killed, capture.truncated)


class _Capture:
    """Output of a one-shot run, kept up to a byte cap over stdout and stderr together."""

    def __init__(self, cap: int) -> None:
        self.output = {STDOUT: bytearray(), STDERR: bytearray()}
        self.room = cap
        self.truncated = False

    def take(self, kind: int, payload: bytes) -> None:
        if kind in self.output:
            self.output[kind] += payload[: self.room]
            self.truncated = self.truncated or len(payload) > self.room
            self.room = max(0, self.room - len(payload))


async def _exchange(stream: SocketStream, stdin_bytes: bytes, capture: _Capture) -> None:
    """Feed stdin while collecting output, until end of output or the cap is passed."""

    async def feed() -> None:
        if stdin_bytes:
            await stream.send(stdin_bytes)
        # Half-close: the container was created with StdinOnce, so its stdin reaches end of file.
        await stream.send_eof()

    async with anyio.create_task_group() as tg:
        tg.start_soon(feed)
        decoder = FrameDecoder()
        try:
            while not capture.truncated:
                for kind, payload in decoder.feed(await stream.receive()):
                    capture.take(kind, payload)
        except anyio.EndOfStream:
            pass
        tg.cancel_scope.cancel()


def _outcome(handle: SandboxContainer, kill: bool) -> tuple[int | None, bool]:
    """Exit code and OOM flag, killing first when we cut the run short (blocking)."""
    container = handle.container
    _hang_up(handle)
    try:
        if kill:
            container.kill()
        status = container.wait(timeout=10)
        container.reload()
    except DOCKER_ERRORS:
        logger.warning("could not read the outcome of sandbox container %s", handle.id, exc_info=True)
        return None, False
    return int(status["StatusCode"]), bool(container.attrs["State"].get("OOMKilled"))


class ContainerStdio:
    """An MCP client transport: newline-delimited JSON-RPC over a container's attached stdin/stdout.

    `acquire` supplies the started container (a cold launch or one from a warm pool) when the
    transport is entered; `dispose` gets rid of it on exit or on `terminate()`.
    """

    def __init__(
        self,
        acquire: Callable[[], Awaitable[SandboxContainer]],
        dispose: Callable[[SandboxContainer], Awaitable[None]] = destroy_now,
        *,
        max_message_bytes: int = 16 * MiB,
        clock: Callable[[], float] = time.monotonic,
        errlog: TextIO | None = None,
    ) -> None:
        self._acquire = acquire
        self._errlog = errlog
        """Where the server's stderr goes as well, as a host server's does: its log, which its status quotes."""
        self._dispose = dispose
        self._max_message = max_message_bytes
        self._clock = clock
        self._stack: AsyncExitStack | None = None
        self._handle: SandboxContainer | None = None
        self._stderr = bytearray()
        self.failure: str | None = None
        """Why the transport gave up on the server, when it did (the session only sees the connection close)."""
        self.last_activity = clock()

    @property
    def container_id(self) -> str | None:
        """The id of the container behind the transport, once entered."""
        return self._handle.id if self._handle else None

    @property
    def stderr_tail(self) -> str:
        """The last few kilobytes the server wrote to stderr, for error messages."""
        return self._stderr.decode(errors="replace")

    async def __aenter__(self) -> Streams:
        stack = AsyncExitStack()
        streams = await stack.enter_async_context(self._connect())
        self._stack = stack
        return streams

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(kind, error, tb)

    async def terminate(self) -> None:
        """Destroy the container now; the session then sees its streams end."""
        handle, self._handle = self._handle, None
        if handle is not None:
            await self._dispose(handle)

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Streams]:
        self._handle = handle = await self._acquire()
        try:
            stream = await SocketStream.from_socket(handle.socket.dup())
        except BaseException:
            await self.terminate()
            raise
        reader_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, writer_out = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump_out, stream, reader_in)
                tg.start_soon(self._pump_in, stream, writer_out, reader_in)
                try:
                    yield read_stream, write_stream
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                for closable in (stream, read_stream, write_stream, reader_in, writer_out):
                    await closable.aclose()
                await self.terminate()

    async def _pump_out(
        self, stream: SocketStream, reader_in: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        """Container stdout -> session: demultiplex frames, split lines, parse JSON-RPC."""
        decoder, line = FrameDecoder(), bytearray()
        async with reader_in:
            try:
                while True:
                    for kind, payload in decoder.feed(await stream.receive()):
                        if kind == STDERR:
                            self._stderr = (self._stderr + payload)[-_STDERR_TAIL:]
                            if self._errlog is not None:
                                self._errlog.write(payload.decode("utf-8", "replace"))
                                self._errlog.flush()
                            continue
                        line += payload
                        while (end := line.find(b"\n")) >= 0:
                            message, line = bytes(line[:end]), line[end + 1 :]
                            if message.strip():
                                self.last_activity = self._clock()
                                await reader_in.send(_parse(message))
                        if len(line) > self._max_message:
                            self.failure = f"the sandboxed server sent a message over {self._max_message} bytes"
                            await reader_in.send(ToolExecutionError(self.failure))
                            return
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return

    async def _pump_in(
        self,
        stream: SocketStream,
        writer_out: MemoryObjectReceiveStream[SessionMessage],
        reader_in: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Session -> container stdin, one JSON-RPC message a line."""
        try:
            async with writer_out:
                async for session_message in writer_out:
                    data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    self.last_activity = self._clock()
                    await stream.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The container is gone: end the session's read side rather than leave a request hanging.
            await reader_in.aclose()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error
