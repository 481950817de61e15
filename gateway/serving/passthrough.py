"""What passes from upstreams to clients beyond answers: requests for the user, log messages,
resource updates, task status, each to the right client session and within its limits.

The front door binds the client of each request (`gateway.clients.downstream`); this module is the
gateway's side of it. Sampling and elicitation count against the caller's budget like a call and
are audited (outcome `sampling` or `elicitation`). Log messages reach the client whose request
caused them, or, outside a request, every session that can see the server, at most `LOG_RATE` a
second per session and server (`LogThrottle`). Resource updates reach the sessions subscribed to
the resource, under the URI they know it by; a task's status, the session that created the task.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

import mcp_types as types

from gateway.clients.downstream import ClientRequest, Downstream
from gateway.clients.session import SessionContext
from gateway.clients.tasks import TaskBook
from gateway.errors import GatewayError
from gateway.pipeline.audit import AuditEntry, AuditStore
from gateway.pipeline.budgets import Budgets
from gateway.runtime import requestid
from gateway.upstreams.clientside import Notice
from gateway.upstreams.connection import Upstream

log = logging.getLogger(__name__)

Deliver = Callable[[SessionContext, Notice], Awaitable[None]]
THROTTLE_KEY = "gateway.log_throttle"
LEVEL_KEY = "gateway.log_level"
LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


@dataclass(frozen=True, slots=True, eq=False)
class Subscription:
    """One subscription to a resource: the session's, the URI it knows, where the resource lives,
    and how its updates reach the client (by default the session's back channel; a 2026-era
    `subscriptions/listen` stream has a `send` of its own, one for each stream)."""

    session: SessionContext
    exposed: str
    server: str
    original: str
    send: Deliver | None = None


class LogThrottle:
    """At most `RATE` log messages a second pass; the rest are counted, and the count is reported
    (once) with the next message that passes. Pure: `clock` gives seconds."""

    RATE = 20

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._window = -1.0
        self._passed = 0
        self._dropped = 0

    def admit(self) -> tuple[bool, int]:
        """Whether this message passes, and how many dropped before it are to be reported now."""
        now = self._clock()
        if now - self._window >= 1.0:
            self._window, self._passed = now, 0
        if self._passed >= self.RATE:
            self._dropped += 1
            return False, 0
        self._passed += 1
        dropped, self._dropped = self._dropped, 0
        return True, dropped


def kind_of(request: ClientRequest) -> str:
    """The audit outcome of an upstream's request to a client."""
    if isinstance(request, types.CreateMessageRequest):
        return "sampling"
    if isinstance(request, types.ElicitRequest):
        return "elicitation"
    return "roots"


class PassThrough:
    """Budgets, audit, logging and subscriptions for what upstreams send clients."""

    def __init__(
        self,
        budgets: Budgets,
        audit: Callable[[], AuditStore],
        sessions: Callable[[], Iterable[SessionContext]],
        sources: Callable[[SessionContext], set[str]],
        upstreams: Mapping[str, Upstream],
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self._budgets = budgets
        self._audit = audit
        self._sessions = sessions
        self._sources = sources
        self._upstreams = upstreams
        self._clock = clock
        self._wall_clock = wall_clock
        self._subscriptions: dict[tuple[str, str], list[Subscription]] = {}
        self.tasks = TaskBook(wall_clock)
        """Every session's task-augmented calls, under the gateway's own task ids."""
        self.deliver: Deliver | None = None
        """How a notice reaches a session's client; set by the front door."""

    async def admit(self, downstream: Downstream, server: str, request: ClientRequest) -> types.ErrorData | None:
        """Count a sampling or elicitation request against the caller's budget and audit it; the
        error the server gets when the budget refuses it, else None. Roots are neither."""
        kind = kind_of(request)
        if kind == "roots":
            return None
        session = downstream.session
        outcome, refusal = kind, None
        try:
            await self._budgets.charge(session)
        except GatewayError as error:
            outcome, refusal = "refused:budget", error.message
        await self._audit().record(
            AuditEntry(
                epoch=self._wall_clock(),
                session=session.id,
                caller=session.caller,
                tool=downstream.subject,
                args_digest="",
                outcome=outcome,
                duration_ms=0.0,
                detail=f"{kind} requested by server '{server}'" + (f": {refusal}" if refusal else ""),
                request_id=requestid.current() or "",
            )
        )
        return None if refusal is None else types.ErrorData(code=types.INVALID_REQUEST, message=refusal)

    async def log(
        self,
        session: SessionContext,
        server: str,
        params: types.LoggingMessageNotificationParams,
        send: Deliver | None = None,
    ) -> None:
        """Pass one log message of `server` to `session` (through `send`, by default the session's
        back channel), within the session's level and the flood limit."""
        deliver = send or self.deliver
        if deliver is None or not self._wanted(session, params.level):
            return
        throttle: LogThrottle = session.state.setdefault(f"{THROTTLE_KEY}.{server}", LogThrottle(self._clock))
        passes, dropped = throttle.admit()
        if dropped:
            await deliver(session, types.LoggingMessageNotification(params=dropped_notice(server, dropped)))
        if passes:
            await deliver(session, types.LoggingMessageNotification(params=params))

    def set_level(self, session: SessionContext, level: types.LoggingLevel) -> None:
        """Pass the session log messages of `level` and above from now on."""
        session.state[LEVEL_KEY] = level

    async def set_logging_level(self, session: SessionContext, level: types.LoggingLevel) -> None:
        """Send the session log messages of `level` and above; ask each server it can see for them."""
        self.set_level(session, level)
        for name in sorted(self._sources(session)):
            upstream = self._upstreams.get(name)
            if upstream is not None:
                await upstream.set_logging_level(level)

    def _wanted(self, session: SessionContext, level: types.LoggingLevel) -> bool:
        wanted = session.state.get(LEVEL_KEY)
        return wanted is None or LEVELS.index(level) >= LEVELS.index(wanted)

    async def notice(self, server: str, notice: Notice, owner: SessionContext | None) -> None:
        """Route a notice an upstream sent outside any request: a log message to the sessions that
        can see the server (or the one whose own instance it is), an update to the resource's subscribers."""
        if isinstance(notice, types.LoggingMessageNotification):
            sessions = [owner] if owner is not None else [s for s in self._sessions() if server in self._sources(s)]
            for session in sessions:
                await self.log(session, server, notice.params)
            return
        if isinstance(notice, types.TaskStatusNotification):
            await self._task_status(server, notice.params, owner)
            return
        for subscription in list(self._subscriptions.get((server, notice.params.uri), ())):
            if owner is not None and subscription.session is not owner:
                continue
            deliver = subscription.send or self.deliver
            if deliver is not None:
                params = notice.params.model_copy(update={"uri": subscription.exposed})
                await deliver(subscription.session, types.ResourceUpdatedNotification(params=params))

    async def _task_status(
        self, server: str, params: types.TaskStatusNotificationParams, owner: SessionContext | None
    ) -> None:
        """Tell the session that created the task its new status, under the gateway's id for it."""
        for entry in self.tasks.running_on(server, params.task_id):
            if self.deliver is None or (owner is not None and entry.session is not owner):
                continue
            told = types.TaskStatusNotificationParams.model_validate(self.tasks.seen(entry, params).model_dump())
            await self.deliver(entry.session, types.TaskStatusNotification(params=told))

    def subscribe(self, subscription: Subscription) -> bool:
        """Record a subscription; True when it is the first to that resource, which the server must be told of.

        A session subscribes once over its back channel, however often it asks, until it ends; a
        subscription with a `send` of its own lasts until `drop`ped."""
        key = (subscription.server, subscription.original)
        subscribers = self._subscriptions.setdefault(key, [])
        first = not subscribers
        if subscription.send is not None:
            subscribers.append(subscription)
        elif not any(s.session is subscription.session and s.send is None for s in subscribers):
            subscribers.append(subscription)
            subscription.session.on_close(self._forget(subscription.session, key))
        return first

    def unsubscribe(self, session: SessionContext, server: str, original: str) -> bool:
        """Drop a session's subscription over its back channel; True when it was the last to the
        resource, and the server may stop sending."""
        return self._keep((server, original), lambda s: s.session is not session or s.send is not None)

    def drop(self, subscription: Subscription) -> bool:
        """Drop one subscription; True when it was the last to the resource."""
        return self._keep((subscription.server, subscription.original), lambda s: s is not subscription)

    def _keep(self, key: tuple[str, str], kept: Callable[[Subscription], bool]) -> bool:
        subscribers = [s for s in self._subscriptions.get(key, ()) if kept(s)]
        if subscribers:
            self._subscriptions[key] = subscribers
            return False
        return self._subscriptions.pop(key, None) is not None

    def _forget(self, session: SessionContext, key: tuple[str, str]) -> Callable[[], Awaitable[None]]:
        async def forget() -> None:
            self.unsubscribe(session, *key)

        return forget


def dropped_notice(server: str, dropped: int) -> types.LoggingMessageNotificationParams:
    """The message that stands for log messages a flood limit held back."""
    return types.LoggingMessageNotificationParams(
        level="warning",
        logger="gateway",
        data=f"{dropped} messages dropped from server '{server}': more than {LogThrottle.RATE} a second",
    )
