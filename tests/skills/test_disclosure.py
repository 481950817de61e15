"""Per-session skill state: LRU capacity, the tool cap, use, and the three lifecycles."""

from __future__ import annotations

import pytest

from gateway.errors import ToolRefusedError
from gateway.skills.disclosure import ActiveSkills, LoadOutcome, SkillTooLargeError


def test_loading_adds_skills_most_recent_first() -> None:
    skills = ActiveSkills()
    assert skills.load("a", ["t1"], "session") == LoadOutcome(already_active=False, evicted=[])
    skills.load("b", ["t2", "t3"], "session")
    assert skills.active() == ["b", "a"]
    assert skills.tools() == {"t1", "t2", "t3"}
    assert "a" in skills and len(skills) == 2


def test_loading_an_active_skill_only_refreshes_recency() -> None:
    skills = ActiveSkills()
    skills.load("a", ["t1"], "session")
    skills.load("b", ["t2"], "session")
    outcome = skills.load("a", ["ignored"], "turn")
    assert outcome == LoadOutcome(already_active=True, evicted=[])
    assert skills.active() == ["a", "b"]
    assert skills.tools() == {"t1", "t2"}


def test_capacity_evicts_the_least_recently_used_skill() -> None:
    skills = ActiveSkills(capacity=3)
    for name in ["a", "b", "c"]:
        skills.load(name, [f"{name}-tool"], "session")
    assert skills.load("d", ["d-tool"], "session").evicted == ["a"]
    assert skills.active() == ["d", "c", "b"]
    assert "a-tool" not in skills.tools()


def test_mixed_loads_and_uses_decide_the_eviction_order() -> None:
    skills = ActiveSkills(capacity=3)
    skills.load("a", ["a1", "shared"], "session")
    skills.load("b", ["b1"], "session")
    skills.load("c", ["c1", "shared"], "session")
    skills.used("a1")  # a is now the most recent: c, b older
    skills.load("b", ["b1"], "session")  # reloading refreshes b
    assert skills.active() == ["b", "a", "c"]
    assert skills.load("d", ["d1"], "session").evicted == ["c"]
    skills.used("shared")  # only a still carries it
    assert skills.active() == ["a", "d", "b"]
    assert skills.load("e", ["e1"], "session").evicted == ["b"]
    assert skills.active() == ["e", "a", "d"]


def test_using_a_tool_carried_by_several_skills_refreshes_all_of_them() -> None:
    skills = ActiveSkills()
    skills.load("a", ["shared"], "session")
    skills.load("b", ["b1"], "session")
    skills.load("c", ["shared"], "session")
    skills.used("shared")
    assert skills.active() == ["c", "a", "b"]
    skills.used("unknown")
    assert skills.active() == ["c", "a", "b"]


def test_tool_cap_evicts_until_the_distinct_tools_fit() -> None:
    skills = ActiveSkills(capacity=5, max_extended_tools=6)
    skills.load("a", ["a1", "a2"], "session")
    skills.load("b", ["b1", "b2"], "session")
    skills.load("c", ["c1", "shared"], "session")
    outcome = skills.load("d", ["d1", "d2", "d3"], "session")
    assert outcome.evicted == ["a", "b"]
    assert skills.active() == ["d", "c"]
    assert len(skills.tools()) == 5


def test_tools_shared_with_active_skills_count_once_against_the_cap() -> None:
    skills = ActiveSkills(capacity=5, max_extended_tools=4)
    skills.load("a", ["t1", "t2", "t3"], "session")
    assert skills.load("b", ["t1", "t2", "t3", "t4"], "session").evicted == []
    assert skills.active() == ["b", "a"]


def test_skill_larger_than_the_tool_cap_is_refused_and_nothing_changes() -> None:
    skills = ActiveSkills(max_extended_tools=3)
    skills.load("a", ["a1"], "session")
    with pytest.raises(SkillTooLargeError, match="brings 4 tools") as caught:
        skills.load("huge", ["t1", "t2", "t3", "t4"], "session")
    assert isinstance(caught.value, ToolRefusedError)
    assert skills.active() == ["a"]


def test_skill_exactly_at_the_tool_cap_replaces_everything() -> None:
    skills = ActiveSkills(max_extended_tools=3)
    skills.load("a", ["a1"], "session")
    assert skills.load("full", ["t1", "t2", "t3"], "session").evicted == ["a"]
    assert skills.tools() == {"t1", "t2", "t3"}


def test_unload_removes_only_an_active_skill() -> None:
    skills = ActiveSkills()
    skills.load("a", ["t1"], "session")
    assert skills.unload("a") is True
    assert skills.unload("a") is False
    assert skills.active() == [] and skills.tools() == set()


def test_turn_skill_leaves_after_the_next_completed_call() -> None:
    skills = ActiveSkills()
    skills.load("math", ["calc__evaluate"], "turn")
    skills.load("files", ["files__read_file"], "session")
    assert skills.after_call() == ["math"]
    assert skills.active() == ["files"]
    assert skills.after_call() == []


def test_every_turn_skill_leaves_after_the_same_completed_call() -> None:
    skills = ActiveSkills()
    skills.load("math", ["calc__evaluate"], "turn")
    skills.load("stats", ["python__run_python"], "turn")
    assert skills.after_call() == ["stats", "math"]


def test_turn_skill_loaded_after_a_call_waits_for_the_following_call() -> None:
    skills = ActiveSkills()
    assert skills.after_call() == []
    skills.load("math", ["calc__evaluate"], "turn")
    assert skills.active() == ["math"]
    assert skills.after_call() == ["math"]


def test_finish_task_removes_only_task_skills() -> None:
    skills = ActiveSkills(capacity=4)
    skills.load("analysis", ["sqlite__query"], "task")
    skills.load("files", ["files__read_file"], "session")
    skills.load("report", ["files__write_file"], "task")
    assert skills.after_call() == []
    assert skills.finish_task() == ["report", "analysis"]
    assert skills.active() == ["files"]
    assert skills.finish_task() == []


def test_session_skill_stays_until_unloaded_or_evicted() -> None:
    skills = ActiveSkills(capacity=1)
    skills.load("files", ["files__read_file"], "session")
    skills.after_call()
    skills.finish_task()
    assert skills.active() == ["files"]
    assert skills.load("math", ["calc__evaluate"], "turn").evicted == ["files"]


@pytest.mark.parametrize(("capacity", "cap"), [(0, 40), (3, 0)])
def test_caps_below_one_are_rejected(capacity: int, cap: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ActiveSkills(capacity=capacity, max_extended_tools=cap)
