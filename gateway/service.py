"""The gateway service: the facade every front door (MCP over HTTP or stdio, REST, CLI) talks to.

`Gateway` owns every resource it starts; `async with gateway.running()` opens the stores, starts
the upstreams without waiting for them and closes them all (`async with gateway` also waits for
each upstream's first attempt to connect). `gateway.builder` wires the parts; visibility and routing live
with their concepts (`auth.visibility`, `gateway.serving.routing`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from gateway import builder
from gateway.auth.authenticator import Authenticator
from gateway.auth.groups import Group, GroupSet
from gateway.auth.identity import Identity, caller_key
from gateway.auth.policy import derive_risk
from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog, SourceListing, wanted_tool_name
from gateway.catalog.naming import SEPARATOR, near_misses
from gateway.catalog.ownership import Withheld
from gateway.catalog.pinning import OnToolChange, policy_for
from gateway.catalog.poisoning import Flags
from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext, SessionRegistry, Transport
from gateway.config.loading import load_config
from gateway.config.model import GatewayConfig, ServerConfig
from gateway.config.secrets import secrets_of, server_secrets
from gateway.errors import (
    ConfigError,
    ConflictError,
    ServerNotConnectedError,
    ToolHeldError,
    UnknownToolError,
    describe_error,
)
from gateway.live.groups import GroupListener, LiveGroups
from gateway.live.pins import LivePins
from gateway.live.reload import needs_restart, watch
from gateway.live.servers import LiveServers, Member
from gateway.pipeline import audit
from gateway.pipeline.approvals import ApprovalStore
from gateway.pipeline.audit import AuditEntry, AuditStore, arguments_digest
from gateway.pipeline.budgets import Budgets
from gateway.pipeline.chain import Pipeline, ProgressFn, ToolCall
from gateway.pipeline.confirmation import ConfirmationStore, strip_confirmation
from gateway.runtime import requestid
from gateway.runtime.background import Background
from gateway.runtime.datadir import make_private
from gateway.runtime.hostaccess import HostAccess
from gateway.runtime.metrics import REFUSED, Metrics, Readings
from gateway.runtime.redaction import Redactor
from gateway.runtime.tracing import Tracing
from gateway.serving.passthrough import PassThrough
from gateway.serving.resources import Resources
from gateway.shared import state
from gateway.skills.folder import load_skills
from gateway.skills.host import SkillHost
from gateway.skills.metatools import MetaTools
from gateway.skills.metatools import records as meta_records
from gateway.stores import DatabaseError
from gateway.stores.names import NameStore
from gateway.stores.pins import Change
from gateway.stores.registrations import RegistrationStore
from gateway.upstreams import children
from gateway.upstreams.addresses import Resolver, system_resolver
from gateway.upstreams.connection import State, Status, Upstream
from gateway.upstreams.listing import records_for
from gateway.upstreams.transports import TransportFactory

log = logging.getLogger(__name__)

# The connect timeout bounds a server's handshake; starting its process or container comes before.
START_GRACE = 5.0
REGISTRATIONS = "registrations"
"""The name of the loop applying what other replicas registered, in `/readyz`."""
ChangeListener = Callable[[], Awaitable[None]]
SessionListener = Callable[[SessionContext], Awaitable[None]]


class Gateway:
    """Everything behind the front doors: the facade they call; `builder` wires its parts."""

    audit: AuditStore
    confirmations: ConfirmationStore
    approvals: ApprovalStore
    registrations: RegistrationStore
    name_store: NameStore
    pipeline: Pipeline

    def __init__(
        self,
        config: GatewayConfig,
        *,
        transports: Mapping[str, TransportFactory] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        local_identity: Identity | None = None,
        local_group: str | None = None,
        serving: bool = True,
        resolver: Resolver = system_resolver,
        host_access: HostAccess | None = None,
    ) -> None:
        self.config = config
        self.host_access = host_access
        """The host token and sign-in link of a gateway that `serve` runs (`gateway.runtime.hostaccess`)."""
        # A gateway that only inspects (check, catalog) must not sweep the containers of one that serves.
        self._serving = serving
        settings = config.settings
        self._clock = clock
        self._wall_clock = wall_clock
        self.redact = Redactor(secrets_of(config))
        self.background = Background(clock, wall_clock, self.redact)
        """The service's background loops, kept running through failures, and how each stands."""
        self.failure: str | None = None
        """Why the service ended while its process goes on, if it did: nothing is served any more."""
        self.ended = anyio.Event()
        """Set when the service ended that way; the process should exit."""
        # Set when another replica announced a change of the registrations not applied here yet.
        self._stale = anyio.Event()
        self.data_dir = Path(settings.data_dir)
        make_private(self.data_dir)
        self.metrics = Metrics(clock)
        self.tracing = Tracing(config.tracing, str(config.path or "the configuration"))
        """The OpenTelemetry spans of each request, exported while the gateway runs when configured."""
        sources = builder.sources(config, transports or {}, clock, wall_clock, self.metrics, resolver)
        self.sandboxes, self.workspaces = sources.sandboxes, sources.workspaces
        self.local_sources, self.router = sources.local, sources.router
        # Every server's listing passes its pins on the way to the catalog.
        self.pins = LivePins(self.tool_change_policy, self._publish, lambda: self.audit, self.metrics, wall_clock)
        self.servers = LiveServers(
            sources.upstream,
            self.router,
            self.sandboxes,
            self.pins.listed,
            self._source_removed,
            file=str(config.path or "the config file"),
            base_dir=config.path.parent if config.path else Path.cwd(),
            secrets=lambda: self.config.secrets.for_registrations(),
            registration=config.registration,
            drain_timeout=settings.call_timeout,
            vet_names=self._vet_names,
            reserved_namespaces=[entry.namespace for entry in config.local_tools],
        )
        for server in config.servers:
            self.servers.enlist(Member(server, "file"))
        self.upstreams = self.servers.upstreams
        self.reload_errors: tuple[str, ...] = ()
        """Why the last edit of the config file was rejected; empty once one applies."""
        self.pending_restart: tuple[str, ...] = ()
        """What the config file now says that only a restart applies (for `/readyz` and the API)."""
        self._started_with = config
        self.policy = config.policy
        self.authenticator = Authenticator(config.auth, host_access)
        if host_access is not None:
            self.redact.learn([host_access.token, host_access.link_code or ""])
        self.local_identity = local_identity or Identity(settings.stdio_caller, settings.stdio_role, "stdio")
        # The tool group of the client that launched the gateway as a command (`stdio --group`).
        self.local_group = local_group
        self.catalog = Catalog(reserved=[tool.name for tool in meta_records(True, True)])
        self._told_withheld: set[Withheld] = set()
        self.live_groups = LiveGroups(GroupSet(config.groups))
        self.visibility = Visibility(self.policy, self.catalog, self.live_groups.set)
        self.skills = SkillHost(
            load_skills(settings.skill_dirs),
            self.catalog,
            settings,
            self.visibility.may_see,
            self.visibility.may_see_skill,
            self._session_changed,
            self.metrics,
        )
        self._members_changed()
        self.sessions = SessionRegistry(settings.session_idle_timeout)
        self.shared = builder.shared_state(config, clock, wall_clock)
        # Through the facade, so that a reloaded `roles` section applies to budgets at once.
        self.budgets = Budgets(lambda role: self.policy.budget(role), clock, self.shared.budgets)
        self.passthrough = PassThrough(
            self.budgets, lambda: self.audit, self.sessions.live, self.visibility.sources, clock, wall_clock
        )
        self.workspaces.notices = self.passthrough.notice
        self.tasks = self.passthrough.tasks
        self.tasks.abandon = self.router.cancel_abandoned
        self.resources = Resources(self.visibility, self.catalog, self.router, self.skills, self.passthrough)
        """Resources, templates, prompts and completion as each session may see them."""
        self._listeners: list[ChangeListener] = []
        self._session_listeners: list[SessionListener] = []
        self._group: TaskGroup | None = None
        self._stack = AsyncExitStack()
        self._started = anyio.Event()
        self.flags = Flags()
        """What in each tool's model-visible text looks aimed at the model (tool poisoning): flagged, never blocked."""
        self.settled = anyio.Event()
        """Set once every server the gateway started with has connected or failed its first attempt
        (or the start-up wait of `wait_for_upstreams` ran out); it stays set."""
        self.metrics.watch(
            Readings(self.statuses, tuple(State), self.sessions.live, self._pending_approvals, self.flags.per_source)
        )

    def wall_now(self) -> float:
        """Now, in epoch seconds, by the gateway's wall clock (what audit rows and approvals are stamped with)."""
        return self._wall_clock()

    def wall_time(self, instant: float) -> float:
        """An instant of the monotonic clock (when a session started or was last seen) as epoch seconds."""
        return self._wall_clock() - (self._clock() - instant)

    def sandbox_availability(self) -> tuple[bool, str]:
        """Whether sandboxed tools can run now, and why not."""
        return self.sandboxes.availability()

    async def __aenter__(self) -> Gateway:
        await self._start()
        await self.wait_for_upstreams(self.upstreams.values())
        return self

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """The gateway started without waiting for its upstreams, for the front doors: they serve
        at once, and each upstream joins the catalog (and clients are told) when it is ready."""
        await self._start()
        if self.host_access is not None:
            # Once everything it answers with is open; gone when it stops (gateway.runtime.hostaccess).
            await anyio.to_thread.run_sync(self.host_access.write, self.data_dir)
            self._stack.callback(self.host_access.remove, self.data_dir)
        if self._serving and self.config.path is not None and self._group is not None:
            stop = anyio.Event()
            # Closed before the task group is cancelled: a watch ends at once when told, not at its next timeout.
            self._stack.callback(stop.set)
            skill_dirs = self.config.settings.skill_dirs
            self.background.start("config_watch", watch, self.config.path, skill_dirs, self.reload_from_file, stop)
        try:
            yield self
        finally:
            try:
                await self._stack.aclose()
            except Exception as error:
                # A task of the service's group failed: everything it started is gone. Said at once,
                # so that `/healthz` fails and `serve` exits for a supervisor to start it again.
                self.failure = "; ".join(describe_error(cause) for cause in _causes(error))
                self.ended.set()
                raise

    async def _start(self) -> None:
        # Entered first, so left last: the spans of everything that stops are still sent.
        self._stack.enter_context(self.tracing.exporting())
        if self._serving:
            await anyio.to_thread.run_sync(children.end_leftovers, self.data_dir)
        # In a worker thread: with PostgreSQL, opening connects and migrates over the network.
        stores = await anyio.to_thread.run_sync(
            builder.open_stores, self.config.store, self.data_dir, self.redact, self._wall_clock, self._stack
        )
        self.audit, self.confirmations, self.approvals = stores.audit, stores.confirmations, stores.approvals
        self.registrations, self.name_store = stores.registrations, stores.names
        self.skills.vectors = stores.vectors
        self.pins.start(stores.pins)
        self.catalog.names.load(await anyio.to_thread.run_sync(self.name_store.rows))
        self._stack.push_async_callback(self.shared.aclose)
        self.live_groups.load_stored(self.registrations)
        share = builder.share_step(self.config, self.shared, self.budgets.charge_of, holds_attempts=True)
        self.pipeline = builder.pipeline(
            self.config,
            stores,
            self.skills,
            self.budgets,
            share,
            self.sandboxes,
            self._wall_clock,
            self.metrics,
            self.router.execute,
        )
        meta = MetaTools(self.skills, self.call_tool)
        meta_share = builder.share_step(self.config, self.shared, write_through=True)
        self._meta_pipeline = builder.meta_pipeline(stores, meta_share, self._wall_clock, self.metrics, meta.run)
        for name, source in self.local_sources.items():
            self.catalog.update(SourceListing(source=name, namespace=name, tools=tuple(source.records)))
        self._flag_new_tools()
        self._group = self.router.group = await self._stack.enter_async_context(anyio.create_task_group())
        self.background.attach(self._group)
        self._stack.push_async_callback(self.sandboxes.close)
        await self.sandboxes.start(self.background, owner=self._serving)
        await self.workspaces.start(self.background, owner=self._serving)
        if self._serving:
            # Spare workspaces are made once workspaces know whether they are size-limited.
            self.sandboxes.warm_sessions(self.workspaces)
        self._stack.push_async_callback(self._close_sessions)
        self._stack.callback(self._group.cancel_scope.cancel)
        self.servers.start(self._group, self.registrations)
        self._members_changed()
        await self._keep_names()
        self._group.start_soon(self._settle, list(self.upstreams.values()))
        report = self.background.report
        self.background.start("idle_sessions", self._expire_idle_sessions)
        self.background.start(audit.SHIPPING, self.audit.maintain, report)
        self.background.start(state.WRITES, self.shared.write_behind, report)
        if self._serving:
            self.background.start(state.CHANGES, self.shared.follow, self._registrations_changed, report)
            self.background.start(REGISTRATIONS, self._apply_registrations)
        self._started.set()

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def wait_for_upstreams(self, upstreams: Iterable[Upstream]) -> None:
        """Wait until each of `upstreams` has tried once to connect, at most the connect timeout
        (and `START_GRACE` for starting its process or container) after the gateway started."""
        await self._started.wait()
        with anyio.move_on_after(self.config.settings.upstream_connect_timeout + START_GRACE):
            for upstream in upstreams:
                await upstream.first_attempt.wait()

    async def wait_started(self) -> None:
        """Wait until the gateway has started (its stores open, its servers connecting)."""
        await self._started.wait()

    async def _settle(self, upstreams: list[Upstream]) -> None:
        await self.wait_for_upstreams(upstreams)
        self.settled.set()

    async def first_listing(self, session: SessionContext) -> None:
        """Hold a session's first tools/list until the servers the gateway started with have
        connected or failed, at most `first_listing_wait` seconds: a client that lists once, at
        once, sees every server that starts in time."""
        if session.listed:
            return
        session.listed = True
        with anyio.move_on_after(self.config.settings.first_listing_wait):
            await self.settled.wait()

    async def required_failure(self) -> str | None:
        """Why the gateway cannot serve: a required server whose first attempt to connect failed
        or did not end within its timeout; None once every required server is ready."""
        required = [upstream for upstream in self.upstreams.values() if upstream.config.required]
        await self.wait_for_upstreams(required)
        timeout = self.config.settings.upstream_connect_timeout
        for status in self.statuses():
            if status.required and status.enabled and status.state != State.READY:
                reason = status.error or f"not connected after {timeout + START_GRACE:g} s"
                return f"required server '{status.name}' did not connect: {reason}"
        return None

    def _pending_approvals(self) -> int:
        return len(self.approvals.pending())

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

    def on_change(self, listener: ChangeListener) -> None:
        """Call `listener` whenever the catalog changes (to tell connected clients)."""
        self._listeners.append(listener)

    def on_group_change(self, listener: GroupListener) -> None:
        """Call `listener` with a group's name when that group is added or removed (to tell its sessions)."""
        self.live_groups.on_change(listener)

    def on_session_change(self, listener: SessionListener) -> None:
        """Call `listener` when one session's own tool list changes (skills loaded or left)."""
        self._session_listeners.append(listener)

    async def _session_changed(self, session: SessionContext) -> None:
        if self.config.settings.disclosure != "list_changed":
            return
        for listener in list(self._session_listeners):
            try:
                await listener(session)
            except Exception:  # a client that went away must not break the call that changed its skills
                log.debug("session listener failed", exc_info=True)

    async def _publish(self, listing: SourceListing) -> None:
        self.catalog.update(listing)
        await self._catalog_changed()

    async def _source_removed(self, name: str) -> None:
        self.pins.forget(name)
        self.catalog.remove(name)
        await self._catalog_changed()

    def tool_change_policy(self, name: str) -> OnToolChange:
        """What a changed tool of server `name` meets: its `on_tool_change`, else the default of where it is defined."""
        member = self.servers.members.get(name)
        configured = member.config.on_tool_change if member is not None else None
        return policy_for(configured, registered=member is not None and member.source == "api")

    # Changed tool definitions (see `livepins`)

    async def tool_changes(self) -> list[Change]:
        """Every changed tool definition on record, newest first."""
        return await anyio.to_thread.run_sync(self.pins.store.changes)

    async def decide_tool_change(self, change_id: str, accept: bool, decided_by: str) -> Change:
        """Accept (re-pin; clients get the new definition) or reject (it stays hidden) a pending change."""
        change = await self.pins.decide(change_id, accept, decided_by)
        await self.shared.announce()
        return change

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

    # Tool groups (see `livegroups`)

    def groups(self) -> list[Group]:
        """Every group: the configuration file's, then those registered through the API."""
        return list(self.live_groups.set)

    def group(self, name: str) -> Group:
        """The group `name`; `NotFoundError` when there is none."""
        return self.live_groups.set.require(name)

    async def add_group(self, entry: Mapping[str, Any]) -> Group:
        """Register a group (`entry` is a `groups` entry with a "name"), checked like the file's
        (`ConfigError`), kept across restarts; `ConflictError` when the name is taken."""
        group = await self.live_groups.add(entry, self.registrations)
        await self.shared.announce()
        return group

    async def remove_group(self, name: str) -> None:
        """Remove a group registered through the API (`ConflictError` for the file's); its sessions
        are told their lists changed, and see no tools from now on (over HTTP its endpoint answers 404)."""
        await self.live_groups.remove(name, self.registrations)
        await self.shared.announce()

    def group_tools(self, name: str, role: str | None) -> list[ToolRecord]:
        """The catalog tools of group `name` that `role` may see, in catalog order (meta-tools aside)."""
        self.live_groups.set.require(name)
        return [tool for tool in self.catalog.tools if self.visibility.allows(role, name, tool)]

    # The live server set (the admin API's operations; see `liveservers`)

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

    async def reload_from_file(self) -> bool:
        """Read `config.path` again and apply it; an invalid file is logged and kept in
        `reload_errors`, and the running configuration stays. True when it applied."""
        if self.config.path is None:
            return False
        try:
            config = await anyio.to_thread.run_sync(load_config, self.config.path)
        except ConfigError as error:
            self.reload_errors = tuple(error.message.splitlines())
            for line in self.reload_errors:
                log.error("configuration not reloaded: %s", line)
            return False
        self.reload_errors = ()
        await self.reload(config)
        return True

    async def reload(self, config: GatewayConfig) -> None:
        """Apply an edited configuration live: servers, roles and skills; settings that only a
        restart applies are named in a warning and keep their running values."""
        await self._started.wait()
        for name in needs_restart(self.config, config):
            log.warning("configuration: %s changed; it applies only after a restart", name)
        # Against what this process started with: an edit undone needs no restart any more.
        self.pending_restart = tuple(needs_restart(self._started_with, config))
        async with self.servers.lock:
            # Before the servers: registrations that were skipped may name a secret offered only now.
            self.config = replace(self.config, secrets=config.secrets)
            self.redact.learn(config.secrets.values.values())
            await self.servers.follow_file(config.servers)
            self.policy = self.visibility.policy = config.policy
            if config.auth.enabled == self.authenticator.settings.enabled:
                # Keys, JWT settings and the roles a token may name take effect with the next request.
                self.authenticator.settings = config.auth
                self.redact.learn(config.auth.plain_keys)
            # Read again whether or not the list changed: the watcher also reloads when a folder's files change.
            self.skills.replace(await anyio.to_thread.run_sync(load_skills, config.settings.skill_dirs))
            settings = replace(self.config.settings, skill_dirs=config.settings.skill_dirs)
            self.config = replace(
                self.config,
                servers=config.servers,
                policy=config.policy,
                groups=config.groups,
                settings=settings,
                registration=config.registration,
                auth=self.authenticator.settings,
            )
            self._members_changed()
        await self.live_groups.follow_file(config.groups)
        await self._catalog_changed()
        log.info("configuration reloaded from %s", config.path)

    # Sessions

    def open_session(
        self,
        session_id: str,
        identity: Identity,
        transport: Transport,
        handle: str | None = None,
        group: str | None = None,
    ) -> SessionContext:
        """The context of a client session, created on first use and bound to its caller and role.

        The context's caller is the unambiguous key of `identity` (an anonymous session's own);
        `handle` names a stateless-era caller's state, bounded per caller like HTTP sessions;
        `group` is the tool group whose endpoint the session was opened on, kept for its life.
        """
        caller = caller_key(identity, session_id)
        fresh = self.sessions.get(session_id) is None
        if fresh and handle is not None:
            self._make_room_for_handle(caller)
        context = self.sessions.open(session_id, caller, transport, self._clock(), handle=handle)
        # The role is the one of the latest credential: a token that now names another role applies at once.
        context.role = identity.role
        if fresh:
            context.principal = identity.key if identity.key != caller else None
            context.group = group
        return context

    def _make_room_for_handle(self, caller: str) -> None:
        # Handles are chosen by the client; the limit per caller keeps one caller from growing state without end.
        limit = self.config.settings.max_sessions_per_caller
        mine = sorted(
            (s for s in self.sessions.live() if s.handle is not None and s.caller == caller),
            key=lambda s: s.last_seen,
        )
        for context in mine[: max(0, len(mine) - limit + 1)]:
            self.sessions.release(context.id)
            if self._group is not None:
                self._group.start_soon(context.close)

    async def record_session_event(self, caller: str, session_id: str, outcome: str, detail: str) -> None:
        """Audit a session refused or evicted at the HTTP edge's session limits; count a refusal."""
        if outcome.startswith(REFUSED):
            self.metrics.refusal(outcome.removeprefix(REFUSED))
        entry = AuditEntry(
            epoch=self._wall_clock(),
            session=session_id,
            caller=caller,
            tool="",
            args_digest="",
            outcome=outcome,
            duration_ms=0.0,
            detail=detail,
        )
        await self.audit.record(entry)

    async def close_session(self, session_id: str) -> None:
        """Release a session that ended."""
        context = self.sessions.release(session_id)
        if context is not None:
            await context.close()

    async def _close_sessions(self) -> None:
        for context in self.sessions.expired(float("inf")):
            await context.close()

    async def _expire_idle_sessions(self) -> None:
        interval = max(1.0, min(60.0, self.config.settings.session_idle_timeout / 4))
        while True:
            await anyio.sleep(interval)
            for context in self.sessions.expired(self._clock()):
                log.info("session %s idled out", context.id)
                await context.close()

    # The MCP surface

    def listed_tools(self, session: SessionContext) -> list[ToolRecord]:
        """What tools/list shows this session: meta-tools, core tools, and in list_changed mode
        the tools of its active skills."""
        extra = self._listed_skill_tools(session)
        listed = [tool for tool in self.visibility.tools(session) if tool.layer == "core" or tool.name in extra]
        # The meta-tools are the same for every caller: List_Skills, not a schema, names its skills.
        return list(self._meta.values()) + listed

    def listing_view(self, session: SessionContext) -> tuple[Hashable, tuple[object, ...]]:
        """What decides `listed_tools(session)`: a key naming its visibility set (role, group, the
        tools of its active skills) and the state objects the listing is computed from, which are
        replaced, never changed in place, when the catalog, the role rules, the group or the
        meta-tools change. Sessions with equal keys and the same objects get the same listing."""
        extra = self._listed_skill_tools(session)
        group = self.live_groups.set.get(session.group) if session.group is not None else None
        stamp = (self.catalog.tools, self.visibility.policy, self._meta, group)
        return (session.role, session.group, extra), stamp

    def _listed_skill_tools(self, session: SessionContext) -> frozenset[str]:
        """The tools of the session's active skills that its tools/list shows: none unless in
        list_changed mode, and never in the stateless era (no session to hold them)."""
        if self.config.settings.disclosure == "list_changed" and session.transport != "stateless":
            return frozenset(self.skills.active_tools(session))
        return frozenset()

    def input_schema(self, name: str, role: str | None, group: str | None = None) -> Mapping[str, Any] | None:
        """A tool's input schema by exposed name, for the SDK's check of 2026-era `Mcp-Param-*`
        headers (without it the SDK runs a whole tools/list before every call). None for a tool
        `role` may not see at the endpoint of `group`: its headers go unchecked, so it is answered
        like a tool that does not exist."""
        tool = self._meta.get(name) or self.catalog.tool(name)
        if tool is None or not self.visibility.allows(role, group, tool):
            return None
        return tool.input_schema

    def resolve(self, session: SessionContext, name: str) -> ToolRecord:
        """The tool `name` as this session may see it; unknown and invisible tools are alike.

        The suggestions come from the visible tools alone, so a hidden tool's name gets the
        answer it would get if that tool did not exist.
        """
        tool = self._meta.get(name) or self.catalog.tool(name)
        if tool is None or not self.visibility.may_see(session, tool):
            self._check_not_connected(session, name)
            held = self.pins.held(name)
            if held is not None and self.visibility.may_see(session, held):
                raise ToolHeldError(name, held.source)
            visible = [record.name for record in self.visibility.tools(session)]
            raise UnknownToolError(name, near_misses(name, visible))
        return tool

    def _check_not_connected(self, session: SessionContext, name: str) -> None:
        """Raise `ServerNotConnectedError` when `name` could be a tool of a server that has listed
        nothing yet and that this session's role could see, judged by the configuration alone
        (its name, server, tags and configured risk). A server without a prefix could own any name.
        Any other name stays unknown."""
        listed = set(self.catalog.sources())
        for upstream in self.upstreams.values():
            namespace = upstream.config.prefix
            prefix = f"{namespace}{SEPARATOR}" if namespace else ""
            if upstream.name in listed or not name.startswith(prefix):
                continue
            expected = records_for(upstream.config, [{"name": name[len(prefix) :], "inputSchema": {"type": "object"}}])
            if any(self.visibility.may_see(session, record.renamed(name)) for record in expected):
                raise ServerNotConnectedError(name, upstream.name)

    async def _resolve_connecting(self, session: SessionContext, name: str) -> ToolRecord:
        """`resolve`, after waiting (at most `first_listing_wait` seconds) for the server of a tool
        that could be its own while its first attempt to connect is still running."""
        try:
            return self.resolve(session, name)
        except ServerNotConnectedError as error:
            upstream = self.upstreams.get(error.server)
            if upstream is None or upstream.first_attempt.is_set():
                raise
            with anyio.move_on_after(self.config.settings.first_listing_wait):
                await upstream.first_attempt.wait()
            return self.resolve(session, name)

    async def call_tool(
        self,
        session: SessionContext,
        name: str,
        arguments: Mapping[str, Any] | None,
        progress: ProgressFn | None = None,
        notes: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Resolve and run one call through the pipeline; only an unknown tool raises.

        `notes` carries what the front door knows about the client (how to ask its user for a
        confirmation). A `_confirmation` argument is taken out here, for direct calls and calls
        through Use_Tool alike: the model cannot confirm its own call.
        """
        plain = strip_confirmation(arguments or {})
        try:
            tool = await self._resolve_connecting(session, name)
        except UnknownToolError:
            await self.audit.record(
                AuditEntry(
                    epoch=self._wall_clock(),
                    session=session.id,
                    caller=session.caller,
                    tool=name,
                    args_digest=arguments_digest(plain),
                    outcome="unknown_tool",
                    duration_ms=0.0,
                    request_id=requestid.current() or "",
                )
            )
            raise
        call = ToolCall(session=session, tool=tool, arguments=plain, progress=progress, notes=dict(notes or {}))
        if tool.name in self._meta:
            return await self._meta_pipeline.run(call)
        result = await self.pipeline.run(call)
        # Resource links name the upstream's own URIs; the client reads them back through the gateway.
        return self.catalog.exposed_links(tool.source, result)

    async def set_logging_level(self, session: SessionContext, level: types.LoggingLevel) -> None:
        """Send the session log messages of `level` and above; ask each server it can see for them."""
        self.passthrough.set_level(session, level)
        for name in sorted(self.visibility.sources(session)):
            upstream = self.upstreams.get(name)
            if upstream is not None:
                await upstream.set_logging_level(level)


def _causes(error: BaseException) -> list[BaseException]:
    """The exceptions a task group's exception group gathered, however deeply nested."""
    if isinstance(error, BaseExceptionGroup):
        return [cause for inner in error.exceptions for cause in _causes(inner)]
    return [error]
