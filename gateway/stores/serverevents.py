"""What happened to each server, kept beside the audit trail (its `server_events` table): each
state its connection entered (`connecting`, `ready`, `reconnecting`, `failed`, ...), and each
restart and change of its configuration, with when. The dashboard draws each server's health
over time from them. Each event names the replica that saw it: replicas sharing one database each
write their own view of a server.

A state changes where no `await` is possible, so events are noted in memory at once and written
by `keep`, a background loop, shortly after; at most `BACKLOG` wait, the oldest dropped first
when the database stays away that long."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from gateway.stores.database import Database, DatabaseError

log = logging.getLogger(__name__)

SERVER_EVENTS = "server_events"
"""The name the loop writing them runs and reports under."""
BACKLOG = 10_000
"""Events noted and not written yet that are kept at most."""
RETRY_INTERVAL = 1.0
"""Seconds before events are written again after the database refused them."""
RESTART, CHANGED, ADDED, REMOVED = "restart", "changed", "added", "removed"
"""The events that are no state: a person restarted the server, changed, added or removed it."""
NOT_STATES = (RESTART, CHANGED, ADDED, REMOVED)


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """One event of one server at `epoch` (seconds), as the replica `replica` saw it."""

    epoch: float
    server: str
    event: str
    detail: str = ""
    replica: str = ""


class ServerEvents:
    """Server events noted as they happen (`note`) by the replica `replica`, written to the database
    `open` gave (`keep`), read back (every replica's)."""

    def __init__(self, clock: Callable[[], float], replica: str) -> None:
        self._clock = clock
        self._replica = replica
        self._waiting: deque[ServerEvent] = deque(maxlen=BACKLOG)
        self._wake = anyio.Event()
        self._db: Database | None = None

    def note(self, server: str, event: str, detail: str = "") -> None:
        """Note that `event` happened to `server` now."""
        self._waiting.append(ServerEvent(self._clock(), server, event, detail, self._replica))
        self._wake.set()

    def open(self, db: Database) -> None:
        """Write to and read from `db` (the audit trail's database, migrated) from now on."""
        self._db = db

    async def keep(self) -> None:
        """Until cancelled: write the events noted, soon after each is noted."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not await self.flush():
                await anyio.sleep(RETRY_INTERVAL)
                self._wake.set()

    async def flush(self) -> bool:
        """Write every event noted so far; False (logged) when the database refused them."""
        db = self._db
        if db is None or not self._waiting:
            return True
        events = list(self._waiting)
        rows = [(event.epoch, event.server, event.event, event.detail, event.replica) for event in events]
        insert = "INSERT INTO server_events (epoch, server, event, detail, replica) VALUES (?, ?, ?, ?, ?)"
        try:
            if db.inline_writes:
                db.execute_many(insert, rows)
            else:
                await anyio.to_thread.run_sync(db.execute_many, insert, rows)
        except DatabaseError as error:
            log.warning("%d server events wait to be written: %s", len(rows), error.message)
            return False
        for _ in events:
            self._waiting.popleft()
        return True

    def between(self, start: float, end: float) -> list[ServerEvent]:
        """The last state each replica saw of each server before `start`, then every event from
        `start` to `end`, in time order."""
        if self._db is None:
            return []
        before = self._db.fetch_all(
            "SELECT e.epoch, e.server, e.event, e.detail, e.replica FROM server_events e"
            " JOIN (SELECT server, replica, MAX(epoch) AS epoch FROM server_events"
            " WHERE epoch < ? AND event NOT IN (?, ?, ?, ?) GROUP BY server, replica) last"
            " ON e.server = last.server AND e.replica = last.replica AND e.epoch = last.epoch"
            " ORDER BY e.epoch, e.id",
            (start, *NOT_STATES),
        )
        during = self._db.fetch_all(
            "SELECT epoch, server, event, detail, replica FROM server_events"
            " WHERE epoch >= ? AND epoch <= ? ORDER BY epoch, id",
            (start, end),
        )
        return [ServerEvent(float(row[0]), row[1], row[2], row[3], row[4]) for row in [*before, *during]]
