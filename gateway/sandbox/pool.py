"""A warm pool of started, hardened containers: each is handed out once and replaced in the background."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import anyio
import anyio.to_thread

from gateway.sandbox.containers import SandboxContainer, destroy

logger = logging.getLogger(__name__)


class WarmPool:
    """Keeps `size` containers created by `factory` (a blocking launch) started and waiting.

    A container is handed out at most once; `acquire` starts a replacement in a background
    thread and falls back to a cold start when none is ready. Containers with less than
    `min_remaining` seconds of life left are discarded rather than handed out; `dispose` (blocking)
    removes what the pool discards or still holds when closed.
    """

    def __init__(
        self,
        size: int,
        factory: Callable[[], SandboxContainer],
        *,
        min_remaining: float = 60.0,
        wall_clock: Callable[[], float] = time.time,
        dispose: Callable[[SandboxContainer], None] = destroy,
    ) -> None:
        if size < 0:
            raise ValueError(f"pool size must be zero or more, not {size}")
        self.size = size
        self._factory = factory
        self._min_remaining = min_remaining
        self._wall_clock = wall_clock
        self._dispose = dispose
        self._ready: deque[SandboxContainer] = deque()
        self._pending: set[Future[SandboxContainer]] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=max(1, min(size, 2)), thread_name_prefix="sandbox-pool")

    @property
    def ready(self) -> int:
        """How many containers wait to be handed out."""
        with self._lock:
            return len(self._ready)

    def fill(self) -> None:
        """Drop containers close to their end of life and start enough new ones to reach `size`."""
        horizon = self._wall_clock() + self._min_remaining
        with self._lock:
            if self._closed:
                return
            stale = [handle for handle in self._ready if handle.expires_at <= horizon]
            for handle in stale:
                self._ready.remove(handle)
            for handle in stale:
                self._executor.submit(self._dispose, handle)
            for _ in range(self.size - len(self._ready) - len(self._pending)):
                future = self._executor.submit(self._factory)
                self._pending.add(future)
                future.add_done_callback(self._created)

    def _created(self, future: Future[SandboxContainer]) -> None:
        """Runs in the worker thread once a background launch ended."""
        if future.cancelled():
            return
        error = future.exception()
        with self._lock:
            self._pending.discard(future)
            if error is None and not self._closed:
                self._ready.append(future.result())
                return
        if error is not None:
            # No retry here: the next acquire cold-starts and surfaces the real error to its caller.
            logger.warning("warm sandbox container could not be started: %s", error)
        else:
            self._dispose(future.result())

    def offer(self, handles: list[SandboxContainer]) -> None:
        """Take never-used containers started elsewhere as ready ones (removed at once when closed)."""
        with self._lock:
            if not self._closed:
                self._ready.extend(handles)
                return
        for handle in handles:
            self._dispose(handle)

    async def acquire(self) -> SandboxContainer:
        """A never-used started container: a warm one when ready, else a cold start."""
        handle = self.take()
        if handle is not None:
            return handle
        return await anyio.to_thread.run_sync(self._factory)

    def take(self) -> SandboxContainer | None:
        """A never-used started container when one is ready (a replacement starts in the background)."""
        self.fill()
        with self._lock:
            handle = self._ready.popleft() if self._ready else None
        self.fill()
        return handle

    async def wait_full(self) -> None:
        """Wait until `size` containers are ready (start-up warming); bound it with `anyio.fail_after`."""
        while self.ready < self.size:
            self.fill()
            with self._lock:
                pending = list(self._pending)
            if not pending:
                return  # closed
            await anyio.to_thread.run_sync(_wait_one, pending, abandon_on_cancel=True)

    async def close(self) -> None:
        """Stop warming and remove every container the pool still holds."""
        with self._lock:
            self._closed = True
            handles = list(self._ready)
            self._ready.clear()
        with anyio.CancelScope(shield=True):
            # What is ready goes first: launches still running take seconds to finish.
            for handle in handles:
                await anyio.to_thread.run_sync(self._dispose, handle)
            # Queued launches are dropped; running ones finish and `_created` removes what they made.
            await anyio.to_thread.run_sync(functools.partial(self._executor.shutdown, wait=True, cancel_futures=True))


def _wait_one(futures: list[Future[SandboxContainer]]) -> None:
    """Block until one of the launches ended (the pool's bookkeeping runs in its callback)."""
    done = threading.Event()
    for future in futures:
        future.add_done_callback(lambda _: done.set())
    done.wait()
