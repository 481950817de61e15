"""Administering the live server set (the admin API's and the web page's operations): adding,
changing, restarting and removing a server, one change at a time, each followed through the
catalog and announced to the other replicas; where each server stands, without secrets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from anyio.abc import TaskGroup

from gateway.catalog.ownership import Withheld
from gateway.catalog.pinning import OnToolChange, policy_for
from gateway.config.registration import RegistrationPolicy
from gateway.live.catalog import LiveCatalog
from gateway.live.servers import LiveServers, Member
from gateway.runtime.redaction import Redactor
from gateway.stores.registrations import RegistrationStore
from gateway.upstreams.connection import Status

Announce = Callable[[], Awaitable[None]]


class ServerAdmin:
    """The operations on the live server set, and what it reads of it.

    `live` is the set; `announce` tells the other replicas the registrations changed;
    `registration` gives the registration policy in force (the config file's, reloaded live). The
    registration store comes at `start`.
    """

    def __init__(
        self,
        live: LiveServers,
        catalog: LiveCatalog,
        announce: Announce,
        redact: Redactor,
        registration: Callable[[], RegistrationPolicy],
    ) -> None:
        self.live = live
        self._catalog = catalog
        self._announce = announce
        self._redact = redact
        self._registration = registration
        self._store: RegistrationStore | None = None

    def start(self, group: TaskGroup, store: RegistrationStore) -> None:
        """Start every enabled server's connection in `group`, the API's registrations in `store` among them."""
        self._store = store
        self.live.start(group, store)

    @property
    def members(self) -> Mapping[str, Member]:
        """Every server of the set, enabled or not, by name."""
        return self.live.members

    @property
    def registration(self) -> RegistrationPolicy:
        """What the admin API may register, as the configuration in force says."""
        return self._registration()

    def registered(self, name: str) -> Mapping[str, Any] | None:
        """The entry of server `name` as the API registered it; None for a server the API did not register."""
        assert self._store is not None
        return self._store.entries("server").get(name)

    def credentials(self, name: str) -> dict[str, dict[str, str]]:
        """The server's `headers` and `env` as the API shows them, their values masked (`LiveServers.credentials`)."""
        return self.live.credentials(name)

    def members_changed(self) -> None:
        """Follow a change of the server set through the catalog (`LiveCatalog.follow_servers`)."""
        servers = [member.config for member in self.live.members.values()]
        self._catalog.follow_servers(servers, self.live.order())

    def statuses(self) -> list[Status]:
        """Where each configured server stands (file and API, enabled or not); a last error (often
        a server's stderr) comes without secrets."""
        withheld: dict[str, list[Withheld]] = {}
        for left in self._catalog.catalog.withheld:
            withheld.setdefault(left.source, []).append(left)
        return [
            replace(
                status,
                error=self._redact(status.error) if status.error else None,
                withheld=tuple(withheld.get(status.name, ())),
            )
            for status in self.live.statuses()
        ]

    def tool_change_policy(self, name: str) -> OnToolChange:
        """What a changed tool of server `name` meets: its `on_tool_change`, else the default of where it is defined."""
        member = self.live.members.get(name)
        configured = member.config.on_tool_change if member is not None else None
        return policy_for(configured, registered=member is not None and member.source == "api")

    async def add(self, entry: Mapping[str, Any]) -> Status:
        """Register a server given in the config file's form plus "name": validated like a file
        entry, persisted, connected in the background; its tools join when ready, clients are told."""
        async with self.live.lock:
            status = await self.live.register(entry)
            self.members_changed()
        await self._announce()
        return status

    async def change(self, name: str, changes: Mapping[str, Any]) -> Status:
        """Replace keys of a registered server's entry (`{"enabled": false}` disables it) and reconnect it."""
        async with self.live.lock:
            status = await self.live.change(name, changes)
            self.members_changed()
        await self._announce()
        return status

    async def remove(self, name: str) -> None:
        """Remove a registered server once its running calls finished (or ran out of `call_timeout`)."""
        async with self.live.lock:
            await self.live.unregister(name)
            self.members_changed()
        await self._catalog.changed()
        await self._announce()

    async def restart(self, name: str) -> Status:
        """Reconnect an enabled server, from the config file or the API."""
        async with self.live.lock:
            return await self.live.restart(name)
