"""Who holds which HTTP session: the limits per caller and in total, and the seam that makes them
hold across replicas.

A caller at its own limit makes room by losing its own least recently used idle session (one with
no request in flight and no open event stream); nobody else's session is ever ended to make room.
A caller whose every session is busy, or a newcomer to a full gateway, is refused.

`admit` is the pure rule over one process's sessions. A `SessionDirectory` applies it: `LocalSessions`
over the sessions of this process (the single-node default), the Redis directory
(`gateway.shared.redissessions`) over the sessions of every replica, telling the replica that holds
an evicted session to end it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from gateway.runtime.background import Report


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """How many HTTP sessions one caller, and everyone together, may hold open."""

    per_caller: int
    total: int


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer to a new session: admitted, admitted once `evict` is gone, or refused (`refusal`
    says why). `elsewhere`: the evicted session lives on another replica, which ends it."""

    evict: str | None = None
    refusal: str = ""
    status: int = 200
    elsewhere: bool = False


@dataclass(frozen=True, slots=True)
class HeldSession:
    """One HTTP session this process holds, as the directory of every replica's sessions sees it."""

    id: str
    caller: str
    last_active: float
    """Wall-clock seconds of the end of its latest request."""
    busy: bool


@dataclass(frozen=True, slots=True)
class RemoteSession:
    """An HTTP session another replica holds, as its latest heartbeat told."""

    id: str
    caller: str
    replica: str
    last_active: float


def admit(caller: str, owners: Mapping[str, str], busy: Container[str], limits: SessionLimits) -> Admission:
    """Whether `caller` may open another session, given every open session's owner (least recently
    used first) and the sessions with a request in flight. Only the caller's own sessions are evicted."""
    mine = [session for session, owner in owners.items() if owner == caller]
    over_own = len(mine) >= limits.per_caller
    full = len(owners) >= limits.total
    if not over_own and not full:
        return Admission()
    idle = next((session for session in mine if session not in busy), None)
    if idle is not None:
        return Admission(evict=idle)
    return refused(over_own, len(mine), limits)


def refused(over_own: bool, mine: int, limits: SessionLimits) -> Admission:
    """The refusal of a caller holding `mine` sessions, all busy: over its own limit, or the gateway full."""
    if over_own:
        return Admission(
            refusal=f"Too many open sessions: this caller has {mine} open, the limit is {limits.per_caller}, "
            "and every one is busy. End sessions you no longer need (HTTP DELETE with their Mcp-Session-Id) "
            "or wait for one to finish, then retry.",
            status=429,
        )
    return Admission(
        refusal=f"The gateway is full: {limits.total} sessions are open, its limit, and none of them is an idle "
        "session of this caller. Retry later.",
        status=503,
    )


Held = Callable[[], Sequence[HeldSession]]
EndSession = Callable[[str], Awaitable[None]]


class SessionDirectory(Protocol):
    """Where the HTTP sessions counted against the limits are known: this process's, or every replica's."""

    async def admit(
        self, caller: str, session_id: str, owners: Mapping[str, str], busy: Container[str], limits: SessionLimits
    ) -> Admission:
        """Decide on the new session `session_id` of `caller` (`owners` and `busy` are this process's
        sessions, as for `admit`), and count it when admitted."""
        ...

    async def ended(self, session_id: str) -> None:
        """A session of this process ended."""
        ...

    async def serve(self, held: Held, end_idle: EndSession, end: EndSession, report: Report) -> None:
        """Keep this process's sessions known (`held` lists them), end those another replica evicted
        (`end_idle`) and those an operator ended there (`end`); runs until cancelled, telling
        `report` how it stands."""
        ...

    async def leave(self) -> None:
        """This process stops: its sessions are no longer counted."""
        ...

    async def end_elsewhere(self, session_id: str) -> bool:
        """Have the replica holding `session_id` end it, busy or not; False when no other replica holds it."""
        ...

    async def elsewhere(self) -> list[RemoteSession]:
        """The HTTP sessions the other replicas hold."""
        ...


class LocalSessions:
    """The single-node directory: the process's own sessions are all there are."""

    async def admit(
        self, caller: str, session_id: str, owners: Mapping[str, str], busy: Container[str], limits: SessionLimits
    ) -> Admission:
        """`admit` over this process's sessions."""
        return admit(caller, owners, busy, limits)

    async def ended(self, session_id: str) -> None:
        """Nothing to tell: the process's maps are the directory."""

    async def serve(self, held: Held, end_idle: EndSession, end: EndSession, report: Report) -> None:
        """No other replica evicts or ends anything."""
        await anyio.sleep_forever()

    async def leave(self) -> None:
        """Nothing is shared."""

    async def end_elsewhere(self, session_id: str) -> bool:
        """No other replica holds anything."""
        return False

    async def elsewhere(self) -> list[RemoteSession]:
        """No other replica."""
        return []
