"""Call budgets: how many calls a role may make per minute, at once, and in one session.

Four limits, each optional, taken from the role of the session making the call:
- `calls_per_minute`: calls of one session in any 60-second window (sliding);
- `caller_calls_per_minute`: calls of one caller across all its sessions in any 60-second window;
- `concurrent`: calls of one caller running at the same time;
- `max_calls_per_session`: calls in one session, ever.

For the two caller-wide limits every anonymous caller counts as one caller.

Only admitted calls count; a refused call uses nothing. A call counts when it starts, whatever
its outcome. `Budgets` is the pipeline step; it counts through a `BudgetCounter`, the seam of
where the counts live: `BudgetTracker`, the pure in-process core (the caller passes the clock), or
the Redis counter shared by replicas (`gateway.shared.redisstate`).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import mcp_types as types

from gateway.auth.policy import Budget
from gateway.clients.session import Closer, SessionContext
from gateway.errors import ToolRefusedError
from gateway.pipeline.chain import CallNext, ToolCall

WINDOW_SECONDS = 60.0
# Marks a session whose end the step already listens for, so it registers once.
STATE_KEY = "gateway.budgets.watched"
# The note of a call counted ahead (`Admission`), which the step takes instead of counting it.
ADMISSION_NOTE = "gateway.budgets.admission"


class BudgetExceededError(ToolRefusedError):
    """The call would go past one of the role's budget limits."""

    reason = "budget"

    def __init__(self, limit: str, message: str, retry_after: float | None, *, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.limit = limit
        self.retry_after = retry_after


@dataclass(slots=True)
class _SessionUsage:
    total: int = 0
    recent: deque[float] = field(default_factory=deque)


@dataclass(slots=True)
class _CallerUsage:
    running: int = 0
    recent: deque[float] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class Charge:
    """A call to count: against `budget`, for this session and caller."""

    session_id: str
    caller: str
    budget: Budget


@dataclass(frozen=True, slots=True)
class Admission:
    """A call counted ahead of the budget step, in the round trip that read its session's state
    (see `gateway.shared`); the step takes it instead of counting the call again."""

    charge: Charge
    ticket: str
    """Names the call among the counted ones."""
    refused: BudgetExceededError | None

    def take(self) -> str:
        """The ticket `BudgetCounter.free` takes (empty when the budget limits no concurrency), or
        raise the refusal."""
        if self.refused is not None:
            raise self.refused
        return self.ticket if self.charge.budget.concurrent is not None else ""


class BudgetCounter(Protocol):
    """Where calls are counted: admit one against a budget, free its concurrency slot, forget a session."""

    async def admit(self, session_id: str, caller: str, budget: Budget) -> str:
        """Admit one call or raise `BudgetExceededError`; the ticket returned is what `free` takes."""
        ...

    async def free(self, caller: str, ticket: str) -> None:
        """End one admitted call of `caller`, freeing its concurrency slot."""
        ...

    async def forget(self, session_id: str) -> None:
        """A session ended on this process; its caller's counts stay."""
        ...


class BudgetTracker:
    """Counts calls per session and per caller against budgets. Pure: `clock` gives seconds.

    Its async methods make it the in-process `BudgetCounter`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._sessions: dict[str, _SessionUsage] = {}
        self._callers: dict[str, _CallerUsage] = {}
        self._last_sweep = clock()

    def acquire(self, session_id: str, caller: str, budget: Budget) -> None:
        """Admit one call or raise `BudgetExceededError`; an admitted call must be `release`d."""
        now = self._clock()
        self._sweep(now)
        session = self._sessions.setdefault(session_id, _SessionUsage())
        owner = self._callers.setdefault(caller, _CallerUsage())
        _expire(session.recent, now)
        _expire(owner.recent, now)
        _check(budget, session, owner, now)
        session.total += 1
        session.recent.append(now)
        owner.recent.append(now)
        owner.running += 1

    def release(self, caller: str) -> None:
        """End one admitted call of `caller`, freeing its concurrency slot."""
        owner = self._callers.get(caller)
        if owner is not None and owner.running > 0:
            owner.running -= 1

    def end_session(self, session_id: str) -> None:
        """Forget a session that ended; its caller's counts stay."""
        self._sessions.pop(session_id, None)

    async def admit(self, session_id: str, caller: str, budget: Budget) -> str:
        """`acquire`, as a `BudgetCounter`; calls in one process need no ticket."""
        self.acquire(session_id, caller, budget)
        return ""

    async def free(self, caller: str, ticket: str) -> None:
        """`release`, as a `BudgetCounter`."""
        self.release(caller)

    async def forget(self, session_id: str) -> None:
        """`end_session`, as a `BudgetCounter`."""
        self.end_session(session_id)

    def _sweep(self, now: float) -> None:
        # Callers come and go; drop the idle ones once a window so the map cannot grow without end.
        if now - self._last_sweep < WINDOW_SECONDS:
            return
        self._last_sweep = now
        for caller, owner in list(self._callers.items()):
            _expire(owner.recent, now)
            if not owner.recent and not owner.running:
                del self._callers[caller]


def _expire(recent: deque[float], now: float) -> None:
    while recent and recent[0] <= now - WINDOW_SECONDS:
        recent.popleft()


def _check(budget: Budget, session: _SessionUsage, owner: _CallerUsage, now: float) -> None:
    limit = budget.max_calls_per_session
    if limit is not None and session.total >= limit:
        raise refusal("max_calls_per_session", limit, None)
    for name, recent, cap in (
        ("calls_per_minute", session.recent, budget.calls_per_minute),
        ("caller_calls_per_minute", owner.recent, budget.caller_calls_per_minute),
    ):
        if cap is not None and len(recent) >= cap:
            raise refusal(name, cap, max(1, math.ceil(recent[0] + WINDOW_SECONDS - now)))
    cap = budget.concurrent
    if cap is not None and owner.running >= cap:
        raise refusal("concurrent", cap, None)


def refusal(limit: str, cap: int, wait: int | None) -> BudgetExceededError:
    """The error refusing a call past `limit` (whose value is `cap`); `wait` is when a window frees a call."""
    if limit == "max_calls_per_session":
        return BudgetExceededError(
            limit,
            f"Refused: this session has used all {cap} calls its role allows (max_calls_per_session).",
            None,
            hint="No more calls are possible in this session; tell the user the budget is spent.",
        )
    if limit == "concurrent":
        return BudgetExceededError(
            limit,
            f"Refused: {cap} of your calls are already running, the most your role allows at once (concurrent); "
            "retry when one of them has finished.",
            None,
            hint="Wait for your running calls, then call again.",
        )
    whose = "this session" if limit == "calls_per_minute" else "your sessions together"
    seconds = wait or 1
    return BudgetExceededError(
        limit,
        f"Refused: {whose} made {cap} calls in the last minute, the most its role allows ({limit}); "
        f"retry in {seconds} seconds.",
        float(seconds),
        hint="Wait before calling again, or tell the user the call budget is reached.",
    )


class Budgets:
    """Pipeline step: refuse calls past the budget of the session's role."""

    def __init__(
        self,
        budget_of: Callable[[str | None], Budget | None],
        clock: Callable[[], float] = time.monotonic,
        counter: BudgetCounter | None = None,
    ) -> None:
        self._budget_of = budget_of
        self.tracker: BudgetCounter = counter or BudgetTracker(clock)

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Admit the call against the role's budget, run it, then free its concurrency slot."""
        budget = self._budget_of(call.session.role)
        if budget is None:
            return await call_next(call)
        # Anonymous sessions each keep their own state but count together against caller-wide
        # limits: otherwise a fresh session (or, in the stateless era, a fresh request) would
        # start a fresh budget.
        session = call.session
        caller = session.principal or session.caller
        admission: Admission | None = call.notes.pop(ADMISSION_NOTE, None)
        if admission is not None:
            ticket = admission.take()
        else:
            ticket = await self.tracker.admit(session.id, caller, budget)
        if not session.state.get(STATE_KEY):
            session.state[STATE_KEY] = True
            session.on_close(self._forget(session.id))
        try:
            return await call_next(call)
        finally:
            await self.tracker.free(caller, ticket)

    def charge_of(self, session: SessionContext) -> Charge | None:
        """What a call of the session would be counted against now; None when its role has no budget."""
        budget = self._budget_of(session.role)
        if budget is None:
            return None
        return Charge(session.id, session.principal or session.caller, budget)

    async def charge(self, session: SessionContext) -> None:
        """Count one request an upstream made of the session's client (sampling, elicitation) like a
        call that ends at once; raise `BudgetExceededError` when the role's budget refuses it. The
        call that caused it already holds a concurrency slot, so concurrency is not checked again."""
        budget = self._budget_of(session.role)
        if budget is None:
            return
        caller = session.principal or session.caller
        ticket = await self.tracker.admit(session.id, caller, replace(budget, concurrent=None))
        await self.tracker.free(caller, ticket)

    def _forget(self, session_id: str) -> Closer:
        async def forget() -> None:
            await self.tracker.forget(session_id)

        return forget
