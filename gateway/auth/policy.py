"""What each role may see: allow and deny rules over tools, skill visibility, and tool risk.

Pure: no I/O, no clock. The `roles` section of the configuration becomes a `Policy`.

Rules. A rule is a glob over the exposed tool name (`"calc__*"`), or a map whose keys must all
match (`{server: sqlite, risk: low}`): `name` (a glob over the exposed name), `server` (the tool's
source: the server name, or the namespace of local tools), `tag` (one of the tool's tags) and
`risk` (exactly that risk, as `derive_risk` gives it).

Tools. Meta-tools (source `gateway`) are always visible: the caller always has them. Without a
`roles` section everything is visible, so the gateway works without roles. With one, a call
with no role or a role the section does not name sees nothing; a known role sees a tool when an
allow rule matches it and no deny rule does (deny wins); a role with no allow rules sees nothing.

Skills. Without a `roles` section a skill is visible when its metadata names no roles or names
the caller's role. With one, a caller with no role or an unknown role sees no skill; a known
role sees a skill when its `skills:` lists it, or the skill's metadata.roles names the role, or
the skill names no roles at all. The tools a skill brings are still filtered tool by tool, and a
skill whose every tool is hidden is hidden too (gateway/skills/host.py).

Resources and prompts. A server's resources, templates and prompts are visible to a role that
may see at least one of the server's tools; a role that sees none of them does not learn the
server exists (gateway/service.py applies this to listings, reads, prompts and completion).

Admins. A role marked `admin: true` operates the gateway: it sees per-server detail and may
approve parked calls. Without a `roles` section nobody is an admin. A role marked `approve: own`
lets its callers approve their own parked calls too; by default (`approve: admins`) only admins may.

Risk. A risk set in the configuration wins. Otherwise, from the tool's annotations: read-only is
low; `destructiveHint` set explicitly to true is high; anything else is medium, including an
absent `destructiveHint` (the protocol's default of true would make every unannotated tool high
and drown the real ones in confirmations). Annotations are the server's word, so they never bring
a tool below the highest risk its exposed name has carried (`gateway.catalog.ownership`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import mcp_types as types

from gateway.catalog.tools import GATEWAY_SOURCE, Risk, ToolRecord
from gateway.problems import validate_section

_LIMIT = {"type": "integer", "minimum": 1}
BUDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "calls_per_minute": _LIMIT,
        "caller_calls_per_minute": _LIMIT,
        "concurrent": _LIMIT,
        "max_calls_per_session": _LIMIT,
    },
}
"""The JSON Schema of a role's `budget` map."""


@dataclass(frozen=True, slots=True)
class Budget:
    """One role's limits; None means unlimited."""

    calls_per_minute: int | None = None
    caller_calls_per_minute: int | None = None
    concurrent: int | None = None
    max_calls_per_session: int | None = None

    @classmethod
    def from_config(cls, raw: Mapping[str, int]) -> Budget:
        """A budget from its (already validated) configuration map."""
        return cls(
            calls_per_minute=raw.get("calls_per_minute"),
            caller_calls_per_minute=raw.get("caller_calls_per_minute"),
            concurrent=raw.get("concurrent"),
            max_calls_per_session=raw.get("max_calls_per_session"),
        )


_RISK_RANK = {Risk.LOW: 0, Risk.MEDIUM: 1, Risk.HIGH: 2}

RULE_SCHEMA: dict[str, Any] = {
    "description": "a tool name glob, or a map of name, server, tag and risk",
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "server": {"type": "string", "minLength": 1},
                "tag": {"type": "string", "minLength": 1},
                "risk": {"enum": [risk.value for risk in Risk]},
            },
        },
    ],
}
"""The JSON Schema of one allow or deny rule (roles and tool groups share it)."""

ROLES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "allow": {"type": "array", "items": RULE_SCHEMA},
            "deny": {"type": "array", "items": RULE_SCHEMA},
            "skills": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "budget": BUDGET_SCHEMA,
            "admin": {"type": "boolean"},
            "approve": {"enum": ["own", "admins"]},
            "code_mode": {"type": "boolean"},
        },
    },
}
"""The JSON Schema of the `roles` section."""


def derive_risk(tool: ToolRecord) -> Risk:
    """The tool's risk: the configured one, else low for read-only, high for explicitly destructive,
    else medium; never below the highest risk its exposed name has carried (`risk_floor`)."""
    if tool.risk is not None:
        return tool.risk
    annotated = _annotated_risk(tool.annotations)
    floor = tool.risk_floor
    return annotated if floor is None or _RISK_RANK[annotated] >= _RISK_RANK[floor] else floor


def _annotated_risk(annotations: types.ToolAnnotations | None) -> Risk:
    if annotations is None:
        return Risk.MEDIUM
    if annotations.read_only_hint:
        return Risk.LOW
    if annotations.destructive_hint is True:
        return Risk.HIGH
    return Risk.MEDIUM


def risk_at_least(risk: Risk, threshold: Risk) -> bool:
    """True when `risk` is `threshold` or higher."""
    return _RISK_RANK[risk] >= _RISK_RANK[threshold]


@dataclass(frozen=True, slots=True)
class Rule:
    """One allow or deny rule; every key that is set must match."""

    name: str | None = None
    server: str | None = None
    tag: str | None = None
    risk: Risk | None = None

    @classmethod
    def parse(cls, raw: str | Mapping[str, str]) -> Rule:
        """A rule from its configuration form: a name glob, or a map (already validated)."""
        if isinstance(raw, str):
            return cls(name=raw)
        risk = raw.get("risk")
        return cls(
            name=raw.get("name"), server=raw.get("server"), tag=raw.get("tag"), risk=Risk(risk) if risk else None
        )

    def matches(self, tool: ToolRecord, risk: Risk) -> bool:
        """True when `tool`, whose risk is `risk`, meets every condition of the rule."""
        return (
            (self.name is None or fnmatchcase(tool.name, self.name))
            and (self.server is None or tool.source == self.server)
            and (self.tag is None or self.tag in tool.tags)
            and (self.risk is None or risk == self.risk)
        )


def selects(allow: tuple[Rule, ...], deny: tuple[Rule, ...], tool: ToolRecord) -> bool:
    """True when a rule of `allow` matches `tool` and none of `deny` does (deny wins; no allow rule, nothing)."""
    risk = derive_risk(tool)
    if any(rule.matches(tool, risk) for rule in deny):
        return False
    return any(rule.matches(tool, risk) for rule in allow)


@dataclass(frozen=True, slots=True)
class RolePolicy:
    """What one role may see and how much it may call."""

    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    skills: frozenset[str] = frozenset()
    budget: Budget | None = None
    admin: bool = False
    approve_own: bool = False
    code_mode: bool = True
    """Whether the role may run scripts (Run_Code) when the gateway offers code mode."""

    def may_see(self, tool: ToolRecord) -> bool:
        """True when an allow rule matches the tool and no deny rule does."""
        return selects(self.allow, self.deny, tool)


class Policy:
    """Every role's policy; `roles=None` means no `roles` section, and everything is visible."""

    def __init__(self, roles: Mapping[str, RolePolicy] | None = None) -> None:
        self.roles = dict(roles) if roles is not None else None

    @classmethod
    def from_config(cls, roles_section: Any, *, source_file: str) -> Policy:
        """The policy of a `roles` section (None when the file has none); raises `ConfigError`."""
        if roles_section is None:
            return cls()
        validate_section(roles_section, ROLES_SCHEMA, section="roles", source_file=source_file)
        return cls({name: _role(raw) for name, raw in roles_section.items()})

    def may_see(self, role: str | None, tool: ToolRecord) -> bool:
        """Whether a caller with `role` may know that `tool` exists (see the module docstring)."""
        if tool.source == GATEWAY_SOURCE or self.roles is None:
            return True
        policy = self.roles.get(role) if role is not None else None
        return policy is not None and policy.may_see(tool)

    def role_names(self) -> frozenset[str] | None:
        """The configured role names, or None when no roles are configured."""
        return frozenset(self.roles) if self.roles is not None else None

    def may_see_skill(self, role: str | None, skill_name: str, skill_roles: tuple[str, ...]) -> bool:
        """Whether a caller with `role` may see the skill (see the module docstring)."""
        if self.roles is None:
            return not skill_roles or role in skill_roles
        policy = self.roles.get(role) if role is not None else None
        if policy is None:
            return False
        return skill_name in policy.skills or not skill_roles or role in skill_roles

    def is_admin(self, role: str | None) -> bool:
        """Whether `role` is marked `admin: true`: it operates the gateway (sees server detail, approves calls)."""
        policy = self.roles.get(role) if self.roles is not None and role is not None else None
        return policy is not None and policy.admin

    def approves_own(self, role: str | None) -> bool:
        """Whether callers of `role` may approve their own parked calls (`approve: own`), not only admins."""
        policy = self.roles.get(role) if self.roles is not None and role is not None else None
        return policy is not None and policy.approve_own

    def may_run_code(self, role: str | None) -> bool:
        """Whether callers of `role` may run scripts (Run_Code): every role unless it says `code_mode: false`."""
        policy = self.roles.get(role) if self.roles is not None and role is not None else None
        return policy is None or policy.code_mode

    def budget(self, role: str | None) -> Budget | None:
        """The role's budget, or None when its calls are not limited."""
        if self.roles is None or role is None:
            return None
        policy = self.roles.get(role)
        return policy.budget if policy is not None else None


def _role(raw: Mapping[str, Any]) -> RolePolicy:
    budget = raw.get("budget")
    return RolePolicy(
        allow=tuple(Rule.parse(rule) for rule in raw.get("allow", ())),
        deny=tuple(Rule.parse(rule) for rule in raw.get("deny", ())),
        skills=frozenset(raw.get("skills", ())),
        budget=Budget.from_config(budget) if budget is not None else None,
        admin=bool(raw.get("admin", False)),
        approve_own=raw.get("approve", "admins") == "own",
        code_mode=bool(raw.get("code_mode", True)),
    )
