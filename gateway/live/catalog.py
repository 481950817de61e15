"""The catalog kept in step with the live sources: listings published, servers gone taken out,
names kept in their store, tools flagged for text aimed at the model, the meta-tools offered as
the server set changes, and listeners told of each change."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import anyio
from anyio.abc import TaskGroup

from gateway import builder
from gateway.auth.policy import derive_risk
from gateway.catalog.merged import Catalog, SourceListing, wanted_tool_name
from gateway.catalog.ownership import Withheld
from gateway.catalog.poisoning import Flags
from gateway.config.model import GatewayConfig, ServerConfig
from gateway.config.secrets import server_secrets
from gateway.errors import ConflictError
from gateway.runtime.redaction import Redactor
from gateway.serving.listing import Listing
from gateway.skills.host import SkillHost
from gateway.stores import DatabaseError
from gateway.stores.names import NameStore

log = logging.getLogger(__name__)

ChangeListener = Callable[[], Awaitable[None]]


class LiveCatalog:
    """The catalog as the live sources change it.

    `config` is the configuration the gateway started with (its local tools, which only a restart
    changes); `serving` says whether this gateway serves: one that only looks (`check`, `catalog`)
    keeps the names it would claim to itself. The name store comes with `load_names`, the task
    group where listeners are told with `group`, once the gateway runs.
    """

    def __init__(
        self,
        catalog: Catalog,
        skills: SkillHost,
        listing: Listing,
        config: GatewayConfig,
        local_sources: Iterable[str],
        redact: Redactor,
        *,
        serving: bool,
    ) -> None:
        self.catalog = catalog
        self._skills = skills
        self._listing = listing
        self._config = config
        self._local = list(local_sources)
        self._redact = redact
        self._serving = serving
        self.flags = Flags()
        """What in each tool's model-visible text looks aimed at the model (tool poisoning): flagged, never blocked."""
        self._told_withheld: set[Withheld] = set()
        self._listeners: list[ChangeListener] = []
        self._names: NameStore | None = None
        self.group: TaskGroup | None = None

    def on_change(self, listener: ChangeListener) -> None:
        """Call `listener` whenever the catalog changes (to tell connected clients)."""
        self._listeners.append(listener)

    async def load_names(self, store: NameStore) -> None:
        """Take the owners of exposed tool names as `store` holds them now, and keep their changes there."""
        self._names = store
        self.catalog.names.load(await anyio.to_thread.run_sync(store.rows))

    async def publish(self, listing: SourceListing) -> None:
        """A source's listing, as it may be served, takes the place of its last."""
        self.catalog.update(listing)
        await self.changed()

    async def withdraw(self, name: str) -> None:
        """The source `name` left: its tools, resources and prompts leave the catalog."""
        self.catalog.remove(name)
        await self.changed()

    def follow_servers(self, servers: list[ServerConfig], order: list[str]) -> None:
        """Follow a change of the server set (`servers`, named in catalog `order`): catalog order,
        the namespaces whose names no other source gets, the names of servers gone freed, the
        meta-tools offered, secrets to redact."""
        self.catalog.reorder(order + self._local)
        zones = {server.prefix: server.name for server in servers if server.prefix}
        zones.update((name, name) for name in self._local)
        for server in servers:
            zones.setdefault(server.name, server.name)
        book = self.catalog.names
        # Both run: `or` would skip the release when the zones changed.
        if book.protect(zones) | book.release({*(server.name for server in servers), *self._local}):
            self.catalog.refresh()
        with_search = builder.has_extended(self._config, servers)
        self._listing.offer(with_skills=bool(self._skills.skills.skills), with_search=with_search)
        for server in servers:
            self._redact.learn(server_secrets(server))

    def vet_names(self, config: ServerConfig) -> None:
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

    async def keep_names(self) -> None:
        """Store what the name book changed (names claimed or freed, risks seen under names), and
        follow the store where another process claimed a name first."""
        book = self.catalog.names
        for tool in self.catalog.tools:
            book.observe(tool.name, derive_risk(tool))
        changes = book.pending()
        # `check` and `catalog` only look: what they would claim stays in this process.
        if not changes or not self._serving or self._names is None:
            return
        try:
            owners = await anyio.to_thread.run_sync(self._names.keep, changes)
        except DatabaseError as error:
            log.error("the owners of exposed tool names were not stored: %s", error.message)
            return
        if book.settle(owners):
            self.catalog.refresh()

    async def changed(self) -> None:
        """Follow a change of the catalog: names kept, skills and flags refreshed, clashes and names
        withheld logged (each once), listeners told."""
        await self.keep_names()
        self._skills.refresh()
        self.flag_new_tools()
        for clash in self.catalog.clashes:
            log.warning(clash.describe())
        for left in self.catalog.withheld:
            if left not in self._told_withheld:
                log.warning(left.describe())
        self._told_withheld = set(self.catalog.withheld)
        # Told in tasks of their own: a listener that waits (clients are told at most once per
        # interval) must not hold up the server whose listing changed, still inside its connect timeout.
        if self.group is not None:
            for listener in list(self._listeners):
                self.group.start_soon(self._tell, listener)

    def flag_new_tools(self) -> None:
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
