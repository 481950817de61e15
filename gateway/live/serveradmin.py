"""Administering the live server set (the admin API's and the web page's operations): adding,
changing, restarting and removing a server, one change at a time, each followed through the
catalog and announced to the other replicas; where each server stands, without secrets."""

from __future__ import annotations


class ServerAdmin:
    """The operations on the live server set, and what it reads of it."""

    def statuses(self) -> list[Status]:
        """Where each configured server stands (file and API, enabled or not); a last error (often
        a server's stderr) comes without secrets."""
        withheld: dict[str, list[Withheld]] = {}
        for left in self.catalog.withheld:
            withheld.setdefault(left.source, []).append(left)
        return [
            replace(
                status,
                error=self.redact(status.error) if status.error else None,
                withheld=tuple(withheld.get(status.name, ())),
            )
            for status in self.servers.statuses()
        ]

    def tool_change_policy(self, name: str) -> OnToolChange:
        """What a changed tool of server `name` meets: its `on_tool_change`, else the default of where it is defined."""
        member = self.servers.members.get(name)
        configured = member.config.on_tool_change if member is not None else None
        return policy_for(configured, registered=member is not None and member.source == "api")

    async def add_server(self, entry: Mapping[str, Any]) -> Status:
        """Register a server given in the config file's form plus "name": validated like a file
        entry, persisted, connected in the background; its tools join when ready, clients are told."""
        async with self.servers.lock:
            status = await self.servers.register(entry)
            self._members_changed()
        await self.shared.announce()
        return status

    async def change_server(self, name: str, changes: Mapping[str, Any]) -> Status:
        """Replace keys of a registered server's entry (`{"enabled": false}` disables it) and reconnect it."""
        async with self.servers.lock:
            status = await self.servers.change(name, changes)
            self._members_changed()
        await self.shared.announce()
        return status

    async def remove_server(self, name: str) -> None:
        """Remove a registered server once its running calls finished (or ran out of `call_timeout`)."""
        async with self.servers.lock:
            await self.servers.unregister(name)
            self._members_changed()
        await self._catalog_changed()
        await self.shared.announce()

    async def restart_server(self, name: str) -> Status:
        """Reconnect an enabled server, from the config file or the API."""
        async with self.servers.lock:
            return await self.servers.restart(name)
