"""Role rules: which role a verified token's claims give, by the rules of `auth.jwt.role_rules`.

Pure. The first rule that matches gives the role. A rule names a claim (a dotted path such as
`realm_access.roles`) and a value: it matches when the claim equals the value or is a list holding
it. A rule with neither matches every verified token, so it can close the list as a default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RoleRule:
    """`claim` holding `value` gives `role`; with no claim, every token gets `role`."""

    role: str
    claim: str | None = None
    value: str | None = None

    def describe(self) -> str:
        """The rule as people read it in `check` and in errors."""
        if self.claim is None:
            return f"every verified token gets '{self.role}'"
        return f"'{self.claim}' holding '{self.value}' gives '{self.role}'"


def claim(claims: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted claim path (`realm_access.role`), or None."""
    value: Any = claims
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def matching_rule(claims: Mapping[str, Any], rules: Sequence[RoleRule]) -> tuple[int, RoleRule] | None:
    """The first rule the claims match, with its index; None when none does."""
    for index, rule in enumerate(rules):
        if rule.claim is None:
            return index, rule
        value = claim(claims, rule.claim)
        if value == rule.value or (isinstance(value, list) and rule.value in value):
            return index, rule
    return None
