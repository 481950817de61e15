"""The seam of shared state: what replicas must see alike, and the in-process side of it.

Above the seam the gateway asks a `SharedState` for four things and never learns where they live:
- `budgets`, the `BudgetCounter` of the budget step;
- `load` and `save`: a stateless-era session's state (active skills, the loop window) by session
  id, so that whichever replica answers a call sees the calls before it;
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

from gateway.config.model import GatewaySettings
from gateway.pipeline import loops
from gateway.pipeline.budgets import BudgetCounter, BudgetTracker
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.session import SessionContext
from gateway.skills import host
from gateway.skills.disclosure import ActiveSkills

log = logging.getLogger(__name__)

ChangeHandler = Callable[[], Awaitable[None]]
# Calls of the session running in this process: its state is read only when none runs, so a
# concurrent call's objects are never swapped under it.
RUNNING_KEY = "gateway.shared.running"


class SharedState(Protocol):
    """Where the state replicas share lives."""

    shared: bool
    """Whether other processes see this state; False for the in-process default."""
    budgets: BudgetCounter

    async def load(self, session_id: str, keys: Sequence[str]) -> dict[str, str]:
        """The stored texts of `keys` of a session; keys never saved, or expired, are left out."""
        ...

    async def save(self, session_id: str, values: Mapping[str, str], ttl: float) -> None:
        """Store texts of a session, each kept `ttl` seconds after its last save."""
        ...

    async def announce(self) -> None:
        """Tell the other replicas that the API registrations changed."""
        ...

    async def follow(self, on_change: ChangeHandler) -> None:
        """Call `on_change` whenever another replica announces a change; runs until cancelled."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class LocalState:
    """The single-node default: counts in this process, state on the session's context."""

    shared = False

    def __init__(self, clock: Callable[[], float]) -> None:
        self.budgets: BudgetCounter = BudgetTracker(clock)

    async def load(self, session_id: str, keys: Sequence[str]) -> dict[str, str]:
        """Nothing: the context already holds the session's state."""
        return {}

    async def save(self, session_id: str, values: Mapping[str, str], ttl: float) -> None:
        """Nothing to do: the context keeps the state."""

    async def announce(self) -> None:
        """No other replica to tell."""

    async def follow(self, on_change: ChangeHandler) -> None:
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
    """Pipeline step: a stateless-era session's state read through the seam before the call and
    written back after it (refused calls too: a loop's block must hold on every replica).

    Only stateless-era sessions move: a handshake-era session lives in one replica's SDK, and
    the load balancer keeps its requests there.
    """

    def __init__(self, state: SharedState, codecs: Mapping[str, Codec], ttl: float) -> None:
        self._state = state
        self._codecs = dict(codecs)
        self._ttl = ttl

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        session = call.session
        if not self._state.shared or session.transport != "stateless":
            return await call_next(call)
        running: int = session.state.get(RUNNING_KEY, 0)
        if not running:
            await self._pull(session)
        session.state[RUNNING_KEY] = running + 1
        try:
            return await call_next(call)
        finally:
            session.state[RUNNING_KEY] -= 1
            await self._push(session)

    async def _pull(self, session: SessionContext) -> None:
        stored = await self._state.load(session.id, list(self._codecs))
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

    async def _push(self, session: SessionContext) -> None:
        values = {key: codec.encode(session.state[key]) for key, codec in self._codecs.items() if key in session.state}
        if values:
            await self._state.save(session.id, values, self._ttl)
