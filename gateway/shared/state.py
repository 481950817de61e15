"""The seam of shared state: what replicas must see alike, and the in-process side of it.

Above the seam the gateway asks a `SharedState` for five things and never learns where they live
(and for `replica`, the name of this process among the replicas, which its own notes carry):
- `budgets`, the `BudgetCounter` of the budget step;
- `begin` and `save`: a stateless-era session's state (active skills, the loop window) by session
  id, so that whichever replica answers a call sees the calls before it; `begin` may count the
  call against its budget and append its attempt to the loop window in the same round trip, and
  `save` writes behind the call (the skills as a snapshot, the loop window as edits);
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
import os
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import uuid4

import anyio
import mcp_types as types

from gateway.clients.session import SessionContext
from gateway.config.model import GatewaySettings
from gateway.pipeline import loops
from gateway.pipeline.budgets import ADMISSION_NOTE, Admission, BudgetCounter, BudgetTracker, Charge
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.runtime.background import Report
from gateway.shared.sessions import LocalSessions, SessionDirectory
from gateway.skills import host
from gateway.skills.disclosure import ActiveSkills

log = logging.getLogger(__name__)

ChangeHandler = Callable[[], Awaitable[None]]


def replica_name() -> str:
    """A name for this process unlike any other replica's, past or present: host, pid and a random tail."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:8]}"


CHANGES = "changes"
"""The name the follower of the other replicas' announcements runs and reports under."""
WRITES = "session_state"
"""The name the writer of session state behind the calls runs and reports under."""
# Calls of the session running in this process: its state is read only when none runs, so a
# concurrent call's objects are never swapped under it.
RUNNING_KEY = "gateway.shared.running"


@dataclass(frozen=True, slots=True)
class Held:
    """A call's attempt, appended to its session's loop window in the round trip that reads the
    window, so that a call on another replica right after it counts it; the window keeps its newest
    `cap` attempts."""

    attempt: loops.Attempt
    cap: int


@dataclass(frozen=True, slots=True)
class WindowEdits:
    """Edits of a session's loop window since it was read (`LoopDetector.changes`), applied where
    the window is kept, which keeps its newest `cap` attempts."""

    edits: list[list[str | None]]
    cap: int


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
    replica: str
    """This process's name among the replicas (`replica_name`)."""
    budgets: BudgetCounter
    sessions: SessionDirectory

    async def begin(
        self, session_id: str, keys: Sequence[str], charge: Charge | None, held: Held | None = None
    ) -> Begun:
        """Before a call: the stored texts of `keys` of a session, and (when the backend can do all
        at once) the call counted against `charge` and its attempt `held` appended to the loop
        window after the read."""
        ...

    async def refund(self, admission: Admission) -> None:
        """Uncount a call counted ahead by `begin` that was refused before the budget step."""
        ...

    def save(self, session_id: str, values: Mapping[str, str], ttl: float, edits: WindowEdits | None = None) -> None:
        """Write texts of a session (and `edits` of its loop window) behind the call, each kept
        `ttl` seconds after its last save. A save never overtakes a later one of the same session,
        and a read of this process never overtakes its saves."""
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
        self.replica = replica_name()
        self.budgets: BudgetCounter = BudgetTracker(clock)
        self.sessions: SessionDirectory = LocalSessions()

    async def begin(
        self, session_id: str, keys: Sequence[str], charge: Charge | None, held: Held | None = None
    ) -> Begun:
        """Nothing: the context already holds the session's state, and the budget step counts."""
        return Begun({}, None)

    async def refund(self, admission: Admission) -> None:
        """Nothing: `begin` counts nothing ahead."""

    def save(self, session_id: str, values: Mapping[str, str], ttl: float, edits: WindowEdits | None = None) -> None:
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

    With `holds_attempts` (the tools' pipeline), that round trip also appends the call's attempt to
    the session's loop window, so the next call sees it whichever replica answers it, however soon;
    `DetectLoops` then admits that attempt, or refuses the call and the attempt is dropped again.
    The loop window is written back as edits, never as a snapshot: a snapshot would overwrite the
    attempts other replicas appended meanwhile.

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
        loop_window: int,
        charge_of: Callable[[SessionContext], Charge | None] | None = None,
        write_through: bool = False,
        holds_attempts: bool = False,
    ) -> None:
        self._state = state
        self._codecs = dict(codecs)
        self._ttl = ttl
        # The store keeps more attempts than the window: those of refused calls stay until dropped.
        self._cap = 2 * loop_window
        self._charge_of = charge_of
        self._write_through = write_through
        self._holds_attempts = holds_attempts

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        session = call.session
        if not self._state.shared or session.transport != "stateless":
            return await call_next(call)
        running: int = session.state.get(RUNNING_KEY, 0)
        held: loops.Attempt | None = None
        if not running:
            charge = self._charge_of(session) if self._charge_of is not None else None
            if self._holds_attempts:
                held = loops.Attempt(call.tool.name, loops.fingerprint(call.tool.name, call.arguments))
                call.notes[loops.ATTEMPT_NOTE] = held
            begun = await self._state.begin(
                session.id, list(self._codecs), charge, Held(held, self._cap) if held is not None else None
            )
            # What was read is what the state encodes to (or, if unreadable, differs: written afresh).
            before = {key: text for key, text in begun.values.items() if key != loops.STATE_KEY}
            self._apply(session, begun.values)
            if begun.admission is not None:
                call.notes[ADMISSION_NOTE] = begun.admission
        else:
            before = self._encode(session)
        since = self._mark(session, held)
        session.state[RUNNING_KEY] = running + 1
        try:
            return await call_next(call)
        finally:
            session.state[RUNNING_KEY] -= 1
            admission: Admission | None = call.notes.pop(ADMISSION_NOTE, None)
            if admission is not None and admission.refused is None:
                await self._state.refund(admission)
            after = self._encode(session)
            detector: loops.LoopDetector | None = session.state.get(loops.STATE_KEY)
            edits: list[list[str | None]] = (
                detector.changes(since) if detector is not None else [["drop", id] for id in since.outcomes]
            )
            if after != before or edits:
                # Skills unchanged are not written: an older copy must not replace another replica's change.
                changed = after if after != before else {}
                self._state.save(session.id, changed, self._ttl, WindowEdits(edits, self._cap) if edits else None)
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
        """The texts written as snapshots: every state but the loop window."""
        return {
            key: codec.encode(session.state[key])
            for key, codec in self._codecs.items()
            if key != loops.STATE_KEY and key in session.state
        }

    @staticmethod
    def _mark(session: SessionContext, held: loops.Attempt | None) -> loops.Mark:
        """The loop window as the store holds it now: as read, with the call's attempt appended."""
        detector: loops.LoopDetector | None = session.state.get(loops.STATE_KEY)
        mark = detector.mark() if detector is not None else loops.Mark({}, frozenset())
        if held is None:
            return mark
        return loops.Mark({**mark.outcomes, held.id: None}, mark.blocked)
