"""Role policy: which tools and skills each role sees, how risk is derived, and config errors."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from gateway.auth.policy import Budget, Policy, Rule, derive_risk, risk_at_least
from gateway.catalog.tools import Risk, ToolRecord
from gateway.errors import ConfigError

ROLES: dict[str, Any] = {
    "intern": {
        "allow": ["calc__*", "files__read_file", {"server": "sqlite", "risk": "low"}, {"tag": "docs"}],
        "deny": ["sqlite__execute", {"risk": "high"}],
        "skills": ["quick-math"],
        "budget": {"calls_per_minute": 30, "concurrent": 2},
    },
    "admin": {"allow": ["*"]},
    "nobody": {"deny": ["*"]},
}

READ_ONLY = types.ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
PLAIN = types.ToolAnnotations(read_only_hint=False)


def tool(
    name: str,
    source: str | None = None,
    annotations: types.ToolAnnotations | None = None,
    risk: Risk | None = None,
    tags: frozenset[str] = frozenset(),
) -> ToolRecord:
    """A record as the catalog would hold it; the source defaults to the name's namespace."""
    source = source or name.split("__")[0]
    return ToolRecord(name=name, source=source, original_name=name, annotations=annotations, risk=risk, tags=tags)


@pytest.fixture
def policy() -> Policy:
    return Policy.from_config(ROLES, source_file="gateway.yaml")


@pytest.mark.parametrize(
    ("role", "record", "visible"),
    [
        ("intern", tool("calc__add", annotations=READ_ONLY), True),
        ("intern", tool("calc__wipe", annotations=DESTRUCTIVE), False),
        ("intern", tool("files__read_file", annotations=READ_ONLY), True),
        ("intern", tool("files__write_file", annotations=PLAIN), False),
        ("intern", tool("sqlite__query", annotations=READ_ONLY), True),
        ("intern", tool("sqlite__execute", annotations=READ_ONLY), False),
        ("intern", tool("sqlite__vacuum", annotations=PLAIN), False),
        ("intern", tool("wiki__search", tags=frozenset({"docs"})), True),
        ("intern", tool("wiki__delete", tags=frozenset({"docs"}), risk=Risk.HIGH), False),
        ("intern", tool("weather__today"), False),
        ("admin", tool("sqlite__execute", annotations=DESTRUCTIVE), True),
        ("admin", tool("anything__at_all"), True),
        ("nobody", tool("calc__add", annotations=READ_ONLY), False),
        ("stranger", tool("calc__add", annotations=READ_ONLY), False),
        (None, tool("calc__add", annotations=READ_ONLY), False),
    ],
)
def test_each_role_sees_what_its_rules_allow_and_deny_wins(
    policy: Policy, role: str | None, record: ToolRecord, visible: bool
) -> None:
    assert policy.may_see(role, record) is visible


def test_a_role_with_no_allow_rules_sees_nothing() -> None:
    policy = Policy.from_config({"empty": {}}, source_file="gateway.yaml")
    assert not policy.may_see("empty", tool("calc__add", annotations=READ_ONLY))


def test_meta_tools_are_visible_to_every_role_and_to_none(policy: Policy) -> None:
    meta = tool("Load_Skill", source="gateway")
    assert all(policy.may_see(role, meta) for role in ("intern", "nobody", "stranger", None))


def test_without_a_roles_section_everything_is_visible() -> None:
    policy = Policy.from_config(None, source_file="gateway.yaml")
    assert policy.role_names() is None
    assert policy.may_see(None, tool("sqlite__execute", annotations=DESTRUCTIVE))
    assert policy.may_see("anyone", tool("calc__add"))
    assert policy.budget("anyone") is None


def test_a_map_rule_needs_every_key_to_match() -> None:
    rule = Rule.parse({"name": "sqlite__*", "server": "sqlite", "tag": "db", "risk": "low"})
    match = tool("sqlite__query", annotations=READ_ONLY, tags=frozenset({"db"}))
    assert rule.matches(match, Risk.LOW)
    assert not rule.matches(match, Risk.MEDIUM)
    assert not rule.matches(tool("sqlite__query", annotations=READ_ONLY), Risk.LOW)
    assert not rule.matches(tool("sqlite__query", source="other", tags=frozenset({"db"})), Risk.LOW)
    assert not rule.matches(tool("calc__query", source="sqlite", tags=frozenset({"db"})), Risk.LOW)


def test_a_server_rule_matches_the_source_not_the_name_prefix() -> None:
    policy = Policy.from_config({"r": {"allow": [{"server": "db-main"}]}}, source_file="gateway.yaml")
    assert policy.may_see("r", tool("db__query", source="db-main"))
    assert not policy.may_see("r", tool("db-main__query", source="other"))


@pytest.mark.parametrize(
    ("record", "risk"),
    [
        (tool("a__configured", annotations=READ_ONLY, risk=Risk.HIGH), Risk.HIGH),
        (tool("a__read", annotations=READ_ONLY), Risk.LOW),
        (
            tool(
                "a__read_and_destructive", annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=True)
            ),
            Risk.LOW,
        ),
        (tool("a__destructive", annotations=DESTRUCTIVE), Risk.HIGH),
        (tool("a__additive", annotations=types.ToolAnnotations(destructive_hint=False)), Risk.MEDIUM),
        (tool("a__hint_absent", annotations=PLAIN), Risk.MEDIUM),
        (tool("a__no_annotations"), Risk.MEDIUM),
    ],
)
def test_risk_comes_from_config_then_annotations(record: ToolRecord, risk: Risk) -> None:
    assert derive_risk(record) is risk


def test_risks_are_ordered_low_medium_high() -> None:
    assert risk_at_least(Risk.HIGH, Risk.MEDIUM)
    assert risk_at_least(Risk.MEDIUM, Risk.MEDIUM)
    assert not risk_at_least(Risk.LOW, Risk.MEDIUM)


@pytest.mark.parametrize(
    ("role", "skill", "skill_roles", "visible"),
    [
        ("intern", "quick-math", ("admin",), True),
        ("intern", "db-admin", ("admin",), False),
        ("admin", "db-admin", ("admin",), True),
        ("intern", "open-skill", (), True),
        ("stranger", "open-skill", (), False),
        (None, "open-skill", (), False),
        ("stranger", "named", ("stranger",), False),
    ],
)
def test_skills_are_visible_by_role_list_or_skill_metadata(
    policy: Policy, role: str | None, skill: str, skill_roles: tuple[str, ...], visible: bool
) -> None:
    assert policy.may_see_skill(role, skill, skill_roles) is visible


def test_without_roles_skills_follow_their_own_metadata() -> None:
    policy = Policy()
    assert policy.may_see_skill(None, "open", ())
    assert policy.may_see_skill("ops", "restricted", ("ops",))
    assert not policy.may_see_skill("dev", "restricted", ("ops",))


def test_the_budget_of_a_role_is_read_from_its_section(policy: Policy) -> None:
    assert policy.budget("intern") == Budget(calls_per_minute=30, concurrent=2)
    assert policy.budget("admin") is None
    assert policy.budget("stranger") is None


@pytest.mark.parametrize(
    ("roles", "path", "problem"),
    [
        ({"intern": {"deny": ["ok", {"risk": "extreme"}]}}, "roles.intern.deny[1].risk", "must be one of"),
        ({"intern": {"allow": [{}]}}, "roles.intern.allow[0]", "non-empty"),
        ({"intern": {"allow": [{"server": "a", "colour": "red"}]}}, "roles.intern.allow[0].colour", "unknown key"),
        ({"intern": {"allow": "calc__*"}}, "roles.intern.allow", "expected a list"),
        ({"intern": {"budget": {"concurrent": 0}}}, "roles.intern.budget.concurrent", "at least 1"),
        ({"intern": {"alow": ["*"]}}, "roles.intern.alow", "did you mean 'allow'"),
        ({}, "roles", "non-empty"),
    ],
)
def test_a_bad_roles_section_names_the_file_and_the_place(roles: Any, path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Policy.from_config(roles, source_file="gateway.yaml")
    assert raised.value.file == "gateway.yaml"
    assert raised.value.path == path
    assert problem in raised.value.problem


def test_a_role_marked_admin_is_an_admin_and_others_are_not() -> None:
    policy = Policy.from_config({"ops": {"allow": ["*"], "admin": True}, "guest": {"allow": ["*"]}}, source_file="t")
    assert policy.is_admin("ops")
    assert not policy.is_admin("guest")
    assert not policy.is_admin("nobody")
    assert not policy.is_admin(None)


def test_without_a_roles_section_nobody_is_an_admin() -> None:
    assert not Policy().is_admin("ops")


def test_only_a_role_marked_approve_own_may_approve_its_own_parked_calls() -> None:
    roles = {"dev": {"allow": ["*"], "approve": "own"}, "ops": {"allow": ["*"], "approve": "admins"}, "guest": {}}
    policy = Policy.from_config(roles, source_file="t")
    assert policy.approves_own("dev")
    assert not policy.approves_own("ops")
    assert not policy.approves_own("guest")
    assert not policy.approves_own(None)
    assert not Policy().approves_own("dev")


def test_an_unknown_approve_setting_names_the_place() -> None:
    with pytest.raises(ConfigError) as raised:
        Policy.from_config({"dev": {"allow": ["*"], "approve": "anyone"}}, source_file="t")
    assert "roles.dev.approve" in str(raised.value)
