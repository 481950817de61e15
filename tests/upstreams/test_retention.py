"""The caps on workspace bytes: the oldest ended workspaces go first, the caller's own for its cap and
anyone's for the total; a workspace in use never goes; a new one without room is refused."""

from __future__ import annotations

from pathlib import Path

from gateway.upstreams.retention import Quota, Workspace, plan

MiB = 1 << 20
ALICE, BOB = Path("/w/alice"), Path("/w/bob")
QUOTA = Quota(per_caller=20 * MiB, total=30 * MiB)


def ended(caller: Path, name: str, at: float, mib: int = 6) -> Workspace:
    return Workspace(caller / name, at, mib * MiB)


def live(caller: Path, name: str, mib: int = 6) -> Workspace:
    return Workspace(caller / name, None, mib * MiB)


def test_under_both_caps_nothing_goes() -> None:
    held = [ended(ALICE, "a1", 1), ended(ALICE, "a2", 2), live(ALICE, "a3", 2)]
    assert plan(held, ALICE, QUOTA) == plan(held, ALICE, QUOTA, room=6 * MiB)
    assert plan(held, ALICE, QUOTA).remove == ()


def test_a_caller_over_its_cap_loses_its_own_oldest_ended_workspaces_first() -> None:
    held = [ended(BOB, "b1", 0), ended(ALICE, "a2", 2), ended(ALICE, "a1", 1), live(ALICE, "a3"), ended(ALICE, "a4", 4)]
    assert plan(held, ALICE, QUOTA).remove == (ALICE / "a1",)
    assert plan(held, ALICE, QUOTA, room=8 * MiB).remove == (ALICE / "a1", ALICE / "a2")


def test_everyone_over_the_total_loses_the_oldest_ended_workspaces_whoever_they_belong_to() -> None:
    held = [ended(BOB, "b1", 1), ended(BOB, "b2", 3), ended(ALICE, "a1", 2), ended(ALICE, "a2", 4), live(BOB, "b3")]
    assert plan(held, ALICE, QUOTA).remove == ()
    assert plan(held, ALICE, QUOTA, room=8 * MiB).remove == (BOB / "b1", ALICE / "a1")


def test_a_workspace_in_use_is_never_removed_and_a_new_one_without_room_is_refused() -> None:
    held = [live(ALICE, "a1", 8), live(ALICE, "a2", 8), ended(ALICE, "a0", 0, 2)]
    decided = plan(held, ALICE, QUOTA, room=8 * MiB)
    assert decided.remove == ()
    assert decided.refusal == (
        "No room for this session's workspace: this caller's sessions in use hold 16.0 MiB of the 20.0 MiB it may"
        " keep, and a new workspace may take 8.0 MiB"
    )
    assert plan(held, ALICE, QUOTA).remove == () and plan(held, ALICE, QUOTA).refusal == ""


def test_a_new_workspace_is_refused_when_the_workspaces_in_use_leave_no_room_under_the_total() -> None:
    held = [live(BOB, "b1", 12), live(BOB, "b2", 8), live(ALICE, "a1", 4), ended(BOB, "b0", 0, 4)]
    decided = plan(held, ALICE, QUOTA, room=8 * MiB)
    assert decided.remove == ()
    assert decided.refusal.startswith("No room for this session's workspace: the sessions in use hold 24.0 MiB of")
    assert "30.0 MiB the gateway keeps for workspaces" in decided.refusal
