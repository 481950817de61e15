"""The live tool groups: the config file's and those registered through the API, kept across restarts.

`groups.GroupSet` holds the groups and answers who is in which; this adds the edges: the registration
store (API groups come back at start, the file wins a name clash), an edited config file's groups
taken in place of the old ones, and the listeners told each time a group changes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import anyio

from gateway.auth.groups import Group, GroupSet, parse_group
from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog
from gateway.catalog.tools import ToolRecord
from gateway.errors import ConfigError
from gateway.stores import DatabaseError
from gateway.stores.registrations import RegistrationStore

log = logging.getLogger(__name__)

API_SOURCE: Literal["api"] = "api"
GroupListener = Callable[[str], Awaitable[None]]
Announce = Callable[[], Awaitable[None]]


class LiveGroups:
    """The group set of a running gateway, and who to tell when one changes.

    `visibility` applies the groups to the `catalog`; `announce` tells the other replicas the
    registrations changed. The registration store comes with `load_stored`.
    """

    def __init__(self, groups: GroupSet, catalog: Catalog, visibility: Visibility, announce: Announce) -> None:
        self.set = groups
        self._catalog = catalog
        self._visibility = visibility
        self._announce = announce
        self._listeners: list[GroupListener] = []
        self._store: RegistrationStore | None = None

    def on_change(self, listener: GroupListener) -> None:
        """Call `listener` with a group's name whenever that group changes."""
        self._listeners.append(listener)

    def load_stored(self, store: RegistrationStore) -> None:
        """Add the groups registered through the API; a name the file uses stays the file's. The
        groups the API registers from now on are kept in `store`."""
        self._store = store
        for group in self._stored(store.entries("group")).values():
            self.set.add(group)

    async def follow_store(self, store: RegistrationStore) -> None:
        """Take the API's groups as `store` holds them now (another replica changed them); each
        changed group is told."""
        # In a worker thread: PostgreSQL may take its connect timeout to answer.
        entries = await anyio.to_thread.run_sync(store.entries, "group")
        for name in self.set.follow_api(self._stored(entries)):
            await self._changed(name)

    def _stored(self, entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Group]:
        """The groups registered through the API, from the store's `entries`; a name the file uses stays the file's."""
        stored: dict[str, Group] = {}
        for name, entry in entries.items():
            current = self.set.get(name)
            if current is not None and current.source == "file":
                log.warning("group %r registered through the API is skipped: the configuration file defines it", name)
                continue
            try:
                group, _ = parse_group({**entry, "name": name}, source_file="registrations", source=API_SOURCE)
            except ConfigError as error:
                log.warning("group %r registered through the API is skipped: %s", name, error)
                continue
            stored[name] = group
        return stored

    async def add(self, entry: Mapping[str, Any]) -> Group:
        """Register a group (`entry` is a `groups` entry with a "name"), checked like the file's
        (`ConfigError`), kept across restarts; `ConflictError` when the name is taken."""
        assert self._store is not None
        group, stored = parse_group(entry, source_file=API_SOURCE, source=API_SOURCE)
        self.set.add(group)
        try:
            await anyio.to_thread.run_sync(self._store.save, "group", group.name, stored)
        except DatabaseError:
            self.set.remove(group.name)
            raise
        await self._changed(group.name)
        await self._announce()
        return group

    async def remove(self, name: str) -> None:
        """Remove a group registered through the API (`ConflictError` for the file's); its sessions
        are told their lists changed, and see no tools from now on (over HTTP its endpoint answers 404)."""
        assert self._store is not None
        group = self.set.remove(name)
        try:
            await anyio.to_thread.run_sync(self._store.remove, "group", name)
        except DatabaseError:
            self.set.add(group)
            raise
        await self._changed(name)
        await self._announce()

    async def follow_file(self, groups: Mapping[str, Group]) -> None:
        """Take an edited config file's groups in place of the old ones; each changed group is told."""
        for name in self.set.follow_file(groups):
            await self._changed(name)

    async def _changed(self, name: str) -> None:
        for listener in list(self._listeners):
            try:
                await listener(name)
            except Exception:  # a client that went away must not fail the change
                log.debug("group listener failed", exc_info=True)

    def all(self) -> list[Group]:
        """Every group: the configuration file's, then those registered through the API."""
        return list(self.set)

    def require(self, name: str) -> Group:
        """The group `name`; `NotFoundError` when there is none."""
        return self.set.require(name)

    def tools(self, name: str, role: str | None) -> list[ToolRecord]:
        """The catalog tools of group `name` that `role` may see, in catalog order (meta-tools aside)."""
        self.set.require(name)
        return [tool for tool in self._catalog.tools if self._visibility.allows(role, name, tool)]
