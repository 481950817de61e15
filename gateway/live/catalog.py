"""The catalog kept in step with the live sources: listings published, servers gone taken out,
names kept in their store, tools flagged for text aimed at the model, the meta-tools offered as
the server set changes, and listeners told of each change."""

from __future__ import annotations


class LiveCatalog:
    """The catalog as the live sources change it."""

    def on_change(self, listener: ChangeListener) -> None:
        """Call `listener` whenever the catalog changes (to tell connected clients)."""
        self._listeners.append(listener)

    async def _publish(self, listing: SourceListing) -> None:
        self.catalog.update(listing)
        await self._catalog_changed()

    async def _source_removed(self, name: str) -> None:
        self.pins.forget(name)
        self.catalog.remove(name)
        await self._catalog_changed()

    def _members_changed(self) -> None:
        """Follow a change of the server set: catalog order, the namespaces whose names no other
        source gets, the names of servers gone freed, the meta-tools offered, secrets to redact."""
        members = self.servers.members.values()
        servers = [member.config for member in members]
        self.catalog.reorder(self.servers.order() + list(self.local_sources))
        zones = {server.prefix: server.name for server in servers if server.prefix}
        zones.update((name, name) for name in self.local_sources)
        for server in servers:
            zones.setdefault(server.name, server.name)
        book = self.catalog.names
        # Both run: `or` would skip the release when the zones changed.
        if book.protect(zones) | book.release({*self.servers.members, *self.local_sources}):
            self.catalog.refresh()
        self._meta_kinds = {
            "with_skills": bool(self.skills.skills.skills),
            "with_search": builder.has_extended(self.config, servers),
        }
        self._meta = {tool.name: tool for tool in meta_records(**self._meta_kinds)}
        for server in servers:
            self.redact.learn(server_secrets(server))

    def _vet_names(self, config: ServerConfig) -> None:
        """Refuse (`ConflictError`, naming both servers) an API entry under which the server would
        take a tool name that is another source's: a name its `tools` settings give, one its last
        listing would get under the entry (a namespace changed to ""), or one another server owns
        under its namespace. What a server not listed yet will list is judged when it lists."""
        book = self.catalog.names
        if config.prefix:
            owned = book.owned_under(config.prefix, config.name)
            if owned:
                name, owner = owned[0]
                raise ConflictError(
                    f"The namespace '{config.prefix}' of server '{config.name}' holds '{name}', which belongs to"
                    f" server '{owner}'; give it another `namespace`"
                )
        listing = self.catalog.listing(config.name)
        listed = [tool.original_name for tool in listing.tools] if listing is not None else []
        overrides = {original: settings.name for original, settings in config.tools.items() if settings.name}
        under = SourceListing(source=config.name, namespace=config.prefix, wanted_names=overrides)
        for original in dict.fromkeys([*listed, *config.tools]):
            settings = config.tools.get(original)
            if settings is not None and not settings.enabled:
                continue
            name, _ = wanted_tool_name(under, original)
            refused = book.withheld(config.name, original, name)
            if refused is not None:
                raise ConflictError(
                    f"Server '{config.name}' would expose its tool '{original}' as '{name}', which is not its"
                    f" to take: {refused.reason}"
                )

    async def _keep_names(self) -> None:
        """Store what the name book changed (names claimed or freed, risks seen under names), and
        follow the store where another process claimed a name first."""
        book = self.catalog.names
        for tool in self.catalog.tools:
            book.observe(tool.name, derive_risk(tool))
        changes = book.pending()
        # `check` and `catalog` only look: what they would claim stays in this process.
        if not changes or not self._serving:
            return
        try:
            owners = await anyio.to_thread.run_sync(self.name_store.keep, changes)
        except DatabaseError as error:
            log.error("the owners of exposed tool names were not stored: %s", error.message)
            return
        if book.settle(owners):
            self.catalog.refresh()

    async def _catalog_changed(self) -> None:
        await self._keep_names()
        self.skills.refresh()
        self._flag_new_tools()
        for clash in self.catalog.clashes:
            log.warning(clash.describe())
        for left in self.catalog.withheld:
            if left not in self._told_withheld:
                log.warning(left.describe())
        self._told_withheld = set(self.catalog.withheld)
        # Told in tasks of their own: a listener that waits (clients are told at most once per
        # interval) must not hold up the server whose listing changed, still inside its connect timeout.
        if self._group is not None:
            for listener in list(self._listeners):
                self._group.start_soon(self._tell, listener)

    def _flag_new_tools(self) -> None:
        """Tell the operator, once per tool and again only when its findings change, which tools
        carry text aimed at the model; they stay listed and callable."""
        for tool, found in self.flags.refresh(self.catalog.tools):
            told = "; ".join(f"{finding.reason} in {finding.where}: {finding.excerpt}" for finding in found)
            log.warning("tool %s of server %s is flagged as possible tool poisoning: %s", tool.name, tool.source, told)

    @staticmethod
    async def _tell(listener: ChangeListener) -> None:
        try:
            await listener()
        except Exception:  # a client that went away must not stop the others being told
            log.debug("change listener failed", exc_info=True)
