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
from contextlib import suppress
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
        """Hand the answer (or the error) to its caller."""
        self.done, self.value = True, value
        self.woken.set()


class _Connection:
    """One open connection: the commands written on it, the answers awaited, who writes and reads.
    Each connection keeps its own queues, so that nothing meant for a failed one reaches the next."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.lost: ConnectionError | None = None
        self._parser = _reader()
        self._waiting: deque[_Answer] = deque()
        self._outgoing: list[bytes] = []
        self._writing = False
        self._reading = False

    async def call(self, command: Command) -> Any:
        """Queue `command`, write what is queued unless a write is under way, and wait for its answer."""
        if self.lost is not None:
            raise self.lost
        answer = _Answer()
        self._waiting.append(answer)
        self._outgoing.append(_packed(command))
        if not self._writing:
            await self._write()
        try:
            while not answer.done:
                if self._reading:
                    await answer.woken.wait()
                    answer.woken = anyio.Event()
                else:
                    await self._read(answer)
        except BaseException:
            # Its answer is dropped when it comes; if it was to read next, the next one reads.
            answer.abandoned = True
            if not self._reading:
                self._pass_on()
            raise
        if isinstance(answer.value, Exception):
            raise answer.value
        return answer.value

    async def _write(self) -> None:
        """Send what is queued, and what is queued meanwhile, in as few writes as it takes."""
        self._writing = True
        try:
            while self._outgoing:
                data = b"".join(self._outgoing)
                self._outgoing.clear()
                # Shielded: a command cut halfway would garble every command after it.
                with anyio.CancelScope(shield=True):
                    await self.stream.send(data)
        except _LOST as error:
            await self.fail(error)
        finally:
            self._writing = False

    async def _read(self, answer: _Answer) -> None:
        """Read answers until `answer`'s has come, handing out every other one on the way."""
        self._reading = True
        try:
            while not answer.done:
                try:
                    data = await self.stream.receive(_CHUNK)
                except _LOST as error:
                    await self.fail(error)
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

    async def fail(self, error: BaseException | None) -> NoReturn:
        """Fail every command waiting here and close the connection; raises for the caller."""
        if self.lost is None:
            cause = f"lost ({type(error).__name__})" if error is not None else "closed"
            self.lost = ConnectionError(f"the connection to Redis was {cause}")
            self._outgoing.clear()
            while self._waiting:
                self._waiting.popleft().give(self.lost)
            await anyio.aclose_forcefully(self.stream)
        raise self.lost


class RedisLine:
    """One pipelined connection to the Redis at `url` (`redis://`, `rediss://` or `unix://`),
    opened by the first command and again by the first after it failed."""

    def __init__(self, url: str) -> None:
        self._options: dict[str, Any] = dict(parse_url(url))
        self._tls = url.lower().startswith("rediss://")
        self._current: _Connection | None = None
        self._connecting = anyio.Lock()

    async def call(self, *command: str | int | float) -> Any:
        """Send one command and return its answer (texts decoded), or raise its error."""
        current = self._current
        if current is None or current.lost is not None:
            current = await self._connected()
        return await current.call(command)

    async def _connected(self) -> _Connection:
        async with self._connecting:
            if self._current is None or self._current.lost is not None:
                self._current = _Connection(await self._connect())
            return self._current

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

    async def aclose(self) -> None:
        """Close the connection; commands still waiting fail."""
        current, self._current = self._current, None
        if current is not None:
            with suppress(ConnectionError):
                await current.fail(None)


def _packed(command: Command) -> bytes:
    """A command in Redis's protocol (hiredis's stub types it as one argument, not many)."""
    packed: bytes = hiredis.pack_command(command)  # type: ignore[arg-type]
    return packed


def _reader() -> hiredis.Reader:
    """A parser of answers: texts as `str`, error answers as `ResponseError`."""
    return hiredis.Reader(encoding="utf-8", replyError=ResponseError)
