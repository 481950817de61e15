"""How many session containers to keep started ahead: as many sessions as recently arrived within
the time one container takes to start, between the configured count and a ceiling."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

HORIZON = 300.0
"""Seconds of arrivals that count: a container started ahead waits at most this long before it is
replaced (`gateway.sandbox.source.SESSION_WARM_AGE`), so the pool shrinks back as fast."""
MOST = 8
"""Containers started ahead per server at most, whatever the demand: each holds its server's memory."""
_STARTS = 8


class Demand:
    """The first uses of one server sandboxed per session, and how long its containers take to start.

    `size` is the most first uses seen within any span as long as the slowest of the last few
    start-ups, in the last `HORIZON` seconds: that many sessions arriving in a burst all find a
    container started, however quiet the host was before. Never below `floor` (the configured
    count), never above `MOST`. `started` is called from the pool's threads.
    """

    def __init__(self, floor: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.floor = floor
        self._clock = clock
        self._arrivals: deque[float] = deque()
        self._starts: deque[float] = deque(maxlen=_STARTS)
        self._lock = threading.Lock()

    def arrived(self) -> None:
        """A session's first use of the server, served by a container started ahead or not."""
        with self._lock:
            self._arrivals.append(self._clock())

    def started(self, seconds: float) -> None:
        """One container of the server took `seconds` to start."""
        with self._lock:
            self._starts.append(seconds)

    def size(self) -> int:
        """How many containers to keep started ahead now."""
        now = self._clock()
        with self._lock:
            while self._arrivals and now - self._arrivals[0] > HORIZON:
                self._arrivals.popleft()
            arrivals = list(self._arrivals)
            span = max(self._starts, default=0.0)
        return max(self.floor, min(MOST, _peak(arrivals, span)))


def _peak(arrivals: list[float], span: float) -> int:
    """The most of `arrivals` (in order) within any `span` seconds."""
    peak, first = 0, 0
    for last, at in enumerate(arrivals):
        while at - arrivals[first] > span:
            first += 1
        peak = max(peak, last - first + 1)
    return peak
