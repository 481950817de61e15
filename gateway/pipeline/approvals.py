"""Pending approvals: risky calls parked until a person approves or declines them out of the model's reach.

A client that cannot ask its user (no elicitation) gets no token: its call is parked as a row
behind the store seam (`approvals.db` under `data_dir`, or PostgreSQL), bound to the caller, the
session, the tool and the exact arguments, with a TTL. The model only learns the approval's id. A
person decides through a channel the model does not hold (the `approvals` command on the host, or
`/api/v1/approvals` with a credential), and when the model calls again with the same arguments the
call runs once.

Every change of status is a compare-and-set on the persisted row (pending -> approved or
declined, approved -> used): an UPDATE whose WHERE names the status it changes from, inside a
transaction, so two approvals, two retries or two gateway processes sharing the database can
never run a call twice (SQLite takes the write lock first; PostgreSQL makes the second UPDATE
wait for the first and then find the status changed).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from gateway.auth.policy import Policy
from gateway.errors import GatewayError, ToolRefusedError
from gateway.pipeline.audit import AuditEntry
from gateway.stores import Database, DatabaseError, Queries, StoreSettings, migrate, open_database

STORE = "approvals"
"""The approvals' name in the store seam."""
APPROVALS_FILE = "approvals.db"
"""The approvals database, under the gateway's `data_dir`."""
API_PATH = "/api/v1/approvals"
"""Where the HTTP API lists and decides approvals."""
_COLUMNS = "id, caller, role, session, tool, args_digest, arguments, created, expires, status, decided_by, decided"


class Status(StrEnum):
    """Where an approval stands."""

    PENDING = "pending"
    APPROVED = "approved"
    DECLINED = "declined"
    USED = "used"


@dataclass(frozen=True, slots=True)
class Binding:
    """What an approval is good for: one caller, one session, one tool, these exact arguments."""

    caller: str
    session: str
    tool: str
    args_digest: str


@dataclass(frozen=True, slots=True)
class Approval:
    """One parked call as the store knows it; `arguments` is the JSON shown to the person."""

    id: str
    caller: str
    role: str | None
    session: str
    tool: str
    args_digest: str
    arguments: str
    created: float
    expires: float
    status: Status
    decided_by: str | None = None
    decided: float | None = None

    def as_dict(self) -> dict[str, object]:
        """The approval as the API and `approvals list --json` show it."""
        return {
            "id": self.id,
            "status": self.status.value,
            "caller": self.caller,
            "role": self.role,
            "tool": self.tool,
            "arguments": self.arguments,
            "created": self.created,
            "expires": self.expires,
            "decided_by": self.decided_by,
        }


class ApprovalStoreError(ToolRefusedError):
    """The approvals database cannot be opened or written, so risky calls cannot be approved."""

    reason = "confirmation"


class ApprovalNotFoundError(GatewayError):
    """No approval with that id (or none the asker may see)."""


class ApprovalClosedError(GatewayError):
    """The approval was already decided or has expired, so it cannot be decided now."""


def may_see(caller: str, admin: bool, approval: Approval) -> bool:
    """Whether `caller` (an admin when `admin`) may see `approval`: admins see all, others their own."""
    return admin or approval.caller == caller


def may_decide(policy: Policy, caller: str, admin: bool, approval: Approval) -> bool:
    """Whether `caller` (an admin when `admin`) may approve or decline `approval` over HTTP or the page.

    Admins (an admin role, the host token, or anyone with `admin_without_auth`) may decide any; a
    caller its own only when the role the call was made with says `approve: own`. The `approvals`
    command working on the data directory may always decide.
    """
    own = approval.caller == caller and policy.approves_own(approval.role)
    return admin or own


def decision_entry(approval: Approval) -> AuditEntry:
    """The audit row of a person's decision on `approval`: outcome `approved` or `declined`, and who."""
    return AuditEntry(
        epoch=approval.decided or 0.0,
        session=approval.session,
        caller=approval.caller,
        tool=approval.tool,
        args_digest=approval.args_digest,
        outcome=approval.status.value,
        duration_ms=0.0,
        detail=f"approval {approval.id} {approval.status.value} by {approval.decided_by}",
    )


class ApprovalStore:
    """Pending approvals in `db`; `clock` gives wall-clock seconds, as approvals outlive the process.

    Reading and deciding may raise `DatabaseError`, as every store's methods do; the call
    pipeline's `checkpoint` raises `ApprovalStoreError`, a refusal, instead.
    """

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self.clock = clock
        try:
            migrate(db, STORE)
        except DatabaseError as error:
            db.close()
            raise ApprovalStoreError(f"Cannot open the approvals database {db.where}: {error.message}") from None

    @classmethod
    def open(cls, settings: StoreSettings, data_dir: Path, clock: Callable[[], float] = time.time) -> ApprovalStore:
        """The approvals where `settings` put them: `approvals.db` under `data_dir`, or PostgreSQL."""
        try:
            return cls(open_database(settings, data_dir, STORE), clock)
        except DatabaseError as error:
            raise ApprovalStoreError(f"Cannot open the approvals database {error.message}") from None

    def close(self) -> None:
        """Close the database; later operations fail."""
        self._db.close()

    def checkpoint(self, binding: Binding, role: str | None, arguments: str, ttl: float) -> tuple[Approval, bool]:
        """The live approval of this exact call, and whether it was parked just now (none was live).

        An approved one is used up here (approved -> used): the returned status `USED` means the
        call may run now, exactly once. `PENDING` and `DECLINED` mean it may not. An approved one
        comes before a newer one parked meanwhile (by a retry that found it used, before `release`
        gave it back). A database that fails refuses the call (`ApprovalStoreError`).
        """
        try:
            return self._checkpoint(binding, role, arguments, ttl)
        except DatabaseError as error:
            raise ApprovalStoreError(error.message) from None

    def _checkpoint(self, binding: Binding, role: str | None, arguments: str, ttl: float) -> tuple[Approval, bool]:
        now = self.clock()
        with self._transaction() as tx:
            row = tx.fetch_one(
                f"SELECT {_COLUMNS} FROM approvals WHERE caller = ? AND session = ? AND tool = ? AND args_digest = ?"
                " AND status != ? AND expires > ?"
                " ORDER BY CASE WHEN status = ? THEN 0 ELSE 1 END, created DESC LIMIT 1",
                (
                    binding.caller,
                    binding.session,
                    binding.tool,
                    binding.args_digest,
                    Status.USED.value,
                    now,
                    Status.APPROVED.value,
                ),
            )
            if row is not None:
                approval = _approval(row)
                if approval.status != Status.APPROVED:
                    return approval, False
                changed = tx.execute(
                    "UPDATE approvals SET status = ? WHERE id = ? AND status = ?",
                    (Status.USED.value, approval.id, Status.APPROVED.value),
                )
                if changed == 1:
                    return replace(approval, status=Status.USED), False
            # Nothing expired can be approved any more, so parking is a good moment to forget it.
            tx.execute("DELETE FROM approvals WHERE expires <= ?", (now,))
            fresh = Approval(
                id=f"ap-{secrets.token_hex(6)}",
                caller=binding.caller,
                role=role,
                session=binding.session,
                tool=binding.tool,
                args_digest=binding.args_digest,
                arguments=arguments,
                created=now,
                expires=now + ttl,
                status=Status.PENDING,
            )
            tx.execute(f"INSERT INTO approvals ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", _row(fresh))
            return fresh, True

    def release(self, approval_id: str) -> None:
        """Give back an approval a call used up but did not run with (a later step refused it):
        used -> approved, so the next try of the same call runs. Raises `ApprovalStoreError`."""
        try:
            with self._transaction() as tx:
                tx.execute(
                    "UPDATE approvals SET status = ? WHERE id = ? AND status = ?",
                    (Status.APPROVED.value, approval_id, Status.USED.value),
                )
        except DatabaseError as error:
            raise ApprovalStoreError(error.message) from None

    def get(self, approval_id: str) -> Approval | None:
        """The approval with that id, whatever its status."""
        with self._transaction() as tx:
            row = tx.fetch_one(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval_id,))
        return _approval(row) if row is not None else None

    def pending(self) -> list[Approval]:
        """Every approval still waiting for a person, oldest first."""
        with self._transaction() as tx:
            rows = tx.fetch_all(
                f"SELECT {_COLUMNS} FROM approvals WHERE status = ? AND expires > ? ORDER BY created",
                (Status.PENDING.value, self.clock()),
            )
        return [_approval(row) for row in rows]

    def since(self, start: float) -> list[Approval]:
        """Every approval asked for from `start` on, and every one still pending, oldest first."""
        with self._transaction() as tx:
            rows = tx.fetch_all(
                f"SELECT {_COLUMNS} FROM approvals WHERE created >= ? OR status = ? ORDER BY created",
                (start, Status.PENDING.value),
            )
        return [_approval(row) for row in rows]

    def decide(self, approval_id: str, approve: bool, decided_by: str) -> Approval:
        """Approve or decline a pending approval (pending -> approved or declined, once).

        Raises `ApprovalNotFoundError` for an unknown id and `ApprovalClosedError` when it was
        already decided or has expired.
        """
        now = self.clock()
        status = Status.APPROVED if approve else Status.DECLINED
        with self._transaction() as tx:
            changed = tx.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, decided = ?"
                " WHERE id = ? AND status = ? AND expires > ?",
                (status.value, decided_by, now, approval_id, Status.PENDING.value, now),
            )
            row = tx.fetch_one(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval_id,))
        if row is None:
            raise ApprovalNotFoundError(f"No approval {approval_id}")
        approval = _approval(row)
        if changed != 1:
            state = "has expired" if approval.status == Status.PENDING else f"was already {approval.status.value}"
            raise ApprovalClosedError(f"Approval {approval_id} {state}")
        return approval

    @contextmanager
    def _transaction(self) -> Iterator[Queries]:
        try:
            with self._db.transaction() as tx:
                yield tx
        except DatabaseError as error:
            raise DatabaseError(f"Cannot use the approvals database {self._db.where}: {error.message}") from None


def _approval(row: tuple[Any, ...]) -> Approval:
    identity, caller, role, session, tool, digest, arguments, created, expires, status, decided_by, decided = row
    return Approval(
        identity, caller, role, session, tool, digest, arguments, created, expires, Status(status), decided_by, decided
    )


def _row(approval: Approval) -> tuple[object, ...]:
    return (
        approval.id,
        approval.caller,
        approval.role,
        approval.session,
        approval.tool,
        approval.args_digest,
        approval.arguments,
        approval.created,
        approval.expires,
        approval.status.value,
        approval.decided_by,
        approval.decided,
    )
