"""What a session may list: the meta-tools, the core tools its role and group see, and in
`list_changed` mode the tools of its active skills; what decides that listing, for the listing
cache; a tool's input schema for the SDK's header check; the first listing held for the servers."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import anyio

from gateway.auth.groups import GroupSet
from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog
from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.config.model import GatewaySettings
from gateway.skills.host import SkillHost
from gateway.skills.metatools import records as meta_records


class Listing:
    """The tools each session may list, and the meta-tools the gateway offers now.

    `settled` is set once the servers the gateway started with have connected or failed.
    """

    def __init__(
        self,
        catalog: Catalog,
        visibility: Visibility,
        groups: GroupSet,
        skills: SkillHost,
        settings: GatewaySettings,
        settled: anyio.Event,
    ) -> None:
        self._catalog = catalog
        self._visibility = visibility
        self._groups = groups
        self._skills = skills
        self._settings = settings
        self._settled = settled
        self.meta: dict[str, ToolRecord] = {}
        """The meta-tools offered, by name; replaced, never changed in place, when the offer changes."""

    def offer(self, *, with_skills: bool, with_search: bool) -> None:
        """Offer the meta-tools of skills (when there are any), of search (when a tool is extended) and
        of code mode (when the settings turn it on)."""
        records = meta_records(with_skills, with_search, self._settings.code_mode)
        self.meta = {tool.name: tool for tool in records}

    def listed_tools(self, session: SessionContext) -> list[ToolRecord]:
        """What tools/list shows this session: meta-tools, core tools, and in list_changed mode
        the tools of its active skills."""
        extra = self._listed_skill_tools(session)
        listed = [tool for tool in self._visibility.tools(session) if tool.layer == "core" or tool.name in extra]
        # The meta-tools are the same for every caller (List_Skills, not a schema, names its skills),
        # but for Run_Code, which a role may turn off.
        meta = [tool for tool in self.meta.values() if self._visibility.may_see(session, tool)]
        return meta + listed

    def listing_view(self, session: SessionContext) -> tuple[Hashable, tuple[object, ...]]:
        """What decides `listed_tools(session)`: a key naming its visibility set (role, group, the
        tools of its active skills) and the state objects the listing is computed from, which are
        replaced, never changed in place, when the catalog, the role rules, the group or the
        meta-tools change. Sessions with equal keys and the same objects get the same listing."""
        extra = self._listed_skill_tools(session)
        group = self._groups.get(session.group) if session.group is not None else None
        stamp = (self._catalog.tools, self._visibility.policy, self.meta, group)
        return (session.role, session.group, extra), stamp

    def _listed_skill_tools(self, session: SessionContext) -> frozenset[str]:
        """The tools of the session's active skills that its tools/list shows: none unless in
        list_changed mode, and never in the stateless era (no session to hold them)."""
        if self._settings.disclosure == "list_changed" and session.transport != "stateless":
            return frozenset(self._skills.active_tools(session))
        return frozenset()

    def input_schema(self, name: str, role: str | None, group: str | None = None) -> Mapping[str, Any] | None:
        """A tool's input schema by exposed name, for the SDK's check of 2026-era `Mcp-Param-*`
        headers (without it the SDK runs a whole tools/list before every call). None for a tool
        `role` may not see at the endpoint of `group`: its headers go unchecked, so it is answered
        like a tool that does not exist."""
        tool = self.meta.get(name) or self._catalog.tool(name)
        if tool is None or not self._visibility.allows(role, group, tool):
            return None
        return tool.input_schema

    async def first_listing(self, session: SessionContext) -> None:
        """Hold a session's first tools/list until the servers the gateway started with have
        connected or failed, at most `first_listing_wait` seconds: a client that lists once, at
        once, sees every server that starts in time."""
        if session.listed:
            return
        session.listed = True
        with anyio.move_on_after(self._settings.first_listing_wait):
            await self._settled.wait()
