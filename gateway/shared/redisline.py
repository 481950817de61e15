"""One connection to Redis carrying many commands at once: the call's round trip without a pool.

Each command is written as it comes (with any queued while a write was under way, in one write),
without waiting for the answers of those before it; Redis answers one connection in the order the
commands came. Whichever caller is waiting reads: it parses what arrives (hiredis, in C) and hands
each answer to its caller until its own has come, then passes the reading on to the next caller.
Why: through the client's pool, its retries and its bookkeeping, a round trip cost about 185 us of
the replica's CPU here, against about 60 us written and read on one connection
(docs/decisions/0146-the-calls-round-trip-on-one-connection.md). Commands on one connection also
run in the order they were sent, which is the order `RedisState` relies on.

A connection that fails fails every command waiting on it with Redis's `ConnectionError` (the
shared state's errors stay Redis's until `redisstate` translates them); the next command connects
again. An error answer (a script's error, NOSCRIPT) is raised as Redis's `ResponseError` to its own
caller only. A caller cancelled while it waits leaves its command to run; its answer is dropped.
"""

from __future__ import annotations

import ssl
from collections import deque
from typing import Any, NoReturn

import anyio
import hiredis
from anyio.abc import ByteStream
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError, ResponseError

Command = tuple[str | int | float, ...]
# Bytes taken off the socket per read: answers of many calls at once, under load.
_CHUNK = 65536
_LOST = (OSError, anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)


class _Answer:
    """One command's answer, and the event that wakes its caller (to take it, or to read)."""

    __slots__ = ("abandoned", "done", "value", "woken")

    def __init__(self) -> None:
        self.done = False
        self.abandoned = False
        self.value: Any = None
        self.woken = anyio.Event()

    def give(self, value: Any) -> None:
        self.done, self.value = True, value
        self.woken.set()


class RedisLine:
    """One pipelined connection to the Redis at `url` (`redis://`, `rediss://` or `unix://`),
    opened by the first command."""

    def __init__(self, url: str) -> None:
        self._options: dict[str, Any] = dict(parse_url(url))
        self._tls = url.lower().startswith("rediss://")
        self._stream: ByteStream | None = None
        self._parser = _reader()
        self._waiting: deque[_Answer] = deque()
        self._outgoing: list[bytes] = []
        self._writing = False
        self._reading = False
        self._connecting = anyio.Lock()

    async def call(self, *command: str | int | float) -> Any:
        """Send one command and return its answer (texts decoded), or raise its error."""
        stream = await self._connected()
        answer = _Answer()
        self._waiting.append(answer)
        self._outgoing.append(_packed(command))
        if not self._writing:
            await self._write(stream)
        try:
            while not answer.done:
                if self._reading:
                    await answer.woken.wait()
                    answer.woken = anyio.Event()
                else:
                    await self._read(stream, answer)
        except BaseException:
            # Its answer is dropped when it comes; if it was to read next, the next one reads.
            answer.abandoned = True
            if not self._reading:
                self._pass_on()
            raise
        if isinstance(answer.value, Exception):
            raise answer.value
        return answer.value

    async def _write(self, stream: ByteStream) -> None:
        """Send what is queued, and what is queued meanwhile, in as few writes as it takes."""
        self._writing = True
        try:
            while self._outgoing:
                data = b"".join(self._outgoing)
                self._outgoing.clear()
                # Shielded: a command cut halfway would garble every command after it.
                with anyio.CancelScope(shield=True):
                    await stream.send(data)
        except _LOST as error:
            await self._fail(stream, error)
        finally:
            self._writing = False

    async def _read(self, stream: ByteStream, answer: _Answer) -> None:
        """Read answers until `answer`'s has come, handing out every other one on the way."""
        self._reading = True
        try:
            while not answer.done:
                try:
                    data = await stream.receive(_CHUNK)
                except _LOST as error:
                    await self._fail(stream, error)
                self._parser.feed(data)
                while (value := self._parser.gets()) is not False:
                    self._waiting.popleft().give(value)
        finally:
            self._reading = False
            self._pass_on()

    def _pass_on(self) -> None:
        """Wake the first caller still waiting for its answer, to read next."""
        for waiting in self._waiting:
            if not waiting.abandoned:
                waiting.woken.set()
                return

    async def _connected(self) -> ByteStream:
        if self._stream is not None:
            return self._stream
        async with self._connecting:
            if self._stream is None:
                self._stream = await self._connect()
                self._parser = _reader()
            return self._stream

    async def _connect(self) -> ByteStream:
        options = self._options
        try:
            stream: ByteStream
            if "path" in options:
                stream = await anyio.connect_unix(options["path"])
            else:
                host, port = options.get("host", "localhost"), options.get("port", 6379)
                if self._tls:
                    stream = await anyio.connect_tcp(host, port, ssl_context=ssl.create_default_context())
                else:
                    stream = await anyio.connect_tcp(host, port)
        except OSError as error:
            raise ConnectionError(f"cannot connect to Redis ({type(error).__name__})") from None
        handshake: list[Command] = []
        if options.get("password") is not None:
            user = options.get("username")
            handshake.append(("AUTH", user, options["password"]) if user else ("AUTH", options["password"]))
        if options.get("db"):
            handshake.append(("SELECT", options["db"]))
        parser = _reader()
        try:
            for command in handshake:
                await stream.send(_packed(command))
                while (value := parser.gets()) is False:
                    parser.feed(await stream.receive(_CHUNK))
                if isinstance(value, ResponseError):
                    raise ConnectionError(f"Redis refused the connection: {value}")
        except _LOST as error:
            await anyio.aclose_forcefully(stream)
            raise ConnectionError(f"the connection to Redis was lost ({type(error).__name__})") from None
        except BaseException:
            await anyio.aclose_forcefully(stream)
            raise
        return stream

    async def _fail(self, stream: ByteStream, error: BaseException) -> NoReturn:
        """Fail every command waiting on `stream`, which is dropped (the next command connects again)."""
        lost = ConnectionError(f"the connection to Redis was lost ({type(error).__name__})")
        if stream is self._stream:
            self._stream = None
            self._outgoing.clear()
            while self._waiting:
                self._waiting.popleft().give(lost)
            await anyio.aclose_forcefully(stream)
        raise lost

    async def aclose(self) -> None:
        """Close the connection; commands still waiting fail."""
        stream, self._stream = self._stream, None
        self._outgoing.clear()
        lost = ConnectionError("the connection to Redis was closed")
        while self._waiting:
            self._waiting.popleft().give(lost)
        if stream is not None:
            await anyio.aclose_forcefully(stream)


def _packed(command: Command) -> bytes:
    """A command in Redis's protocol (hiredis's stub types it as one argument, not many)."""
    packed: bytes = hiredis.pack_command(command)  # type: ignore[arg-type]
    return packed


def _reader() -> hiredis.Reader:
    """A parser of answers: texts as `str`, error answers as `ResponseError`."""
    return hiredis.Reader(encoding="utf-8", replyError=ResponseError)
