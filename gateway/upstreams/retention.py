"""How many bytes workspaces may keep on the host's disk: which ended workspaces go to make room,
and whether a new one fits.

Each caller's workspaces, in use and ended, may take `per_caller` bytes together, and everyone's
`total`. Over either cap the oldest ended workspaces are removed first (the caller's own for its
cap, anyone's for the total); a workspace in use is never removed. A new workspace needs room for
the size it may grow to; when the caller's live workspaces alone leave none, it is refused.

Pure: `Workspaces` lists what is on disk, removes what `plan` names and raises its refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import ToolRefusedError

MiB = 1 << 20


class WorkspaceQuotaError(ToolRefusedError):
    """A new workspace would take its caller's, or everyone's, workspaces past their cap on disk."""

    reason = "workspace_quota"
    hint = "End sessions you no longer need: an ended session's workspace makes room for a new one."


@dataclass(frozen=True, slots=True)
class Workspace:
    """One workspace on disk, as `workspaces list` shows it and the caps count it."""

    path: Path
    ended_at: float | None
    """When its session ended (epoch seconds); None while in use or left by a gateway that died."""
    used: int
    """Bytes it takes on disk."""

    @property
    def caller(self) -> Path:
        """The directory of its caller's workspaces."""
        return self.path.parent


@dataclass(frozen=True, slots=True)
class Quota:
    """Bytes of workspaces, in use and ended, one caller and everyone together may keep."""

    per_caller: int
    total: int


@dataclass(frozen=True, slots=True)
class Plan:
    """The ended workspaces to remove, oldest first, and why a new workspace is refused ("" when it fits)."""

    remove: tuple[Path, ...]
    refusal: str = ""


def plan(held: Sequence[Workspace], caller: Path, quota: Quota, room: int = 0) -> Plan:
    """What to remove so that `caller`'s workspaces and everyone's leave `room` bytes under their caps
    (`room`: the size a workspace about to be made may grow to, 0 when one just ended). When even
    removing every ended one would leave too little, the new workspace is refused and nothing goes."""
    ended = sorted((entry for entry in held if entry.ended_at is not None), key=lambda entry: entry.ended_at or 0.0)
    mine = sum(entry.used for entry in held if entry.caller == caller)
    everyone = sum(entry.used for entry in held)
    removed: dict[Path, Workspace] = {}
    for entry in ended:
        if entry.caller == caller and mine + room > quota.per_caller:
            removed[entry.path] = entry
            mine -= entry.used
            everyone -= entry.used
    for entry in ended:
        if entry.path not in removed and everyone + room > quota.total:
            removed[entry.path] = entry
            everyone -= entry.used
            mine -= entry.used if entry.caller == caller else 0
    if room and mine + room > quota.per_caller:
        return Plan(
            (),
            f"No room for this session's workspace: this caller's sessions in use hold {_mib(mine)} "
            f"of the {_mib(quota.per_caller)} it may keep, and a new workspace may take {_mib(room)}",
        )
    if room and everyone + room > quota.total:
        return Plan(
            (),
            f"No room for this session's workspace: the sessions in use hold {_mib(everyone)} of the "
            f"{_mib(quota.total)} the gateway keeps for workspaces, and a new one may take {_mib(room)}",
        )
    return Plan(tuple(sorted(removed, key=lambda path: removed[path].ended_at or 0.0)))


def _mib(count: int) -> str:
    return f"{count / MiB:.1f} MiB"
