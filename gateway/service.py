"""The gateway service: the facade every front door (MCP over HTTP or stdio, REST, CLI) talks to.

`Gateway` owns every resource it starts; `async with gateway.running()` opens the stores, starts
the upstreams without waiting for them and closes them all (`async with gateway` also waits for
each upstream's first attempt to connect). Between those it is the parts' home: each concern
lives in its own module and is reached as an attribute, `sessions` (`gateway.serving.sessions`),
`listing` and `calls` (`gateway.serving`), `servers` and `groups` (their administration,
`gateway.live`), `reloader` (the configuration in force); `gateway.builder` wires the pipeline.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from gateway import builder
from gateway.auth.authenticator import KEYS_LOOP, Authenticator
from gateway.auth.groups import GroupSet
from gateway.auth.identity import Identity
from gateway.auth.policy import Policy
from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog, SourceListing
from gateway.config.model import GatewayConfig
from gateway.config.secrets import secrets_of
from gateway.errors import describe_error
from gateway.live.catalog import LiveCatalog
from gateway.live.groups import LiveGroups
from gateway.live.pins import LivePins
from gateway.live.reload import Reloader, watch
from gateway.live.replicas import REGISTRATIONS, Replicas
from gateway.live.serveradmin import ServerAdmin
from gateway.live.servers import LiveServers, Member
from gateway.pipeline import audit
from gateway.pipeline.approvals import ApprovalStore
from gateway.pipeline.audit import AuditStore
from gateway.pipeline.budgets import Budgets
from gateway.pipeline.chain import Pipeline
from gateway.pipeline.confirmation import ConfirmationStore
from gateway.runtime.background import Background
from gateway.runtime.datadir import make_private
from gateway.runtime.hostaccess import HostAccess
from gateway.runtime.metrics import Metrics, Readings
from gateway.runtime.redaction import Redactor
from gateway.runtime.tracing import Tracing
from gateway.serving.calls import Calls
from gateway.serving.listing import Listing
from gateway.serving.passthrough import PassThrough
from gateway.serving.resources import Resources
from gateway.serving.sessions import Sessions
from gateway.shared import state
from gateway.skills.codemode import CodeMode
from gateway.skills.folder import load_skills
from gateway.skills.host import INDEX_LOOP, SkillHost
from gateway.skills.metatools import MetaTools
from gateway.skills.metatools import records as meta_records
from gateway.stores.database import DatabaseError
from gateway.stores.names import NameStore
from gateway.stores.registrations import RegistrationStore
from gateway.stores.serverevents import SERVER_EVENTS, ServerEvents
from gateway.upstreams import children
from gateway.upstreams.addresses import Resolver, system_resolver
from gateway.upstreams.connection import State, Upstream
from gateway.upstreams.transports import TransportFactory

# The connect timeout bounds a server's handshake; starting its process or container comes before.
START_GRACE = 5.0


class Gateway:
    """Everything behind the front doors: its lifespan, and its parts as attributes for the front
    doors to take the one they need; `builder` wires the pipeline."""

    audit: AuditStore
    confirmations: ConfirmationStore
    approvals: ApprovalStore
    registrations: RegistrationStore
    name_store: NameStore
    pipeline: Pipeline
    replicas: Replicas

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
        self._started = anyio.Event()
        self.settled = anyio.Event()
        """Set once every server the gateway started with has connected or failed its first attempt
        (or the start-up wait of `wait_for_upstreams` ran out); it stays set."""
        self.data_dir = Path(settings.data_dir)
        make_private(self.data_dir)
        self.metrics = Metrics(clock)
        self.tracing = Tracing(config.tracing, str(config.path or "the configuration"))
        """The OpenTelemetry spans of each request, exported while the gateway runs when configured."""
        self.shared = builder.shared_state(config, clock, wall_clock)
        self.server_events = ServerEvents(wall_clock, self.shared.replica)
        """Each server's states, restarts and changes, kept beside the audit trail for the dashboard."""
        sources = builder.sources(
            config, transports or {}, clock, wall_clock, self.metrics, resolver, self.server_events.note
        )
        self.sandboxes, self.workspaces = sources.sandboxes, sources.workspaces
        self.local_sources, self.router = sources.local, sources.router
        self.grants, self.callers = sources.grants, sources.callers
        """Each caller's OAuth grants for the servers that act as each user, the Connects under way,
        and each caller's own connections to those servers."""
        if host_access is not None:
            self.grants.public_url = host_access.url
        self.authenticator = Authenticator(config.auth, host_access)
        if host_access is not None:
            self.redact.learn([host_access.token, host_access.link_code or ""])
        self.local_identity = local_identity or Identity(settings.stdio_caller, settings.stdio_role, "stdio")
        # The tool group of the client that launched the gateway as a command (`stdio --group`).
        self.local_group = local_group
        self.catalog = Catalog(reserved=[tool.name for tool in meta_records(True, True, True)])
        group_set = GroupSet(config.groups)
        self.visibility = Visibility(config.policy, self.catalog, group_set)
        self.sessions = Sessions(settings, clock, wall_clock, lambda: self.audit, self.metrics)
        self.skills = SkillHost(
            load_skills(settings.skill_dirs),
            self.catalog,
            settings,
            self.visibility.may_see,
            self.visibility.may_see_skill,
            self.sessions.changed,
            self.metrics,
        )
        self.listing = Listing(self.catalog, self.visibility, group_set, self.skills, settings, self.settled)
        """What each session may list."""
        self.live_catalog = LiveCatalog(
            self.catalog, self.skills, self.listing, config, self.local_sources, self.redact, serving=serving
        )
        self.flags = self.live_catalog.flags
        # Every server's listing passes its pins on the way to the catalog.
        self.pins = LivePins(
            lambda name: self.servers.tool_change_policy(name),
            self.live_catalog.publish,
            self.live_catalog.withdraw,
            lambda: self.audit,
            self.metrics,
            wall_clock,
            self.shared.announce,
        )
        live = LiveServers(
            sources.upstream,
            self.router,
            self.sandboxes,
            self.pins.listed,
            self.pins.removed,
            file=str(config.path or "the config file"),
            base_dir=config.path.parent if config.path else Path.cwd(),
            secrets=lambda: self.config.secrets.for_registrations(),
            registration=config.registration,
            drain_timeout=settings.call_timeout,
            vet_names=self.live_catalog.vet_names,
            reserved_namespaces=[entry.namespace for entry in config.local_tools],
            on_event=self.server_events.note,
        )
        for server in config.servers:
            live.enlist(Member(server, "file"))
        self.servers = ServerAdmin(
            live, self.live_catalog, self.shared.announce, self.redact, lambda: self.config.registration
        )
        """The live server set and its administration."""
        self.upstreams = live.upstreams
        self.servers.members_changed()
        self.groups = LiveGroups(group_set, self.catalog, self.visibility, self.shared.announce)
        """The live tool groups and their administration."""
        self.reloader = Reloader(
            config,
            self.servers,
            self.groups,
            self.live_catalog,
            self.visibility,
            self.authenticator,
            self.skills,
            self.redact,
            self._started,
        )
        self.budgets = Budgets(self.visibility.budget, clock, self.shared.budgets)
        self.passthrough = PassThrough(
            self.budgets,
            lambda: self.audit,
            self.sessions.live,
            self.visibility.sources,
            self.upstreams,
            clock,
            wall_clock,
        )
        self.workspaces.notices = self.passthrough.notice
        self.tasks = self.passthrough.tasks
        self.tasks.abandon = self.router.cancel_abandoned
        self.resources = Resources(self.visibility, self.catalog, self.router, self.skills, self.passthrough)
        """Resources, templates, prompts and completion as each session may see them."""
        self.calls = Calls(
            self.listing, self.catalog, self.visibility, self.pins.held, self.upstreams, settings, wall_clock
        )
        """Each session's tool calls, resolved and run through the pipeline."""
        self._group: TaskGroup | None = None
        self._stack = AsyncExitStack()
        self.metrics.watch(
            Readings(self.servers.statuses, tuple(State), self.sessions.live, self._pending, self.flags.per_source)
        )

    @property
    def config(self) -> GatewayConfig:
        """The configuration in force (`Reloader`)."""
        return self.reloader.config

    @property
    def policy(self) -> Policy:
        """The role rules in force, reloaded live."""
        return self.visibility.policy

    def wall_now(self) -> float:
        """Now, in epoch seconds, by the gateway's wall clock (what audit rows and approvals are stamped with)."""
        return self._wall_clock()

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
            reload, skill_dirs = self.reloader.reload_from_file, self.config.settings.skill_dirs
            self.background.start("config_watch", watch, self.config.path, skill_dirs, reload, stop)
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
        self.server_events.open(self.audit.database)
        # Left just before the audit trail closes: the states servers entered as they stopped are written too.
        self._stack.push_async_callback(self.server_events.flush)
        self.registrations, self.name_store = stores.registrations, stores.names
        self.skills.vectors = stores.vectors
        self.grants.open(stores.grants)
        self.pins.start(stores.pins)
        await self.live_catalog.load_names(self.name_store)
        self._stack.push_async_callback(self.shared.aclose)
        self.groups.load_stored(self.registrations)
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
        code = CodeMode(
            self.visibility.tools,
            lambda name: name in self.listing.meta,
            self.sandboxes,
            self.calls.call_tool,
            self.config.settings.max_result_chars,
        )
        meta = MetaTools(self.skills, self.calls.call_tool, code.run)
        meta_share = builder.share_step(self.config, self.shared, write_through=True)
        meta_pipeline = builder.meta_pipeline(stores, meta_share, self._wall_clock, self.metrics, meta.run)
        self.calls.start(self.pipeline, meta_pipeline, self.audit)
        for name, source in self.local_sources.items():
            self.catalog.update(SourceListing(source=name, namespace=name, tools=tuple(source.records)))
        self.live_catalog.flag_new_tools()
        self._group = self.router.group = await self._stack.enter_async_context(anyio.create_task_group())
        self.sessions.group = self.live_catalog.group = self._group
        self.background.attach(self._group)
        self._stack.push_async_callback(self.sandboxes.close)
        await self.sandboxes.start(self.background, owner=self._serving)
        await self.workspaces.start(self.background, owner=self._serving)
        if self._serving:
            # Spare workspaces are made once workspaces know whether they are size-limited.
            self.sandboxes.warm_sessions(self.workspaces)
        self._stack.push_async_callback(self.sessions.close_all)
        self._stack.callback(self._group.cancel_scope.cancel)
        self.servers.start(self._group, self.registrations)
        self.servers.members_changed()
        await self.live_catalog.keep_names()
        self._group.start_soon(self._settle, list(self.upstreams.values()))
        report = self.background.report
        self.background.start("idle_sessions", self.sessions.expire_idle)
        self.background.start(audit.SHIPPING, self.audit.maintain, report)
        self.background.start(SERVER_EVENTS, self.server_events.keep)
        self.background.start(state.WRITES, self.shared.write_behind, report)
        self.background.start(KEYS_LOOP, self.authenticator.maintain_keys, report)
        if self._serving:
            self.background.start(INDEX_LOOP, self.skills.keep_index)
        self.replicas = Replicas(
            self.servers,
            self.groups,
            self.live_catalog,
            self.pins,
            self.registrations,
            self.name_store,
            self.background,
            self._started,
        )
        if self._serving:
            self.background.start(state.CHANGES, self.shared.follow, self.replicas.registrations_changed, report)
            self.background.start(REGISTRATIONS, self.replicas.apply_registrations)
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

    async def required_failure(self) -> str | None:
        """Why the gateway cannot serve: a required server whose first attempt to connect failed
        or did not end within its timeout; None once every required server is ready."""
        required = [upstream for upstream in self.upstreams.values() if upstream.config.required]
        await self.wait_for_upstreams(required)
        timeout = self.config.settings.upstream_connect_timeout
        for status in self.servers.statuses():
            if status.required and status.enabled and status.state != State.READY:
                reason = status.error or f"not connected after {timeout + START_GRACE:g} s"
                return f"required server '{status.name}' did not connect: {reason}"
        return None

    def _pending(self) -> int | None:
        """How many approvals are pending, for the metrics; None while their store cannot be read."""
        try:
            return len(self.approvals.pending())
        except DatabaseError:
            return None


def _causes(error: BaseException) -> list[BaseException]:
    """The exceptions a task group's exception group gathered, however deeply nested."""
    if isinstance(error, BaseExceptionGroup):
        return [cause for inner in error.exceptions for cause in _causes(inner)]
    return [error]
