"""Waiting in tests for what the code under test does in its own time.

Where it offers an event, a test waits on that: what a client's callbacks received (`Inbox`), a
change of a gateway's catalog (`catalog_until`, through `Gateway.on_change`), a line a process
writes (`Lines`) or the gateway logs (`logged`). Where a state changes without an event (an
upstream's connection state, a container or a process going away, what another replica has seen),
`poll_until` looks again every 50 ms. Each wait is bounded by `LIMIT`, far above what a loaded
machine takes: it fails only a test that would otherwise hang, and says what did not come.
"""

from __future__ import annotations

import asyncio
import codecs
import inspect
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar
from weakref import WeakKeyDictionary

import anyio
from anyio.abc import ByteReceiveStream

from gateway.clients.session import SessionContext
from gateway.service import Gateway

T = TypeVar("T")

LIMIT = 60.0
"""Seconds before a wait fails: a hang guard, never a timing bound."""
POLL_STEP = 0.05


class Signal:
    """Raised at each change of something a test observes; `until` waits on it for a condition."""

    def __init__(self) -> None:
        self._changed = anyio.Event()

    def notify(self) -> None:
        """Wake whoever waits: what they watch may have changed."""
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, condition: Callable[[], bool], what: str, limit: float = LIMIT) -> None:
        """Return once `condition()` holds, checked now and after each change; fail after `limit` s."""
        with anyio.move_on_after(limit):
            while not condition():
                await self._changed.wait()
            return
        raise AssertionError(f"waited {limit:g} s for {what}")


class Inbox(list[T]):
    """What a client's callback received, in order; `until` waits for what a test expects of it."""

    def __init__(self) -> None:
        super().__init__()
        self._signal = Signal()

    def add(self, item: T) -> None:
        """Keep `item`."""
        self.append(item)
        self._signal.notify()

    async def put(self, item: T) -> None:
        """Keep `item`: the callback a client is given."""
        self.add(item)

    async def until(self, condition: Callable[[], bool], what: str, limit: float = LIMIT) -> None:
        """Return once `condition()` holds, checked now and after each item received."""
        await self._signal.until(condition, what, limit)


_CATALOG_CHANGES: WeakKeyDictionary[Gateway, Signal] = WeakKeyDictionary()


async def catalog_until(gateway: Gateway, condition: Callable[[], bool], what: str, limit: float = LIMIT) -> None:
    """Return once `condition()` holds, checked now and after each change of `gateway`'s catalog."""
    signal = _CATALOG_CHANGES.get(gateway)
    if signal is None:
        signal = _CATALOG_CHANGES[gateway] = Signal()
        gateway.live_catalog.on_change(_awaitable(signal.notify))
    await signal.until(condition, what, limit)


def ends_of(sessions: Iterable[SessionContext]) -> Callable[[], Awaitable[None]]:
    """Be told when each of `sessions` (live now) ends, through its `on_close`; the returned
    function waits until every one of them has (released by the gateway, its closing begun)."""
    ended = []
    for session in sessions:
        ended.append(anyio.Event())
        session.on_close(_awaitable(ended[-1].set))

    async def wait(limit: float = LIMIT) -> None:
        with anyio.move_on_after(limit):
            for event in ended:
                await event.wait()
            return
        raise AssertionError(f"waited {limit:g} s for {len(ended)} sessions to end")

    return wait


def _awaitable(call: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    """`call` as the coroutine function a hook of the gateway takes."""

    async def called() -> None:
        call()

    return called


async def tried_to_connect(gateway: Gateway, *names: str, limit: float = LIMIT) -> None:
    """Wait until each upstream named (every one when none is) has tried once to connect: it is
    ready, or its first attempt failed."""
    with anyio.move_on_after(limit):
        for upstream in [gateway.upstreams[name] for name in names] or list(gateway.upstreams.values()):
            await upstream.first_attempt.wait()
        return
    raise AssertionError(f"waited {limit:g} s for {', '.join(names) or 'every server'} to try to connect")


async def poll_until(condition: Callable[[], bool | Awaitable[bool]], what: str, limit: float = LIMIT) -> None:
    """Look at `condition()` every 50 ms until it holds: for a state that changes without an event
    a test could wait on. Fail after `limit` s, saying `what` did not come."""
    with anyio.move_on_after(limit):
        while True:
            held = condition()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return
            await anyio.sleep(POLL_STEP)
    raise AssertionError(f"waited {limit:g} s for {what}")


async def read_fifo(path: Path, what: str, limit: float = LIMIT) -> str:
    """What a process writes into the FIFO at `path` (`os.mkfifo`), once it has written and closed
    it: opening it blocks until the writer comes, in a worker thread."""
    with anyio.move_on_after(limit):
        return await anyio.to_thread.run_sync(path.read_text, abandon_on_cancel=True)
    # A writer that never came: be one, so that the abandoned read ends.
    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    raise AssertionError(f"waited {limit:g} s for {what}")


def containing(text: str) -> Callable[[str], bool]:
    """Whether a line contains `text`: what `Lines.until` waits for, most often."""
    return lambda line: text in line


class Lines:
    """The lines a process writes to a pipe (or a logger logs), kept as they come (and copied to
    `copy` when given); `until` waits for a line a test expects."""

    def __init__(self, copy: Path | None = None) -> None:
        self.lines: list[str] = []
        """The complete lines written so far."""
        self._partial = ""
        self._copy = copy
        self._ended = False
        self._signal = Signal()

    @property
    def text(self) -> str:
        """Everything written so far."""
        return "".join(f"{line}\n" for line in self.lines) + self._partial

    async def read(self, stream: ByteReceiveStream) -> None:
        """Keep what `stream` carries until it ends (the process closed it)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        sink = self._copy.open("wb") if self._copy is not None else None
        try:
            async for chunk in stream:
                if sink is not None:
                    sink.write(chunk)
                    sink.flush()
                *complete, self._partial = (self._partial + decoder.decode(chunk)).split("\n")
                self.lines.extend(complete)
                self._signal.notify()
        finally:
            if sink is not None:
                sink.close()
            self._ended = True
            self._signal.notify()

    def add(self, line: str) -> None:
        """Keep one more line (a log record's message)."""
        self.lines.append(line)
        self._signal.notify()

    async def until(self, wanted: Callable[[str], bool], what: str, since: int = 0, limit: float = LIMIT) -> str:
        """The first line from line number `since` on for which `wanted(line)` holds, once it is
        written; fails if the stream ends without it."""
        looked = since
        found: list[str] = []

        def seen() -> bool:
            nonlocal looked
            found.extend(line for line in self.lines[looked:] if wanted(line))
            looked = len(self.lines)
            return bool(found) or self._ended

        await self._signal.until(seen, what, limit)
        if not found:
            raise AssertionError(f"the output ended without {what}:\n{self.text[-2000:]}")
        return found[0]


class _Logged(logging.Handler):
    def __init__(self, lines: Lines) -> None:
        super().__init__()
        self._lines = lines
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if threading.get_ident() == self._thread:
            self._lines.add(record.getMessage())
        else:  # a record of a worker thread
            self._loop.call_soon_threadsafe(self._lines.add, record.getMessage())


@contextmanager
def logged(logger: str = "gateway", level: int = logging.INFO) -> Iterator[Lines]:
    """The messages `logger` (and those below it) logs at `level` and above while in this block, as
    an operator reads them in the log; `until` waits for one."""
    lines = Lines()
    handler = _Logged(lines)
    handler.setLevel(level)
    target = logging.getLogger(logger)
    previous = target.level
    if target.getEffectiveLevel() > level:
        target.setLevel(level)
    target.addHandler(handler)
    try:
        yield lines
    finally:
        target.removeHandler(handler)
        target.setLevel(previous)
