"""The API registrations other replicas changed, applied here: servers, groups, names and pins
as the store holds them now, each time another replica announces a change."""

from __future__ import annotations

import anyio

from gateway.live.catalog import LiveCatalog
from gateway.live.groups import LiveGroups
from gateway.live.pins import LivePins
from gateway.live.serveradmin import ServerAdmin
from gateway.runtime.background import Background
from gateway.stores.names import NameStore
from gateway.stores.registrations import RegistrationStore

REGISTRATIONS = "registrations"
"""The name of the loop applying what other replicas registered, in `/readyz`."""


class Replicas:
    """Applies what the other replicas registered, kept in `registrations` (with the owners of
    exposed tool names in `names`); `started` is set once the gateway runs."""

    def __init__(
        self,
        servers: ServerAdmin,
        groups: LiveGroups,
        catalog: LiveCatalog,
        pins: LivePins,
        registrations: RegistrationStore,
        names: NameStore,
        background: Background,
        started: anyio.Event,
    ) -> None:
        self._servers = servers
        self._groups = groups
        self._catalog = catalog
        self._pins = pins
        self._registrations = registrations
        self._names = names
        self._background = background
        self._started = started
        # Set when another replica announced a change of the registrations not applied here yet.
        self._stale = anyio.Event()

    async def registrations_changed(self) -> None:
        """Another replica announced a change of the registrations: `apply_registrations` applies it."""
        self._stale.set()

    async def apply_registrations(self) -> None:
        """Apply the registrations each time another replica changed them; a store that fails
        leaves them stale, for the next run of this loop (`Background.keep`) to apply."""
        while True:
            await self._stale.wait()
            self._stale = anyio.Event()
            try:
                await self.follow_registrations()
            except BaseException:
                self._stale.set()
                raise
            self._background.report(REGISTRATIONS, None)

    async def follow_registrations(self) -> None:
        """Apply the API registrations as stored now: another replica changed them (see `gateway.shared`).
        Servers are added, replaced or removed as the store says; groups likewise; clients are told."""
        await self._started.wait()
        async with self._servers.live.lock:
            await self._servers.live.follow_store()
            await self._catalog.load_names(self._names)
            self._servers.members_changed()
            self._catalog.catalog.refresh()
        await self._groups.follow_store(self._registrations)
        await self._pins.follow_store()
        await self._catalog.changed()
