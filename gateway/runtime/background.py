"""The service's background loops, kept running: none of them may end the service.

Every loop the service starts (following the registrations other replicas change, writing session
state behind, the HTTP sessions' heartbeats, shipping the audit spool, expiring idle sessions,
the sweepers, the configuration watch) runs under `Background.keep`: when it raises, the failure
is logged and reported, and the loop runs again after a backoff that doubles while it keeps
failing. A loop that rides out an outage itself (Redis away, PostgreSQL down) reports how it
stands through `report` while it retries. `/readyz` shows admins every loop's condition: which
is degraded, why, and since when.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from gateway.errors import GatewayError, describe_error
from gateway.runtime.backoff import Backoff

log = logging.getLogger(__name__)

RETRY_INITIAL = 0.5
"""Seconds before a loop that failed runs again, doubled after each failure in a row."""
RETRY_MAXIMUM = 10.0
"""The longest wait between two runs of a failing loop; a loop that ran this long without
failing counts as working again, and its next failure waits `RETRY_INITIAL` again."""

Report = Callable[[str, str | None], None]
"""How a loop tells how it stands: its name, and why it fails now (None once it works)."""
Loop = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Condition:
    """How one loop stands: working (`error` None), or failing since `since` (wall clock),
    `failures` times in a row; `rerun` is when `keep` ran it again after its latest failure."""

    error: str | None = None
    since: float = 0.0
    failures: int = 0
    rerun: float | None = None

    def as_dict(self) -> dict[str, object]:
        """The condition as `/readyz` shows it."""
        if self.error is None:
            return {"state": "ok"}
        return {"state": "degraded", "error": self.error, "since": self.since, "failures": self.failures}


class Background:
    """The named loops of one service and their conditions; `attach` gives the task group they run in.

    `clock` (monotonic) times the backoff, `wall_clock` stamps when a loop began failing, `sleep`
    waits out a backoff; `redact` keeps secrets out of the errors shown.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        redact: Callable[[str], str] = str,
        *,
        initial: float = RETRY_INITIAL,
        maximum: float = RETRY_MAXIMUM,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._redact = redact
        self._initial = initial
        self._maximum = maximum
        self._sleep = sleep
        self._group: TaskGroup | None = None
        self._conditions: dict[str, Condition] = {}

    def attach(self, group: TaskGroup) -> None:
        """Start loops in `group` from now on (the service's own)."""
        self._group = group

    def start(self, name: str, loop: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run `loop(*args)` in the attached task group, kept by `keep` under `name`."""
        assert self._group is not None, "attach the service's task group first"
        self._group.start_soon(self.keep, name, partial(loop, *args), name=name)

    async def keep(self, name: str, loop: Loop) -> None:
        """Run `loop` until it returns or is cancelled; each time it raises, report why and run it
        again after the backoff."""
        backoff = Backoff(self._initial, self._maximum, self._maximum, self._clock)
        self._conditions.setdefault(name, Condition())
        while True:
            backoff.ready()
            try:
                await loop()
                return
            except GatewayError as error:  # an outage it met (a store, Redis): said without a traceback
                delay = backoff.failed()
                log.warning("%s failed (%s); running it again in %g s", name, error.message, delay)
                self.report(name, error.message)
            except Exception as error:  # no background loop may end the service: it runs again
                delay = backoff.failed()
                log.exception("%s failed; running it again in %g s", name, delay)
                self.report(name, describe_error(error))
            await self._sleep(delay)
            current = self._conditions[name]
            if current.error is not None:
                self._conditions[name] = Condition(current.error, current.since, current.failures, self._clock())

    def report(self, name: str, error: str | None) -> None:
        """Record how the loop `name` stands: failing because of `error`, or working (None)."""
        current = self._conditions.get(name)
        if error is None:
            if current is None or current.error is not None:
                if current is not None:
                    log.info("%s works again", name)
                self._conditions[name] = Condition()
            return
        text = self._redact(error)
        if current is None or current.error is None:
            self._conditions[name] = Condition(text, self._wall_clock(), 1)
        else:
            self._conditions[name] = Condition(text, current.since, current.failures + 1)

    def conditions(self) -> dict[str, Condition]:
        """Every loop's condition, by name; one that `keep` ran again and that has not failed for
        `maximum` seconds since counts as working."""
        now = self._clock()
        for name, condition in list(self._conditions.items()):
            if condition.rerun is not None and now - condition.rerun >= self._maximum:
                self._conditions[name] = Condition()
        return dict(sorted(self._conditions.items()))
