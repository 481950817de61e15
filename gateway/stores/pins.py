"""Pinned tool definitions and their changes, kept across restarts behind the store seam.

Two tables (`pins.db` under `data_dir`, or PostgreSQL): each tool's pinned definition and
fingerprint by server and the server's own name for it, and every change found, with both
definitions so a person can read the difference. `observe` applies `pinning.review` to a listing
inside one transaction, so replicas sharing PostgreSQL judge a listing against the same pins; a
decision is a compare-and-set from `pending`, so a change is decided once.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.catalog.pinning import (
    ChangeStatus,
    Decision,
    Listed,
    OnToolChange,
    OpenChange,
    Plan,
    canonical,
    changed_fields,
    diff,
    review,
)
from gateway.errors import GatewayError
from gateway.stores import MigratedStore, Queries

STORE = "pins"
"""The pins' name in the store seam (their SQLite file is `pins.db`)."""
_CHANGE_COLUMNS = (
    "id, server, tool, old_fingerprint, old_definition, new_fingerprint, new_definition,"
    " status, detected, decided_by, decided"
)


class ChangeNotFoundError(GatewayError):
    """No change with that id."""


class ChangeClosedError(GatewayError):
    """The change was decided already, or the server listed something else since: it cannot be decided now."""


@dataclass(frozen=True, slots=True)
class Change:
    """One changed definition of a tool: the pinned one, the one the server listed, and where it stands."""

    id: str
    server: str
    tool: str
    old_fingerprint: str
    old_definition: Mapping[str, Any]
    new_fingerprint: str
    new_definition: Mapping[str, Any]
    status: ChangeStatus
    detected: float
    decided_by: str | None = None
    decided: float | None = None

    @property
    def fields(self) -> list[str]:
        """The parts of the definition that differ."""
        return changed_fields(self.old_definition, self.new_definition)

    def diff(self) -> str:
        """The difference as a unified diff, the pinned definition first."""
        return diff(self.old_definition, self.new_definition)

    def as_dict(self) -> dict[str, object]:
        """The change as the API and `changes list --json` show it."""
        return {
            "id": self.id,
            "server": self.server,
            "tool": self.tool,
            "status": self.status.value,
            "fields": self.fields,
            "detected": self.detected,
            "decided_by": self.decided_by,
            "decided": self.decided,
            "old": {"fingerprint": self.old_fingerprint, "definition": self.old_definition},
            "new": {"fingerprint": self.new_fingerprint, "definition": self.new_definition},
            "diff": self.diff(),
        }


@dataclass(frozen=True, slots=True)
class Event:
    """A change a listing brought, for the audit trail, the metrics and the log; `change` is None under `allow`."""

    server: str
    tool: str
    decision: Decision
    change: str | None
    old_fingerprint: str
    new_fingerprint: str
    fields: list[str]


class PinStore(MigratedStore):
    """Pins and changes in `db`. Every method may raise `DatabaseError`."""

    STORE = STORE

    def observe(
        self, server: str, listed: Sequence[Listed], policy: OnToolChange, now: float
    ) -> tuple[Plan, list[Event]]:
        """Judge one listing of `server` against its pins (see `pinning.review`) and keep what that decides."""
        with self._db.transaction() as tx:
            rows = tx.fetch_all("SELECT tool, fingerprint FROM tool_pins WHERE server = ?", (server,))
            pins: dict[str, str] = {tool: pinned for tool, pinned in rows}
            rows = tx.fetch_all(
                "SELECT id, tool, new_fingerprint, status FROM tool_changes WHERE server = ? AND status IN (?, ?)",
                (server, ChangeStatus.PENDING.value, ChangeStatus.REJECTED.value),
            )
            open_changes = [OpenChange(row[0], row[1], row[2], ChangeStatus(row[3])) for row in rows]
            plan = review(pins, open_changes, listed, policy)
            # Another replica may pin the same first sight at the same moment; the first pin stands.
            tx.execute_many(
                "INSERT INTO tool_pins (server, tool, fingerprint, definition, pinned) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (server, tool) DO NOTHING",
                [(server, item.tool, item.fingerprint, canonical(item.definition), now) for item in plan.first_seen],
            )
            for change_id in plan.superseded:
                tx.execute(
                    "UPDATE tool_changes SET status = ? WHERE id = ? AND status = ?",
                    (ChangeStatus.SUPERSEDED.value, change_id, ChangeStatus.PENDING.value),
                )
            events = []
            for item in plan.repinned:
                old = _pinned(tx, server, item.tool)
                _pin(tx, server, item, now)
                events.append(_event(server, item, Decision.ALLOWED, None, pins[item.tool], old))
            for item, decision in plan.opened:
                old = _pinned(tx, server, item.tool)
                change_id = f"ch-{secrets.token_hex(6)}"
                tx.execute(
                    f"INSERT INTO tool_changes ({_CHANGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        change_id,
                        server,
                        item.tool,
                        pins[item.tool],
                        canonical(old),
                        item.fingerprint,
                        canonical(item.definition),
                        ChangeStatus.PENDING.value,
                        now,
                        None,
                        None,
                    ),
                )
                events.append(_event(server, item, decision, change_id, pins[item.tool], old))
        return plan, events

    def changes(self) -> list[Change]:
        """Every change on record, newest first."""
        rows = self._db.fetch_all(f"SELECT {_CHANGE_COLUMNS} FROM tool_changes ORDER BY detected DESC, id")
        return [_change(row) for row in rows]

    def get(self, change_id: str) -> Change | None:
        """The change with that id, whatever its status."""
        row = self._db.fetch_one(f"SELECT {_CHANGE_COLUMNS} FROM tool_changes WHERE id = ?", (change_id,))
        return _change(row) if row is not None else None

    def decide(self, change_id: str, accept: bool, decided_by: str, now: float) -> Change:
        """Accept (the listed definition becomes the pin) or reject a pending change, once.

        Raises `ChangeNotFoundError` for an unknown id and `ChangeClosedError` for one no longer pending.
        """
        status = ChangeStatus.ACCEPTED if accept else ChangeStatus.REJECTED
        with self._db.transaction() as tx:
            changed = tx.execute(
                "UPDATE tool_changes SET status = ?, decided_by = ?, decided = ? WHERE id = ? AND status = ?",
                (status.value, decided_by, now, change_id, ChangeStatus.PENDING.value),
            )
            row = tx.fetch_one(f"SELECT {_CHANGE_COLUMNS} FROM tool_changes WHERE id = ?", (change_id,))
            if row is None:
                raise ChangeNotFoundError(f"No change {change_id}")
            change = _change(row)
            if changed != 1:
                raise ChangeClosedError(
                    f"Change {change_id} is {change.status.value}; only a pending change is decided"
                )
            if accept:
                listed = Listed(change.tool, change.new_definition, change.new_fingerprint)
                _pin(tx, change.server, listed, now)
        return change


def _pinned(tx: Queries, server: str, tool: str) -> dict[str, Any]:
    row = tx.fetch_one("SELECT definition FROM tool_pins WHERE server = ? AND tool = ?", (server, tool))
    assert row is not None  # review only reports tools that have a pin
    found: dict[str, Any] = json.loads(row[0])
    return found


def _pin(tx: Queries, server: str, item: Listed, now: float) -> None:
    tx.execute(
        "INSERT INTO tool_pins (server, tool, fingerprint, definition, pinned) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (server, tool) DO UPDATE SET fingerprint = excluded.fingerprint,"
        " definition = excluded.definition, pinned = excluded.pinned",
        (server, item.tool, item.fingerprint, canonical(item.definition), now),
    )


def _event(
    server: str, item: Listed, decision: Decision, change: str | None, old_fingerprint: str, old: Mapping[str, Any]
) -> Event:
    fields = changed_fields(old, item.definition)
    return Event(server, item.tool, decision, change, old_fingerprint, item.fingerprint, fields)


def _change(row: tuple[Any, ...]) -> Change:
    identity, server, tool, old_fp, old, new_fp, new, status, detected, decided_by, decided = row
    return Change(
        identity,
        server,
        tool,
        old_fp,
        json.loads(old),
        new_fp,
        json.loads(new),
        ChangeStatus(status),
        detected,
        decided_by,
        decided,
    )
