"""The client sessions of this process: opened per request and bound to their caller and role,
a stateless-era caller's handles bounded, idled out, closed, and listeners told when one's own
tool list changes; `gateway.clients.session` holds the contexts and their registry."""

from __future__ import annotations


class Sessions:
    """The live client sessions, what opens and closes them, and who is told of their changes."""

    def open_session(
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
        fresh = self.sessions.get(session_id) is None
        if fresh and handle is not None:
            self._make_room_for_handle(caller)
        context = self.sessions.open(session_id, caller, transport, self._clock(), handle=handle)
        # The role is the one of the latest credential: a token that now names another role applies at once.
        context.role = identity.role
        if fresh:
            context.principal = identity.key if identity.key != caller else None
            context.group = group
        return context

    def _make_room_for_handle(self, caller: str) -> None:
        # Handles are chosen by the client; the limit per caller keeps one caller from growing state without end.
        limit = self.config.settings.max_sessions_per_caller
        mine = sorted(
            (s for s in self.sessions.live() if s.handle is not None and s.caller == caller),
            key=lambda s: s.last_seen,
        )
        for context in mine[: max(0, len(mine) - limit + 1)]:
            self.sessions.release(context.id)
            if self._group is not None:
                self._group.start_soon(context.close)

    async def record_session_event(self, caller: str, session_id: str, outcome: str, detail: str) -> None:
        """Audit a session refused or evicted at the HTTP edge's session limits; count a refusal."""
        if outcome.startswith(REFUSED):
            self.metrics.refusal(outcome.removeprefix(REFUSED))
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
        await self.audit.record(entry)

    async def close_session(self, session_id: str) -> None:
        """Release a session that ended."""
        context = self.sessions.release(session_id)
        if context is not None:
            await context.close()

    async def _close_sessions(self) -> None:
        for context in self.sessions.expired(float("inf")):
            await context.close()

    async def _expire_idle_sessions(self) -> None:
        interval = max(1.0, min(60.0, self.config.settings.session_idle_timeout / 4))
        while True:
            await anyio.sleep(interval)
            for context in self.sessions.expired(self._clock()):
                log.info("session %s idled out", context.id)
                await context.close()

    def on_session_change(self, listener: SessionListener) -> None:
        """Call `listener` when one session's own tool list changes (skills loaded or left)."""
        self._session_listeners.append(listener)

    async def _session_changed(self, session: SessionContext) -> None:
        if self.config.settings.disclosure != "list_changed":
            return
        for listener in list(self._session_listeners):
            try:
                await listener(session)
            except Exception:  # a client that went away must not break the call that changed its skills
                log.debug("session listener failed", exc_info=True)

    def wall_time(self, instant: float) -> float:
        """An instant of the monotonic clock (when a session started or was last seen) as epoch seconds."""
        return self._wall_clock() - (self._clock() - instant)
