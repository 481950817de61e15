"""What a session may see of the catalog: tools, skills, and the sources behind resources and prompts.

A session sees the intersection of its role (`auth.policy`) and, when it was opened on a tool
group's endpoint, that group (`gateway.auth.groups`). A group that no longer exists shows nothing.
"""

from __future__ import annotations

from gateway.auth.groups import GroupSet
from gateway.auth.policy import Budget, Policy
from gateway.catalog.merged import Catalog, Route
from gateway.catalog.tools import GATEWAY_SOURCE, RUN_CODE, ToolRecord
from gateway.clients.session import SessionContext
from gateway.errors import ProtocolError


class Visibility:
    """The role rules of `policy` and the live `groups` applied to one session and the live `catalog`."""

    def __init__(self, policy: Policy, catalog: Catalog, groups: GroupSet) -> None:
        self.policy = policy
        """The role rules in force; a reloaded configuration replaces them."""
        self._catalog = catalog
        self._groups = groups

    def budget(self, role: str | None) -> Budget | None:
        """The budget of `role` under the role rules in force: a reloaded `roles` section applies at once."""
        return self.policy.budget(role)

    def allows(self, role: str | None, group: str | None, tool: ToolRecord) -> bool:
        """Whether a caller with `role` on the endpoint of `group` (None: the whole catalog) may know
        that `tool` exists (meta-tools: always, but Run_Code only where the role keeps code mode)."""
        if tool.source == GATEWAY_SOURCE:
            return tool.name != RUN_CODE or self.policy.may_run_code(role)
        if not self.policy.may_see(role, tool):
            return False
        if group is None:
            return True
        chosen = self._groups.get(group)
        return chosen is not None and chosen.includes(tool)

    def may_see(self, session: SessionContext, tool: ToolRecord) -> bool:
        """Whether the session's caller may know that `tool` exists (meta-tools: always)."""
        return self.allows(session.role, session.group, tool)

    def may_see_skill(self, session: SessionContext, name: str, roles: tuple[str, ...]) -> bool:
        """Whether the session's caller may see the skill `name`, whose folder names `roles`."""
        return self.policy.may_see_skill(session.role, name, roles)

    def tools(self, session: SessionContext) -> list[ToolRecord]:
        """Every tool this session may see, listed or not, in catalog order."""
        return [tool for tool in self._catalog.tools if self.may_see(session, tool)]

    def sources(self, session: SessionContext) -> set[str]:
        """Sources whose resources and prompts the session may see: with roles or a group, those of
        which it may see at least one tool; with neither, every source."""
        if self.policy.roles is None and session.group is None:
            return set(self._catalog.sources())
        return {tool.source for tool in self.tools(session)}

    def route(self, session: SessionContext, route: Route, what: str) -> Route:
        """`route`, if the session may see its source; otherwise the answer to an unknown `what`."""
        if route.source not in self.sources(session):
            raise ProtocolError(f"Unknown {what}")
        return route
