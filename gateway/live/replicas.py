"""The API registrations other replicas changed, applied here: servers, groups, names and pins
as the store holds them now, each time another replica announces a change."""

from __future__ import annotations


class Replicas:
    """Applies what the other replicas registered."""

    async def _registrations_changed(self) -> None:
        self._stale.set()

    async def _apply_registrations(self) -> None:
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
            self.background.report(REGISTRATIONS, None)

    async def follow_registrations(self) -> None:
        """Apply the API registrations as stored now: another replica changed them (see `gateway.shared`).
        Servers are added, replaced or removed as the store says; groups likewise; clients are told."""
        await self._started.wait()
        async with self.servers.lock:
            await self.servers.follow_store()
            self.catalog.names.load(await anyio.to_thread.run_sync(self.name_store.rows))
            self._members_changed()
            self.catalog.refresh()
        await self.live_groups.follow_store(self.registrations)
        await self.pins.follow_store()
        await self._catalog_changed()
