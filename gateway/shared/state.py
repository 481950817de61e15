"""The seam of shared state: what replicas must see alike, and the in-process side of it.

Above the seam the gateway asks a `SharedState` for five things and never learns where they live:
- `budgets`, the `BudgetCounter` of the budget step;
- `begin` and `save`: a stateless-era session's state (active skills, the loop window) by session
  id, so that whichever replica answers a call sees the calls before it; `begin` may count the
  call against its budget in the same round trip, and `save` writes behind the call;
- `sessions`, the `SessionDirectory` the HTTP session limits count in;
- `announce` and `follow`: a change of the API registrations on one replica reaches the others,
  which read the registrations again.
`LocalState` is the single-node default: budgets counted in the process, session state left on
the session's context, no one to tell. `ShareSessionState` is the pipeline step that moves a
session's state through the seam around each call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import mcp_types as types

from gateway.background import Report
from gateway.config.model import GatewaySettings
from gateway.pipeline import loops
from gateway.pipeline.budgets import ADMISSION_NOTE, Admission, BudgetCounter, BudgetTracker, Charge
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.session import SessionContext
from gateway.shared.sessions import LocalSessions, SessionDirectory
from gateway.skills import host
from gateway.skills.disclosure import ActiveSkills

log = logging.getLogger(__name__)

ChangeHandler = Callable[[], Awaitable[None]]
CHANGES = "changes"
"""The name the follower of the other replicas' announcements runs and reports under."""
WRITES = "session_state"
"""The name the writer of session state behind the calls runs and reports under."""
# Calls of the session running in this process: its state is read only when none runs, so a
# concurrent call's objects are never swapped under it.
RUNNING_KEY = "gateway.shared.running"


@dataclass(frozen=True, slots=True)
class Begun:
    """What a call learns in its one round trip: its session's stored state texts (keys never
    saved, or expired, left out), and its budget admission when the backend counted it ahead."""

    values: dict[str, str]
    admission: Admission | None


class SharedState(Protocol):
    """Where the state replicas share lives."""

    shared: bool
    """Whether other processes see this state; False for the in-process default."""
    budgets: BudgetCounter
    sessions: SessionDirectory

    async def begin(self, session_id: str, keys: Sequence[str], charge: Charge | None) -> Begun:
        """Before a call: the stored texts of `keys` of a session, and (when the backend can do both
        at once) the call counted against `charge`."""
        ...

    async def refund(self, admission: Admission) -> None:
        """Uncount a call counted ahead by `begin` that was refused before the budget step."""
        ...

    def save(self, session_id: str, values: Mapping[str, str], ttl: float) -> None:
        """Write texts of a session behind the call, each kept `ttl` seconds after its last save. A
        save never overtakes a later one of the same session, and a read of this process never
        overtakes its saves."""
        ...

    async def flush(self) -> None:
        """Write every pending save now."""
        ...

    async def write_behind(self, report: Report) -> None:
        """Write pending saves off the callers' path; runs until cancelled, telling `report` how it stands."""
        ...

    async def announce(self) -> None:
        """Tell the other replicas that the API registrations changed."""
        ...

    async def follow(self, on_change: ChangeHandler, report: Report) -> None:
        """Call `on_change` whenever another replica announces a change, and after missing
        announcements (when any may have been missed); runs until cancelled, telling `report` how it stands."""
        ...

    async def aclose(self) -> None:
        """Write what is pending and release connections."""
        ...


class LocalState:
    """The single-node default: counts in this process, state on the session's context."""

    shared = False

    def __init__(self, clock: Callable[[], float]) -> None:
        self.budgets: BudgetCounter = BudgetTracker(clock)
        self.sessions: SessionDirectory = LocalSessions()

    async def begin(self, session_id: str, keys: Sequence[str], charge: Charge | None) -> Begun:
        """Nothing: the context already holds the session's state, and the budget step counts."""
        return Begun({}, None)

    async def refund(self, admission: Admission) -> None:
        """Nothing: `begin` counts nothing ahead."""

    def save(self, session_id: str, values: Mapping[str, str], ttl: float) -> None:
        """Nothing to do: the context keeps the state."""

    async def flush(self) -> None:
        """Nothing is pending."""

    async def write_behind(self, report: Report) -> None:
        """Nothing will be pending."""
        await anyio.sleep_forever()

    async def announce(self) -> None:
        """No other replica to tell."""

    async def follow(self, on_change: ChangeHandler, report: Report) -> None:
        """No other replica will announce anything."""
        await anyio.sleep_forever()

    async def aclose(self) -> None:
        """Nothing is open."""


@dataclass(frozen=True, slots=True)
class Codec:
    """How one piece of session state (an entry of `SessionContext.state`) becomes text and back."""

    encode: Callable[[Any], str]
    decode: Callable[[str], Any]


def session_codecs(settings: GatewaySettings) -> dict[str, Codec]:
    """The session state replicas share: active skills and the loop-detection window."""

    def skills(text: str) -> ActiveSkills:
        return ActiveSkills.restore(json.loads(text), settings.skill_capacity, settings.max_extended_tools)

    def detector(text: str) -> loops.LoopDetector:
        return loops.LoopDetector.restore(json.loads(text), settings.loop_window, settings.loop_repeat_limit)

    return {
        host.STATE_KEY: Codec(lambda active: json.dumps(active.snapshot()), skills),
        loops.STATE_KEY: Codec(lambda found: json.dumps(found.snapshot()), detector),
    }


class ShareSessionState:
    """Pipeline step: a stateless-era session's state read through the seam before the call, in
    the same round trip that counts the call against its budget (`charge_of`, when given), and
    written back after it when it changed (refused calls too: a loop's block must hold on every
    replica).

    The tools' pipeline writes behind the answer (`write_through` False): the call's path keeps its
    one round trip. The meta-tools' pipeline writes through: a skill loaded or unloaded is in the
    shared state before the client hears of it, whichever replica it calls next.

    Only stateless-era sessions move: a handshake-era session lives in one replica's SDK, and
    the load balancer keeps its requests there.
    """

    def __init__(
        self,
        state: SharedState,
        codecs: Mapping[str, Codec],
        ttl: float,
        *,
        charge_of: Callable[[SessionContext], Charge | None] | None = None,
        write_through: bool = False,
    ) -> None:
        self._state = state
        self._codecs = dict(codecs)
        self._ttl = ttl
        self._charge_of = charge_of
        self._write_through = write_through

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        session = call.session
        if not self._state.shared or session.transport != "stateless":
            return await call_next(call)
        running: int = session.state.get(RUNNING_KEY, 0)
        if not running:
            charge = self._charge_of(session) if self._charge_of is not None else None
            begun = await self._state.begin(session.id, list(self._codecs), charge)
            # What was read is what the state encodes to (or, if unreadable, differs: written afresh).
            before = begun.values
            self._apply(session, begun.values)
            if begun.admission is not None:
                call.notes[ADMISSION_NOTE] = begun.admission
        else:
            before = self._encode(session)
        session.state[RUNNING_KEY] = running + 1
        try:
            return await call_next(call)
        finally:
            session.state[RUNNING_KEY] -= 1
            admission: Admission | None = call.notes.pop(ADMISSION_NOTE, None)
            if admission is not None and admission.refused is None:
                await self._state.refund(admission)
            after = self._encode(session)
            if after != before:
                self._state.save(session.id, after, self._ttl)
                if self._write_through:
                    await self._state.flush()

    def _apply(self, session: SessionContext, stored: Mapping[str, str]) -> None:
        for key, codec in self._codecs.items():
            text = stored.get(key)
            if text is None:
                session.state.pop(key, None)
                continue
            try:
                session.state[key] = codec.decode(text)
            except (ValueError, KeyError, TypeError):
                log.warning("shared state %r of session %s is unreadable; starting it afresh", key, session.id)
                session.state.pop(key, None)

    def _encode(self, session: SessionContext) -> dict[str, str]:
        return {key: codec.encode(session.state[key]) for key, codec in self._codecs.items() if key in session.state}
