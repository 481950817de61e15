"""Loop detection: a session repeating the same call, or getting the same answer, is stopped.

A call's fingerprint is its tool name plus the canonical JSON of its arguments (sorted keys)
after volatile values are normalised away:
- date-times (ISO 8601 / RFC 3339 with a time of day) anywhere, also inside longer strings,
  because they are almost always "now" and change on every retry;
- every scalar under a key that names a per-request value (`nonce`, `timestamp`, `ts`, `time`,
  `now`, `request_id`, `trace_id`, `correlation_id`, `idempotency_key`, `cache_buster`, ...).
Plain dates and UUIDs elsewhere are kept: under ordinary keys they name the thing acted on
(a day's report, an issue), and walking a list of those is progress, not a loop.

Each session keeps its last `window` calls. With `repeat_limit` = N:
1. Calls in a row: the N-th call in a row with the same fingerprint is refused.
2. Results in a row: once the last N settled calls of the session were all to one tool and
   all came back with the same result (or the same error), the next call of that tool with
   any of those arguments is refused (this catches a model alternating between two calls).
   A call still running, or a call to another tool, breaks the run.
3. A refused fingerprint stays blocked for the rest of the session. A different call in
   between resets the counts of rules 1 and 2, never the block.

Replicas share a detector as its snapshot plus changes (`Mark`, `LoopDetector.changes`): each
attempt has an id, so a store can append a call's attempt in the round trip that reads the window
and take the outcome, the block or the attempt's removal later without overwriting what other
replicas appended meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from gateway.errors import ToolError, ToolRefusedError
from gateway.pipeline.chain import CallNext, ToolCall

# The detector lives in the session's own state, so it goes away with the session.
STATE_KEY = "gateway.loops.detector"
# The call's attempt as the shared store already holds it (`ToolCall.notes`), for `DetectLoops` to admit.
ATTEMPT_NOTE = "gateway.loops.attempt"

_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?", re.IGNORECASE
)
_VOLATILE_KEYS = frozenset(
    {
        "nonce",
        "timestamp",
        "ts",
        "time",
        "now",
        "requestid",
        "traceid",
        "spanid",
        "correlationid",
        "idempotencykey",
        "cachebuster",
        "salt",
    }
)
# One encoder each, built once: `json.dumps` with options builds a new one on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_SAID = json.JSONEncoder(sort_keys=True, default=str)
_VOLATILE = "<volatile>"
_TIME = "<time>"

_HINT = (
    "Repeating the call will not change its result. Change approach: use different arguments, "
    "try another tool, or tell the user what is blocking you."
)


class LoopRefusedError(ToolRefusedError):
    """The call repeats a loop the session is stuck in."""

    reason = "loop"
    hint = _HINT


def _attempt_id() -> str:
    return os.urandom(8).hex()


@dataclass(slots=True)
class Attempt:
    """One admitted call in a session's window; `outcome` is set when it settles. The id tells it
    apart from the same call made elsewhere, for a store replicas share."""

    tool: str
    fingerprint: str
    outcome: str | None = None
    id: str = field(default_factory=_attempt_id)


@dataclass(frozen=True, slots=True)
class Mark:
    """What a shared store holds of a detector: each attempt's outcome by id, the blocked fingerprints."""

    outcomes: dict[str, str | None]
    blocked: frozenset[str]


class LoopDetector:
    """One session's loop state: the sliding window and the blocked fingerprints. Pure."""

    def __init__(self, window: int = 20, repeat_limit: int = 5) -> None:
        _check_limits(window, repeat_limit)
        self._repeat_limit = repeat_limit
        self._window: deque[Attempt] = deque(maxlen=window)
        self._blocked: set[str] = set()

    def admit(self, tool: str, arguments: Mapping[str, Any], *, held: Attempt | None = None) -> Attempt:
        """Record the call and return its attempt, or raise `LoopRefusedError` (see the rules above).
        `held` is the call's attempt as a shared store already holds it: recorded as it is."""
        key = held.fingerprint if held is not None else fingerprint(tool, arguments)
        if key in self._blocked:
            raise LoopRefusedError(
                f"Refused: an identical call to '{tool}' was already stopped as a loop in this session."
            )
        in_a_row = 1 + self._calls_in_a_row(key)
        if in_a_row >= self._repeat_limit:
            self._blocked.add(key)
            raise LoopRefusedError(f"Refused: this is the same call to '{tool}' {in_a_row} times in a row.")
        if key in self._same_result_run(tool):
            self._blocked.add(key)
            raise LoopRefusedError(
                f"Refused: the last {self._repeat_limit} calls to '{tool}' all returned the same result."
            )
        attempt = held if held is not None else Attempt(tool, key)
        self._window.append(attempt)
        return attempt

    def snapshot(self) -> dict[str, Any]:
        """The window and the blocked fingerprints as JSON-ready data, for a store replicas share."""
        window = [[attempt.tool, attempt.fingerprint, attempt.outcome, attempt.id] for attempt in self._window]
        return {"window": window, "blocked": sorted(self._blocked)}

    @classmethod
    def restore(cls, data: Mapping[str, Any], window: int = 20, repeat_limit: int = 5) -> LoopDetector:
        """A detector holding what `snapshot` gave (the newest `window` attempts of it)."""
        detector = cls(window, repeat_limit)
        # Only the attempts the window keeps are built: a shared store holds up to twice as many.
        detector._window.extend(
            Attempt(str(tool), str(key), outcome, str(id)) for tool, key, outcome, id in data["window"][-window:]
        )
        detector._blocked.update(map(str, data["blocked"]))
        return detector

    def mark(self) -> Mark:
        """What this detector holds, to compare it with later (`changes`)."""
        return Mark({attempt.id: attempt.outcome for attempt in self._window}, frozenset(self._blocked))

    def changes(self, since: Mark) -> list[list[str | None]]:
        """What changed since `since`, as edits a store applies to what it holds (see
        `gateway.shared.redisstate`): `append` an attempt it lacks or `settle` one's outcome (both
        `[kind, id, tool, fingerprint, outcome]`), `drop` one refused after the store took it
        (`[kind, id]`; attempts older than the window are left for the store to trim), `block` a
        fingerprint (`[kind, fingerprint]`). Each edit names its attempt by id, so applying it twice
        changes nothing more."""
        edits: list[list[str | None]] = []
        for attempt in self._window:
            if attempt.id not in since.outcomes:
                edits.append(["append", attempt.id, attempt.tool, attempt.fingerprint, attempt.outcome])
            elif since.outcomes[attempt.id] != attempt.outcome:
                edits.append(["settle", attempt.id, attempt.tool, attempt.fingerprint, attempt.outcome])
        present = {attempt.id for attempt in self._window}
        # The window only loses attempts at its old end: those before the oldest kept were trimmed.
        order = list(since.outcomes)
        kept = [index for index, id in enumerate(order) if id in present]
        edits.extend(["drop", gone] for gone in order[kept[0] if kept else 0 :] if gone not in present)
        edits.extend(["block", key] for key in sorted(self._blocked - since.blocked))
        return edits

    @staticmethod
    def settle(attempt: Attempt, outcome: str) -> None:
        """Note the digest of what the call returned (see `result_digest`, `error_digest`)."""
        attempt.outcome = outcome

    def _calls_in_a_row(self, key: str) -> int:
        count = 0
        for attempt in reversed(self._window):
            if attempt.fingerprint != key:
                break
            count += 1
        return count

    def _same_result_run(self, tool: str) -> set[str]:
        """Fingerprints of the trailing run of same-tool, same-outcome calls, if it is long enough."""
        run: list[Attempt] = []
        for attempt in reversed(self._window):
            if attempt.tool != tool or attempt.outcome is None:
                break
            if run and attempt.outcome != run[0].outcome:
                break
            run.append(attempt)
        if len(run) < self._repeat_limit:
            return set()
        return {attempt.fingerprint for attempt in run}


class DetectLoops:
    """Pipeline step: refuse calls that repeat a loop, keeping a `LoopDetector` per session."""

    def __init__(self, window: int = 20, repeat_limit: int = 5) -> None:
        _check_limits(window, repeat_limit)
        self._window = window
        self._repeat_limit = repeat_limit

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Admit the call through the session's detector, run it, then note its outcome."""
        detector: LoopDetector | None = call.session.state.get(STATE_KEY)
        if detector is None:
            detector = call.session.state[STATE_KEY] = LoopDetector(self._window, self._repeat_limit)
        attempt = detector.admit(call.tool.name, call.arguments, held=call.notes.pop(ATTEMPT_NOTE, None))
        try:
            result = await call_next(call)
        except ToolError as error:
            detector.settle(attempt, error_digest(error))
            raise
        detector.settle(attempt, result_digest(result))
        return result


def _check_limits(window: int, repeat_limit: int) -> None:
    if repeat_limit < 2 or window < repeat_limit:
        raise ValueError(f"loop detection needs 2 <= repeat_limit <= window, got {repeat_limit=} {window=}")


def fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """The identity of a call for loop detection: tool plus normalised canonical arguments."""
    canonical = _CANONICAL.encode(_normalise(dict(arguments)))
    # surrogatepass: arguments of in-process callers may hold lone surrogates, which UTF-8 cannot encode.
    return hashlib.sha256(f"{tool}\n{canonical}".encode("utf-8", "surrogatepass")).hexdigest()


def result_digest(result: types.CallToolResult) -> str:
    """A digest of what a result says (content, structured content, error flag)."""
    said = result.model_dump(mode="json", include={"content", "structured_content", "is_error"})
    return hashlib.sha256(_SAID.encode(said).encode()).hexdigest()


def error_digest(error: ToolError) -> str:
    """A digest of a failure, so the same error again and again counts as the same result."""
    return hashlib.sha256(f"{type(error).__name__}\n{error.message}".encode("utf-8", "surrogatepass")).hexdigest()


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return _DATETIME.sub(_TIME, value)
    if isinstance(value, Mapping):
        return {key: _VOLATILE if _is_volatile(key, item) else _normalise(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(item) for item in value]
    return value


def _is_volatile(key: Any, value: Any) -> bool:
    scalar = isinstance(value, str | int | float) and not isinstance(value, bool)
    return scalar and str(key).lower().replace("_", "").replace("-", "") in _VOLATILE_KEYS
