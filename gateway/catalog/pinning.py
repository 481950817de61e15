"""Tool definitions pinned by fingerprint, and what a listing that differs from its pins means.

Pure: no store and no clock. A tool's definition is what a model reads and what decides how it is
called: its name, title, description, input and output schema and annotations. Its fingerprint is
the SHA-256 of that definition as canonical JSON (keys sorted, no spaces, ASCII only). The first definition
seen of a tool is trusted and pinned; a later different one is a change, which the server's
`on_tool_change` policy holds for review (`hold`), serves while it waits for review (`warn`), or
pins at once (`allow`). `review` decides; the store (`gateway.stores.pins`) keeps its decisions.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from gateway.catalog.tools import ToolRecord

OnToolChange = Literal["hold", "allow", "warn"]
FILE_DEFAULT: OnToolChange = "warn"
"""The policy of a server defined in the config file, unless its entry says otherwise (docs/security.md)."""
API_DEFAULT: OnToolChange = "hold"
"""The policy of a server registered through the admin API, unless its entry says otherwise."""


def policy_for(configured: OnToolChange | None, registered: bool) -> OnToolChange:
    """A server's policy: its entry's, else `API_DEFAULT` when registered through the API, else `FILE_DEFAULT`."""
    if configured is not None:
        return configured
    return API_DEFAULT if registered else FILE_DEFAULT


# ASCII only: a lone surrogate escape a server sent ("\udfff") becomes \udfff again, where UTF-8 has no bytes for it.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_READABLE = json.JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False)


class ChangeStatus(StrEnum):
    """Where a changed definition stands."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    """The server listed something else before anyone decided: another change, or the pinned definition again."""


class Decision(StrEnum):
    """What happened to a change, as audited and counted."""

    HELD = "held"
    WARNED = "warned"
    ALLOWED = "allowed"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


def definition(record: ToolRecord) -> dict[str, Any]:
    """The parts of a listed tool that are pinned, as JSON, under the server's own name for it."""
    annotations = record.annotations
    hints = None if annotations is None else annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        "name": record.original_name,
        "title": record.title,
        "description": record.description,
        "inputSchema": record.input_schema,
        "outputSchema": record.output_schema,
        "annotations": hints,
    }


def canonical(pinned: Mapping[str, Any]) -> str:
    """A definition as canonical JSON: keys sorted, no spaces, ASCII only."""
    return _CANONICAL.encode(pinned)


def fingerprint(pinned: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of a definition as canonical JSON."""
    return hashlib.sha256(canonical(pinned).encode()).hexdigest()


def changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The parts of a definition that differ between `old` and `new`."""
    keys = dict.fromkeys([*old, *new])
    return [key for key in keys if old.get(key) != new.get(key)]


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """A unified diff of two definitions, each shown as indented JSON with the description as its own lines."""
    return "".join(difflib.unified_diff(_readable(old), _readable(new), "pinned", "listed", n=2))


def _readable(pinned: Mapping[str, Any]) -> list[str]:
    # A description is prose: a change in one sentence shows as that line, not as the whole JSON string.
    rest = {key: value for key, value in pinned.items() if key != "description"}
    description = str(pinned.get("description") or "")
    lines = ["description:\n", *(f"  {line}\n" for line in description.splitlines())]
    return lines + [line + "\n" for line in _READABLE.encode(rest).splitlines()]


@dataclass(frozen=True, slots=True)
class Listed:
    """One tool of a listing: its name on the server, its definition and that definition's fingerprint."""

    tool: str
    definition: Mapping[str, Any]
    fingerprint: str


@dataclass(frozen=True, slots=True)
class OpenChange:
    """A change of one tool that still decides something: pending, or rejected (its definition stays hidden)."""

    id: str
    tool: str
    fingerprint: str
    status: ChangeStatus


@dataclass(slots=True)
class Plan:
    """What one listing of a server does to its pins: tools pinned on first sight, tools re-pinned
    (`allow`), changes opened (`hold`, `warn`), changes superseded, and the tools kept out of the catalog."""

    first_seen: list[Listed] = field(default_factory=list)
    repinned: list[Listed] = field(default_factory=list)
    opened: list[tuple[Listed, Decision]] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    hidden: set[str] = field(default_factory=set)


def review(
    pins: Mapping[str, str], changes: Sequence[OpenChange], listed: Sequence[Listed], policy: OnToolChange
) -> Plan:
    """What a server's listing `listed` means against its `pins` (tool -> fingerprint) and its open `changes`.

    - A tool without a pin is trusted as it is first seen and pinned.
    - A tool listed as pinned is served; a change of it still pending is superseded.
    - A tool listed otherwise: a definition rejected before stays hidden; one pending already is
      hidden under `hold` and served under `warn`; anything else supersedes the tool's pending
      change and is pinned at once (`allow`) or opened as a change, hidden (`hold`) or served
      (`warn`) until someone decides. Under `allow` pending changes are superseded by the new pin.
    """
    plan = Plan()
    for item in listed:
        pinned = pins.get(item.tool)
        mine = [change for change in changes if change.tool == item.tool]
        pending = [change for change in mine if change.status == ChangeStatus.PENDING]
        if pinned is None:
            plan.first_seen.append(item)
            continue
        if pinned == item.fingerprint:
            plan.superseded.extend(change.id for change in pending)
            continue
        same = [change for change in mine if change.fingerprint == item.fingerprint]
        if any(change.status == ChangeStatus.REJECTED for change in same):
            plan.hidden.add(item.tool)
            continue
        if policy == "allow":
            plan.superseded.extend(change.id for change in pending)
            plan.repinned.append(item)
            continue
        if not same:
            plan.superseded.extend(change.id for change in pending)
            plan.opened.append((item, Decision.HELD if policy == "hold" else Decision.WARNED))
        if policy == "hold":
            plan.hidden.add(item.tool)
    return plan
