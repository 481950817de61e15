"""The client sessions of this process: opened per request and bound to their caller and role,
a stateless-era caller's handles bounded, idled out, closed, and listeners told when one's own
tool list changes; `gateway.clients.session` holds the contexts and their registry."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from gateway.auth.identity import Identity, caller_key
from gateway.clients.session import SessionContext, SessionRegistry, Transport
from gateway.config.model import GatewaySettings
from gateway.pipeline.audit import AuditEntry, AuditStore
from gateway.runtime.metrics import REFUSED, Metrics

log = logging.getLogger(__name__)

SessionListener = Callable[[SessionContext], Awaitable[None]]


class Sessions:
    """The live client sessions, what opens and closes them, and who is told of their changes.

    `audit` gives the audit store once the gateway runs; `group` is the gateway's task group once
    it runs, where the sessions a caller's new handle pushes out are closed.
    """

    def __init__(
        self,
        settings: GatewaySettings,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        audit: Callable[[], AuditStore],
        metrics: Metrics,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._wall_clock = wall_clock
        self._audit = audit
        self._metrics = metrics
        self.registry = SessionRegistry(settings.session_idle_timeout)
        self._listeners: list[SessionListener] = []
        self.group: TaskGroup | None = None

    def __len__(self) -> int:
        return len(self.registry)

    def get(self, session_id: str) -> SessionContext | None:
        """The live context with that id, if any."""
        return self.registry.get(session_id)

    def live(self) -> list[SessionContext]:
        """Every live session."""
        return self.registry.live()

    def open(
        self,
        session_id: str,
        identity: Identity,
        transport: Transport,
        handle: str | None = None,
        group: str | None = None,
    ) -> SessionContext:
        """The context of a client session, created on first use and bound to its caller and role.

        The context's caller is the unambiguous key of `identity` (an anonymous session's own);
        `handle` names a stateless-era caller's state, bounded per caller like HTTP sessions;
        `group` is the tool group whose endpoint the session was opened on, kept for its life.
        """
        caller = caller_key(identity, session_id)
        fresh = self.registry.get(session_id) is None
        if fresh and handle is not None:
            self._make_room_for_handle(caller)
        context = self.registry.open(session_id, caller, transport, self._clock(), handle=handle)
        # The role is the one of the latest credential: a token that now names another role applies at once.
        context.role = identity.role
        if fresh:
            context.principal = identity.key if identity.key != caller else None
            context.group = group
        return context

    def _make_room_for_handle(self, caller: str) -> None:
        # Handles are chosen by the client; the limit per caller keeps one caller from growing state without end.
        limit = self._settings.max_sessions_per_caller
        mine = sorted(
            (s for s in self.registry.live() if s.handle is not None and s.caller == caller),
            key=lambda s: s.last_seen,
        )
        for context in mine[: max(0, len(mine) - limit + 1)]:
            self.registry.release(context.id)
            if self.group is not None:
                self.group.start_soon(context.close)

    async def record_event(self, caller: str, session_id: str, outcome: str, detail: str) -> None:
        """Audit a session refused or evicted at the HTTP edge's session limits; count a refusal."""
        if outcome.startswith(REFUSED):
            self._metrics.refusal(outcome.removeprefix(REFUSED))
        entry = AuditEntry(
            epoch=self._wall_clock(),
            session=session_id,
            caller=caller,
            tool="",
            args_digest="",
            outcome=outcome,
            duration_ms=0.0,
            detail=detail,
        )
        await self._audit().record(entry)

    async def close(self, session_id: str) -> None:
        """Release a session that ended."""
        context = self.registry.release(session_id)
        if context is not None:
            await context.close()

    async def close_all(self) -> None:
        """Release every session: the gateway stops."""
        for context in self.registry.expired(float("inf")):
            await context.close()

    async def expire_idle(self) -> None:
        """Release each session idle for longer than `session_idle_timeout`, until cancelled."""
        interval = max(1.0, min(60.0, self._settings.session_idle_timeout / 4))
        while True:
            await anyio.sleep(interval)
            for context in self.registry.expired(self._clock()):
                log.info("session %s idled out", context.id)
                await context.close()

    def on_change(self, listener: SessionListener) -> None:
        """Call `listener` when one session's own tool list changes (skills loaded or left)."""
        self._listeners.append(listener)

    async def changed(self, session: SessionContext) -> None:
        """Tell the listeners that `session`'s own tool list changed (in `list_changed` mode only)."""
        if self._settings.disclosure != "list_changed":
            return
        for listener in list(self._listeners):
            try:
                await listener(session)
            except Exception:  # a client that went away must not break the call that changed its skills
                log.debug("session listener failed", exc_info=True)

    def wall_time(self, instant: float) -> float:
        """An instant of the monotonic clock (when a session started or was last seen) as epoch seconds."""
        return self._wall_clock() - (self._clock() - instant)
