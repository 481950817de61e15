"""Session contexts: the per-client state that travels with every request, and the keys it hangs on.

A context belongs to one client session (an HTTP session, a stdio connection, or in the
stateless era the caller and a handle). Later features hang their state on `state` and register
teardown with `on_close`. The registry is pure: the caller passes the clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Transport = Literal["http", "stdio", "stateless", "memory"]
Closer = Callable[[], Awaitable[None]]


def state_key(*parts: str) -> str:
    """One key for a sequence of texts, different for every different sequence.

    Each part has its `%` and `:` escaped before the parts are joined with `:`, so the key splits
    back into exactly its parts (`urllib.parse.unquote` each piece) and no two sequences meet.
    Plain names stay readable: `api_key:alice`.
    """
    return ":".join(part.replace("%", "%25").replace(":", "%3A") for part in parts)


@dataclass(eq=False, slots=True)
class SessionContext:
    """State of one client session.

    `caller` is the caller's key (see `gateway.auth.identity.caller_key`), on which every piece of
    per-caller state keys. `group` is the tool group the session was opened on (`/mcp/g/<group>`,
    `stdio --group`), fixed for its life; None for the whole catalog. `principal` is set when the
    credential names someone other than `caller`: anonymous callers each have a key of their own,
    and all share the principal `anonymous`. `handle` is what a stateless-era client passes back to
    reach this state.
    """

    id: str
    caller: str
    transport: Transport
    created_at: float
    last_seen: float
    role: str | None = None
    group: str | None = None
    principal: str | None = None
    handle: str | None = None
    listed: bool = False
    """Whether a tools/list of this session was answered: only the first waits for the servers
    (`Listing.first_listing`)."""
    state: dict[str, Any] = field(default_factory=dict)
    closers: list[Closer] = field(default_factory=list)

    def on_close(self, closer: Closer) -> None:
        """Run `closer` when the session ends or idles out (last registered runs first)."""
        self.closers.append(closer)

    async def close(self) -> None:
        """Release everything registered with `on_close`."""
        while self.closers:
            await self.closers.pop()()


class SessionRegistry:
    """Live session contexts by id, with idle expiry."""

    def __init__(self, idle_timeout: float) -> None:
        self.idle_timeout = idle_timeout
        self._sessions: dict[str, SessionContext] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> SessionContext | None:
        """The live context with that id, if any."""
        return self._sessions.get(session_id)

    def open(
        self, session_id: str, caller: str, transport: Transport, now: float, *, handle: str | None = None
    ) -> SessionContext:
        """The context for `session_id`, created on first sight; marks it as just used."""
        context = self._sessions.get(session_id)
        if context is None:
            context = SessionContext(session_id, caller, transport, created_at=now, last_seen=now, handle=handle)
            self._sessions[session_id] = context
        context.last_seen = now
        return context

    def live(self) -> list[SessionContext]:
        """Every live session."""
        return list(self._sessions.values())

    def release(self, session_id: str) -> SessionContext | None:
        """Forget a session; the caller closes the returned context."""
        return self._sessions.pop(session_id, None)

    def expired(self, now: float) -> list[SessionContext]:
        """Remove and return every session idle for longer than the timeout."""
        stale = [s for s in self._sessions.values() if now - s.last_seen > self.idle_timeout]
        for context in stale:
            del self._sessions[context.id]
        return stale
