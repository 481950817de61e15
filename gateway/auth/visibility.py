"""What a session may see of the catalog: tools, skills, and the sources behind resources and prompts."""

from __future__ import annotations

from gateway.auth.policy import Policy
from gateway.catalog import Catalog, Route
from gateway.errors import ProtocolError
from gateway.session import SessionContext
from gateway.tools import GATEWAY_SOURCE, ToolRecord


class Visibility:
    """The role rules of `policy` applied to one session and the live `catalog`."""

    def __init__(self, policy: Policy, catalog: Catalog) -> None:
        self.policy = policy
        """The role rules in force; a reloaded configuration replaces them."""
        self._catalog = catalog

    def may_see(self, session: SessionContext, tool: ToolRecord) -> bool:
        """Whether the session's caller may know that `tool` exists (meta-tools: always)."""
        return tool.source == GATEWAY_SOURCE or self.policy.may_see(session.role, tool)

    def may_see_skill(self, session: SessionContext, name: str, roles: tuple[str, ...]) -> bool:
        """Whether the session's caller may see the skill `name`, whose folder names `roles`."""
        return self.policy.may_see_skill(session.role, name, roles)

    def tools(self, session: SessionContext) -> list[ToolRecord]:
        """Every tool this session may see, listed or not, in catalog order."""
        return [tool for tool in self._catalog.tools if self.may_see(session, tool)]

    def sources(self, session: SessionContext) -> set[str]:
        """Sources whose resources and prompts the session may see: with roles, those of which
        it may see at least one tool; without roles, every source."""
        if self.policy.roles is None:
            return set(self._catalog.sources())
        return {tool.source for tool in self.tools(session)}

    def route(self, session: SessionContext, route: Route, what: str) -> Route:
        """`route`, if the session may see its source; otherwise the answer to an unknown `what`."""
        if route.source not in self.sources(session):
            raise ProtocolError(f"Unknown {what}")
        return route
