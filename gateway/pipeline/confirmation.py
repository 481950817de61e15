"""Confirmation of risky calls: a person approves a call at or above the risk threshold before it runs.

Three ways to ask, decided per call by what the front door put in `call.notes`:
1. `notes["elicit"]`, when a handshake-era client supports elicitation: an async
   `(message, summary) -> bool` that asks the person during the call. The call runs only if it
   returns True; otherwise `ConfirmationDeclinedError`.
2. `notes["input_request"]`, when a 2026-era client supports elicitation: the step issues a
   one-time token and leaves it in the `InputRequest`; the front door answers with an
   input-required result whose request state is that token. The client asks the person and
   retries with the answer; the front door puts the returned state in `notes["confirmation_token"]`
   only when the person approved, and the step redeems it. The token never appears in a result
   the model reads, nor in the audit trail; the store keeps only its hash.
3. Otherwise the call is parked as a pending approval (gateway/pipeline/approvals.py): the model learns only
   the approval's id, a person decides out of its reach, and the same call made again runs once
   after an approval. A `_confirmation` argument is taken out and ignored: nothing the model
   sends can stand for a person's approval.

Tokens are bound to the caller, the session, the tool and the exact arguments (sha256 of their
canonical JSON), expire after the TTL, and work once. They live behind the store seam (a SQLite
file, or PostgreSQL; only a hash of each token is stored), so one issued before a restart works
once after it, on any replica sharing the database, and a used one stays used. A wrong caller or
session is refused before anything else about the token is said.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from gateway.auth.policy import risk_at_least
from gateway.catalog.tools import Risk, ToolRecord
from gateway.errors import ConfigError, ToolRefusedError
from gateway.pipeline.approvals import API_PATH, ApprovalStore, Binding, Status
from gateway.pipeline.audit import arguments_digest
from gateway.pipeline.chain import OUTCOME_NOTE, CallNext, ToolCall
from gateway.problems import validate_section
from gateway.runtime import tracing
from gateway.stores import Database, DatabaseError, StoreSettings, migrate, open_database

ARGUMENT = "_confirmation"
APPROVAL_KEY = "io.mcp-gateway/approval"
TOKEN_NOTE = "confirmation_token"
ELICIT_NOTE = "elicit"
INPUT_NOTE = "input_request"

Elicit = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""Asks the person at the client: `(message, summary) -> approved`."""

# The model has to repeat the arguments, not read them all back; a huge one would flood its context.
_MAX_SHOWN_CHARS = 2000
# The span attribute saying how a risky call is being confirmed: a token from a retry, the client's
# elicitation, an input request (the 2026 era) or an approval a person decides.
_VIA = "gateway.approval.via"

CONFIRMATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "ttl_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 604800},
        "risk": {"enum": [risk.value for risk in Risk]},
    },
}
"""The JSON Schema of the `confirmation` section."""

STORE = "confirmations"
"""The tokens' name in the store seam (their SQLite file is `confirmations.db`)."""


class ConfirmationDeclinedError(ToolRefusedError):
    """The person declined or cancelled the confirmation; the call did not run."""

    reason = "declined"
    hint = "Do not call it again; ask the user what they want instead."


class ConfirmationInvalidError(ToolRefusedError):
    """The request state a client returned is unknown, expired, used, or issued for another call."""

    reason = "confirmation"
    hint = "Call the tool again, so that the user is asked again."


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


def binding_of(call: ToolCall) -> Binding:
    """What confirms `call`: its caller, session, tool and exact arguments."""
    return Binding(call.session.caller, call.session.id, call.tool.name, arguments_digest(call.arguments))


@dataclass(slots=True)
class InputRequest:
    """Where the step leaves the one-time token a 2026-era client returns as its request state."""

    state: str | None = None


@dataclass(frozen=True, slots=True)
class Issued:
    """A token as the store knows it."""

    binding: Binding
    expires: float
    used: float | None


def strip_confirmation(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments without `_confirmation`: a value the model sends confirms nothing, and must
    not reach the tool, the audit digest or the approvals database."""
    return {key: value for key, value in arguments.items() if key != ARGUMENT}


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
    """One-time confirmation tokens in `db`; operations run in a worker thread."""

    def __init__(self, db: Database) -> None:
        self._db = db
        try:
            migrate(db, STORE)
        except DatabaseError as error:
            db.close()
            raise ConfirmationStoreError(f"Cannot open the confirmation database {db.where}: {error.message}") from None

    @classmethod
    def open(cls, settings: StoreSettings, data_dir: Path) -> ConfirmationStore:
        """The tokens where `settings` put them: `confirmations.db` under `data_dir`, or PostgreSQL."""
        try:
            return cls(open_database(settings, data_dir, STORE))
        except DatabaseError as error:
            raise ConfirmationStoreError(f"Cannot open the confirmation database {error.message}") from None

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
        self._db.close()

    def _insert(self, token_hash: str, binding: Binding, now: float, ttl: float) -> None:
        row = (token_hash, binding.caller, binding.session, binding.tool, binding.args_digest, now, now + ttl)
        try:
            # No expired token can confirm anything, so issuing is a good moment to forget them.
            self._db.execute("DELETE FROM confirmations WHERE expires <= ?", (now,))
            self._db.execute(
                "INSERT INTO confirmations (token_hash, caller, session, tool, args_digest, issued, expires)"
                " VALUES (?,?,?,?,?,?,?)",
                row,
            )
        except DatabaseError as error:
            raise ConfirmationStoreError(
                f"Cannot write to the confirmation database {self._db.where}: {error.message}"
            ) from None

    def _use(self, token_hash: str, binding: Binding, now: float) -> str | None:
        query = "SELECT caller, session, tool, args_digest, expires, used FROM confirmations WHERE token_hash = ?"
        try:
            row = self._db.fetch_one(query, (token_hash,))
            issued = Issued(Binding(*row[:4]), row[4], row[5]) if row is not None else None
            problem = refusal(issued, binding, now)
            if problem is not None:
                return problem
            # Conditional, so a second gateway process sharing the database cannot use it twice either.
            changed = self._db.execute(
                "UPDATE confirmations SET used = ? WHERE token_hash = ? AND used IS NULL", (now, token_hash)
            )
            return None if changed == 1 else "was already used; each confirmation works once"
        except DatabaseError as error:
            raise ConfirmationStoreError(
                f"Cannot read the confirmation database {self._db.where}: {error.message}"
            ) from None


class ConfirmRiskyCalls:
    """Pipeline step: calls at or above `threshold` run only once a person has confirmed them.

    `clock` gives wall-clock seconds since the epoch, because tokens outlive the process.
    `approve_command` gives the command that approves a parked call, by its id, as its answer
    names it for a person on the gateway's host.
    """

    def __init__(
        self,
        store: ConfirmationStore,
        approvals: ApprovalStore,
        risk_of: Callable[[ToolRecord], Risk],
        threshold: Risk,
        ttl: float,
        clock: Callable[[], float] = time.time,
        *,
        approve_command: Callable[[str], str] = "python -m gateway approvals approve {}".format,
    ) -> None:
        self._store = store
        self._approve_command = approve_command
        self._approvals = approvals
        self._risk_of = risk_of
        self._threshold = threshold
        self._ttl = ttl
        self._clock = clock

    def applies_to(self, tool: ToolRecord) -> bool:
        """Whether calls of `tool` wait for a person: those at or above the threshold."""
        return risk_at_least(self._risk_of(tool), self._threshold)

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Run low-risk calls; confirm risky ones through the client's user, or park them for a person."""
        risk = self._risk_of(call.tool)
        if not risk_at_least(risk, self._threshold):
            return await call_next(call)
        # The span covers the wait for the person's answer, not the call that follows it.
        with tracing.span("approval", {"gateway.tool.risk": risk.value}):
            answer = await self._confirm(call, risk)
        if isinstance(answer, types.CallToolResult):
            return answer
        if answer is None:
            return await call_next(call)
        try:
            return await call_next(call)
        except ToolRefusedError:
            # A later step refused the call (a loop, say): it did not run, so the approval holds.
            await anyio.to_thread.run_sync(self._approvals.release, answer)
            raise

    async def _confirm(self, call: ToolCall, risk: Risk) -> types.CallToolResult | str | None:
        """The answer that the call waits for a person; or the id of the approval it uses up, or
        None, when a person confirmed it. Raises when declined."""
        token: str | None = call.notes.get(TOKEN_NOTE)
        elicit: Elicit | None = call.notes.get(ELICIT_NOTE)
        request: InputRequest | None = call.notes.get(INPUT_NOTE)
        if token is not None:
            tracing.annotate(_VIA, "token")
            await self._store.redeem(token, binding_of(call), self._clock())
        elif elicit is not None:
            tracing.annotate(_VIA, "elicitation")
            message, summary = describe(call, risk)
            if not await elicit(message, summary):
                raise ConfirmationDeclinedError(f"The user declined the call to '{call.tool.name}'; it did not run.")
        elif request is not None:
            tracing.annotate(_VIA, "input_required")
            request.state = await self._store.issue(binding_of(call), self._clock(), self._ttl)
            call.notes[OUTCOME_NOTE] = "refused:awaiting_confirmation"
            text = f"Asking the user to approve the call to '{call.tool.name}'. Nothing was done yet."
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        else:
            tracing.annotate(_VIA, "approval")
            return await self._park(call, risk)
        return None

    async def _park(self, call: ToolCall, risk: Risk) -> types.CallToolResult | str:
        shown = shown_arguments(call.arguments)
        approval, fresh = await anyio.to_thread.run_sync(
            self._approvals.checkpoint, binding_of(call), call.session.role, shown, self._ttl
        )
        if approval.status == Status.USED:
            return approval.id
        name = call.tool.name
        if approval.status == Status.DECLINED:
            raise ConfirmationDeclinedError(f"A person declined approval {approval.id}: '{name}' did not run.")
        left = max(0, round(approval.expires - self._approvals.clock()))
        call.notes[OUTCOME_NOTE] = "refused:awaiting_approval"
        first = "Waiting" if fresh else "Still waiting"
        text = (
            f"{first} for approval {approval.id}: '{name}' is a {risk.value}-risk tool, so a person must approve "
            "this call before it runs. Nothing was done.\n"
            f"What it does: {call.tool.description or '(no description)'}\n"
            f"Arguments: {shown}\n"
            "A person approves it on the gateway's host with "
            f"`{self._approve_command(approval.id)}`, on the web page's Approvals "
            f"as an admin, or as an admin through POST {API_PATH}/{approval.id}/approve. Tell the user. "
            f"Once it is approved, call '{name}' again with exactly the same arguments and it runs once; "
            "called before that, it only says it is still waiting."
            f" The approval expires in {left} seconds. If it is declined, do not call it again."
        )
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            is_error=True,
            _meta={APPROVAL_KEY: {"id": approval.id, "status": approval.status.value, "expires_in": left}},
        )


def describe(call: ToolCall, risk: Risk) -> tuple[str, dict[str, Any]]:
    """The question put to the person, and a summary of the call for the client to show."""
    tool = call.tool
    message = (
        f"Allow '{tool.name}' to run? It is a {risk.value}-risk tool.\n"
        f"What it does: {tool.description or '(no description)'}\n"
        f"Arguments: {shown_arguments(call.arguments)}"
    )
    summary = {"tool": tool.name, "risk": risk.value, "description": tool.description, "arguments": call.arguments}
    return message, summary


def shown_arguments(arguments: Mapping[str, Any]) -> str:
    """The arguments as the person deciding on the call sees them: JSON, cut after 2,000 characters."""
    text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_SHOWN_CHARS else text[:_MAX_SHOWN_CHARS] + "... (truncated)"


def _hash(token: str) -> str:
    # Only hashes are stored, so a copy of the database file confirms nothing.
    return hashlib.sha256(token.encode()).hexdigest()
