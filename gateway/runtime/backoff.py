"""How long to wait before restarting an upstream: the backoff, and when it starts over.

Pure: time comes from the clock passed in, so tests move it instead of waiting.
"""

from __future__ import annotations

from collections.abc import Callable


class Backoff:
    """Waits between restarts, doubling from `initial` to `maximum`, starting over after a stable run.

    A server that ran `reset_after` seconds without failing is not failing in a loop: its next
    failure waits only `initial` again, so recovery does not lag the server by the longest wait.
    """

    def __init__(self, initial: float, maximum: float, reset_after: float, clock: Callable[[], float]) -> None:
        self._initial = initial
        self._maximum = maximum
        self._reset_after = reset_after
        self._clock = clock
        self._next = initial
        self._ready_since: float | None = None
        self.last = 0.0
        """The wait chosen after the latest failure."""

    def ready(self) -> None:
        """The server is connected and answering: its stable run starts now."""
        self._ready_since = self._clock()

    def failed(self) -> float:
        """The server failed (dropped, or did not connect): the seconds to wait before the next attempt."""
        if self._ready_since is not None and self._clock() - self._ready_since >= self._reset_after:
            self._next = self._initial
        self._ready_since = None
        self.last = self._next
        self._next = min(self._next * 2, self._maximum)
        return self.last
