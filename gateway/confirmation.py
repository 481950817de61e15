"""Confirmation of risky calls: a person approves a call at or above the risk threshold before it runs.

Two ways to ask, decided per call by what the front door put in `call.notes`:
1. `notes["elicit"]`, when the client supports elicitation: an async `(message, summary) -> bool`.
   The call runs only if it returns True; otherwise `ConfirmationDeclinedError`.
2. Otherwise the call does not run: the result is an `is_error` result (nothing happened, so it
   must not read as success) that describes the call and carries a one-time token. The model asks
   the user, then calls again with the same arguments plus the argument `_confirmation` (or the
   request `_meta` key `io.mcp-gateway/confirmation`); the front door strips either with
   `extract_token` before validation and puts the token in `notes["confirmation_token"]`.
A call that carries a token is checked against the token even when the client could elicit.

Tokens are bound to the caller, the session, the tool and the exact arguments (sha256 of their
canonical JSON), expire after the TTL, and work once. They live in SQLite (WAL, autocommit; only
a hash of each token is stored), so one issued before a restart works once after it and a used
one stays used. A wrong caller or session is refused before anything else about the token is said.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from gateway.audit import arguments_digest
from gateway.errors import ConfigError, ToolRefusedError
from gateway.pipeline import CallNext, ToolCall
from gateway.policy import risk_at_least, validate_section
from gateway.storage import open_database
from gateway.tools import Risk, ToolRecord

ARGUMENT = "_confirmation"
META_KEY = "io.mcp-gateway/confirmation"
TOKEN_NOTE = "confirmation_token"
ELICIT_NOTE = "elicit"

Elicit = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""Asks the person at the client: `(message, summary) -> approved`."""

# The model has to repeat the arguments, not read them all back; a huge one would flood its context.
_MAX_SHOWN_CHARS = 2000

CONFIRMATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "ttl_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 604800},
        "risk": {"enum": [risk.value for risk in Risk]},
    },
}
"""The JSON Schema of the `confirmation` section."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS confirmations (
    token_hash TEXT PRIMARY KEY,
    caller TEXT NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    issued REAL NOT NULL,
    expires REAL NOT NULL,
    used REAL
);
CREATE INDEX IF NOT EXISTS confirmations_by_expiry ON confirmations (expires);
"""

_RETRY_HINT = (
    "Call the tool again without `_confirmation` to get a new confirmation request, "
    "and ask the user to approve that one."
)


class ConfirmationDeclinedError(ToolRefusedError):
    """The person declined or cancelled the confirmation; the call did not run."""

    reason = "declined"
    hint = "Do not call it again; ask the user what they want instead."


class ConfirmationInvalidError(ToolRefusedError):
    """The confirmation token is unknown, expired, used, or issued for another call."""

    reason = "confirmation"
    hint = _RETRY_HINT


class ConfirmationStoreError(ToolRefusedError):
    """The confirmation database cannot be opened or written, so risky calls cannot be confirmed."""

    reason = "confirmation"


@dataclass(frozen=True, slots=True)
class ConfirmationSettings:
    """The `confirmation` section: how long a token lives and from which risk calls need one."""

    ttl_seconds: float = 300.0
    risk: Risk = Risk.HIGH

    @classmethod
    def from_config(cls, section: Any, *, source_file: str) -> ConfirmationSettings:
        """The settings of a `confirmation` section (defaults when None); raises `ConfigError`."""
        if section is None:
            return cls()
        validate_section(section, CONFIRMATION_SCHEMA, section="confirmation", source_file=source_file)
        ttl = section.get("ttl_seconds", 300.0)
        # The schema's bounds cannot catch NaN, which YAML can spell (.nan).
        if not math.isfinite(ttl):
            raise ConfigError(source_file, "confirmation.ttl_seconds", "must be a finite number of seconds")
        return cls(ttl_seconds=float(ttl), risk=Risk(section.get("risk", "high")))


@dataclass(frozen=True, slots=True)
class Binding:
    """What a token is good for: one caller, one session, one tool, these exact arguments."""

    caller: str
    session: str
    tool: str
    args_digest: str

    @classmethod
    def of(cls, call: ToolCall) -> Binding:
        """The binding of `call`."""
        return cls(call.session.caller, call.session.id, call.tool.name, arguments_digest(call.arguments))


@dataclass(frozen=True, slots=True)
class Issued:
    """A token as the store knows it."""

    binding: Binding
    expires: float
    used: float | None


def extract_token(arguments: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The arguments without `_confirmation`, and its value (as text) if it was there."""
    rest = dict(arguments)
    if ARGUMENT not in rest:
        return rest, None
    token = rest.pop(ARGUMENT)
    return rest, token if isinstance(token, str) else json.dumps(token)


def refusal(issued: Issued | None, binding: Binding, now: float) -> str | None:
    """Why a token does not confirm the call `binding` at `now`, or None when it does."""
    if issued is None or issued.binding.caller != binding.caller:
        return "is not a confirmation this gateway issued to you"
    if issued.binding.session != binding.session:
        return "was issued in another session"
    if issued.used is not None:
        return "was already used; each confirmation works once"
    if now >= issued.expires:
        return "has expired"
    if issued.binding.tool != binding.tool:
        return f"was issued for another tool ('{issued.binding.tool}')"
    if issued.binding.args_digest != binding.args_digest:
        return "was issued for different arguments; the user approved another call"
    return None


class ConfirmationStore:
    """One-time confirmation tokens in SQLite; operations run in a worker thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            # Autocommit, so a token marked used is committed before the call it confirms runs.
            self._db = open_database(self.path, _SCHEMA)
        except sqlite3.Error as error:
            raise ConfirmationStoreError(f"Cannot open the confirmation database {self.path}: {error}") from None

    async def issue(self, binding: Binding, now: float, ttl: float) -> str:
        """A new token for `binding`, valid from `now` for `ttl` seconds."""
        token = secrets.token_urlsafe(18)
        await anyio.to_thread.run_sync(self._insert, _hash(token), binding, now, ttl)
        return token

    async def redeem(self, token: str, binding: Binding, now: float) -> None:
        """Use up `token` for the call `binding`, or raise `ConfirmationInvalidError` saying why not."""
        problem = await anyio.to_thread.run_sync(self._use, _hash(token), binding, now)
        if problem is not None:
            raise ConfirmationInvalidError(f"Refused: the confirmation for '{binding.tool}' {problem}.")

    def close(self) -> None:
        """Close the database; later operations fail."""
        with self._lock:
            self._db.close()

    def _insert(self, token_hash: str, binding: Binding, now: float, ttl: float) -> None:
        row = (token_hash, binding.caller, binding.session, binding.tool, binding.args_digest, now, now + ttl)
        try:
            with self._lock:
                # No expired token can confirm anything, so issuing is a good moment to forget them.
                self._db.execute("DELETE FROM confirmations WHERE expires <= ?", (now,))
                self._db.execute(
                    "INSERT INTO confirmations (token_hash, caller, session, tool, args_digest, issued, expires)"
                    " VALUES (?,?,?,?,?,?,?)",
                    row,
                )
        except sqlite3.Error as error:
            raise ConfirmationStoreError(f"Cannot write to the confirmation database {self.path}: {error}") from None

    def _use(self, token_hash: str, binding: Binding, now: float) -> str | None:
        query = "SELECT caller, session, tool, args_digest, expires, used FROM confirmations WHERE token_hash = ?"
        try:
            with self._lock:
                row = self._db.execute(query, (token_hash,)).fetchone()
                issued = Issued(Binding(*row[:4]), row[4], row[5]) if row is not None else None
                problem = refusal(issued, binding, now)
                if problem is not None:
                    return problem
                # Conditional, so a second gateway process sharing the file cannot use it twice either.
                cursor = self._db.execute(
                    "UPDATE confirmations SET used = ? WHERE token_hash = ? AND used IS NULL", (now, token_hash)
                )
                return None if cursor.rowcount == 1 else "was already used; each confirmation works once"
        except sqlite3.Error as error:
            raise ConfirmationStoreError(f"Cannot read the confirmation database {self.path}: {error}") from None


class ConfirmRiskyCalls:
    """Pipeline step: calls at or above `threshold` run only once a person has confirmed them.

    `clock` gives wall-clock seconds since the epoch, because tokens outlive the process.
    """

    def __init__(
        self,
        store: ConfirmationStore,
        risk_of: Callable[[ToolRecord], Risk],
        threshold: Risk,
        ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._risk_of = risk_of
        self._threshold = threshold
        self._ttl = ttl
        self._clock = clock

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Run low-risk calls; confirm risky ones by token or by asking the person first."""
        risk = self._risk_of(call.tool)
        if not risk_at_least(risk, self._threshold):
            return await call_next(call)
        token: str | None = call.notes.get(TOKEN_NOTE)
        elicit: Elicit | None = call.notes.get(ELICIT_NOTE)
        if token is not None:
            await self._store.redeem(token, Binding.of(call), self._clock())
        elif elicit is not None:
            message, summary = describe(call, risk)
            if not await elicit(message, summary):
                raise ConfirmationDeclinedError(f"The user declined the call to '{call.tool.name}'; it did not run.")
        else:
            token = await self._store.issue(Binding.of(call), self._clock(), self._ttl)
            return self._confirmation_required(call, risk, token)
        return await call_next(call)

    def _confirmation_required(self, call: ToolCall, risk: Risk, token: str) -> types.CallToolResult:
        name, ttl = call.tool.name, round(self._ttl)
        text = (
            f"Confirmation required: '{name}' is a {risk.value}-risk tool, so a person must approve this call "
            "before it runs. Nothing was done.\n"
            f"What it does: {call.tool.description or '(no description)'}\n"
            f"Arguments: {_shown(call.arguments)}\n"
            f"Ask the user to approve exactly this call. If they approve, call '{name}' again with the same "
            f'arguments plus "{ARGUMENT}": "{token}". The confirmation works once, only for these arguments, '
            f"and expires in {ttl} seconds. If they decline, do not call it again."
        )
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            is_error=True,
            _meta={META_KEY: {"token": token, "tool": name, "expires_in": ttl}},
        )


def describe(call: ToolCall, risk: Risk) -> tuple[str, dict[str, Any]]:
    """The question put to the person, and a summary of the call for the client to show."""
    tool = call.tool
    message = (
        f"Allow '{tool.name}' to run? It is a {risk.value}-risk tool.\n"
        f"What it does: {tool.description or '(no description)'}\n"
        f"Arguments: {_shown(call.arguments)}"
    )
    summary = {"tool": tool.name, "risk": risk.value, "description": tool.description, "arguments": call.arguments}
    return message, summary


def _shown(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_SHOWN_CHARS else text[:_MAX_SHOWN_CHARS] + "... (truncated)"


def _hash(token: str) -> str:
    # Only hashes are stored, so a copy of the database file confirms nothing.
    return hashlib.sha256(token.encode()).hexdigest()
