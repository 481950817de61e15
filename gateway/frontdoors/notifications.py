"""Keeping notification storms from reaching clients: list_changed coalesced, progress throttled.

An upstream that sends 10,000 list_changed, or reports progress on every item of a long loop,
must not make the gateway push as many messages to every client. The first of a burst goes out
at once (a single change reaches clients without delay); the rest collapse into at most one per
interval, and the last state always goes out. A client is told only of the lists that changed as
it sees them: its tools, its prompts, its resources, each compared with what it was last told.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anyio

from gateway.pipeline.chain import ProgressFn

# Progress of one call reaches its client at most once per this many seconds.
PROGRESS_INTERVAL = 0.02

Clock = Callable[[], float]
ListKind = Literal["tools", "prompts", "resources"]
LIST_KINDS: tuple[ListKind, ...] = ("tools", "prompts", "resources")


@dataclass(frozen=True, slots=True)
class Lists:
    """What a client's three lists hold, compared by value to tell which of them changed."""

    tools: object
    prompts: object
    resources: object

    def changed(self, before: Lists) -> list[ListKind]:
        """The kinds whose list differs from `before`."""
        return [kind for kind in LIST_KINDS if getattr(self, kind) != getattr(before, kind)]


class Coalescer:
    """Calls `send` at most once per `interval` seconds however often it is asked, never losing the last ask.

    A caller that asks while a send is due or under way returns at once; the caller doing the
    sending waits out the interval (at most `interval`) and sends once for everyone who asked.
    """

    def __init__(self, send: Callable[[], Awaitable[None]], interval: float, clock: Clock) -> None:
        self._send = send
        self._interval = interval
        self._clock = clock
        self._last = -math.inf
        self._pending = False
        self._lock = anyio.Lock()

    async def __call__(self) -> None:
        """Ask for a send."""
        self._pending = True
        if self._lock.locked():
            return  # the sender under way sees the ask before it stops
        async with self._lock:
            while self._pending:
                wait = self._last + self._interval - self._clock()
                if wait > 0:
                    await anyio.sleep(wait)
                self._pending = False
                self._last = self._clock()
                await self._send()


class ProgressThrottle:
    """One call's progress reports: at most one per `interval` s reaches `send`; `flush` sends the last held back."""

    def __init__(self, send: ProgressFn, clock: Clock, interval: float = PROGRESS_INTERVAL) -> None:
        self._send = send
        self._clock = clock
        self._interval = interval
        self._last = -math.inf
        self._held: tuple[float, float | None, str | None] | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        """Pass this report on, or hold it back when the previous one went out less than an interval ago."""
        now = self._clock()
        if now - self._last < self._interval:
            self._held = (progress, total, message)
            return
        self._held = None
        self._last = now
        await self._send(progress, total, message)

    async def flush(self) -> None:
        """Send the latest report held back, so the client sees where the call ended."""
        if self._held is not None:
            held, self._held = self._held, None
            await self._send(*held)


class ListChanges:
    """One client's list_changed notifications: a kind goes out only when that list, as the client
    sees it, differs from when it was last told, and at most once per `interval` (the last change
    is never lost). `lists` reads the client's lists now; what they hold at construction is what
    the client is taken to have seen."""

    def __init__(
        self, lists: Callable[[], Lists], send: Callable[[ListKind], Awaitable[None]], interval: float, clock: Clock
    ) -> None:
        self._lists = lists
        self._send = send
        self._told = lists()
        self._coalesce = Coalescer(self._tell, interval, clock)

    async def __call__(self) -> None:
        """Tell the client of its lists that changed: now, or once an interval since the last has passed."""
        await self._coalesce()

    async def _tell(self) -> None:
        lists = self._lists()
        changed, self._told = lists.changed(self._told), lists
        for kind in changed:
            await self._send(kind)
