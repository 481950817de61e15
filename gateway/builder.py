"""The composition root: the gateway's parts wired from its configuration, clocks and transports.

Building opens nothing; the durable stores open in `open_stores`, which the gateway's lifespan calls.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from gateway.auth.policy import derive_risk
from gateway.catalog.merged import SourceListing
from gateway.clients.session import SessionContext
from gateway.config.loading import default_config_path
from gateway.config.model import GatewayConfig, ServerConfig
from gateway.errors import ConfigError
from gateway.pipeline.approvals import ApprovalStore
from gateway.pipeline.audit import AuditCalls, AuditEntry, AuditStore
from gateway.pipeline.budgets import Budgets, Charge
from gateway.pipeline.chain import CallNext, Pipeline, Step
from gateway.pipeline.confirmation import ConfirmationStore, ConfirmRiskyCalls
from gateway.pipeline.execution import ExecuteWithDeadline
from gateway.pipeline.loops import DetectLoops
from gateway.pipeline.ordering import SessionOrdering
from gateway.pipeline.shaping import ShapeResult
from gateway.pipeline.validation import ValidateArguments
from gateway.runtime.metrics import Metrics
from gateway.runtime.redaction import Redactor
from gateway.sandbox.sandboxes import Sandboxes, SandboxGuard
from gateway.serving.routing import Router
from gateway.shared.state import LocalState, SharedState, ShareSessionState, session_codecs
from gateway.skills.host import SkillAccess, SkillHost, SkillLifecycle
from gateway.stores import StoreSettings
from gateway.stores.grants import GrantStore
from gateway.stores.names import NameStore
from gateway.stores.pins import PinStore
from gateway.stores.registrations import RegistrationStore
from gateway.stores.vectors import VectorStore
from gateway.upstreams.addresses import Resolver
from gateway.upstreams.callers import CallerUpstreams
from gateway.upstreams.clientside import Notice, NoticeHandler
from gateway.upstreams.connection import StateHandler, Upstream
from gateway.upstreams.grants import Grants
from gateway.upstreams.listing import ListingSlots
from gateway.upstreams.localtools import LocalToolSource, local_sources
from gateway.upstreams.transports import LoggedTransportFactory, TransportFactory
from gateway.upstreams.workspaces import Workspaces

Clock = Callable[[], float]


ListingHandler = Callable[[SourceListing], Awaitable[None]]
UpstreamFactory = Callable[[ServerConfig, ListingHandler], Upstream]


@dataclass(frozen=True)
class Sources:
    """Where tools come from, the router that picks one for each call, and how a server's
    long-lived connection is made (`upstream`), for the servers of the live set."""

    sandboxes: Sandboxes
    workspaces: Workspaces
    local: dict[str, LocalToolSource]
    router: Router
    upstream: UpstreamFactory
    grants: Grants
    callers: CallerUpstreams


def sources(
    config: GatewayConfig,
    transports: Mapping[str, TransportFactory],
    clock: Clock,
    wall_clock: Clock,
    metrics: Metrics,
    resolver: Resolver,
    on_state: StateHandler | None = None,
) -> Sources:
    """The sandbox, the workspaces, the local tools, and the factory of one server's connection.

    A sandboxed server lists its tools in a container. The sandbox keeps the system clocks: its
    containers' deadlines are read by sweepers in other processes. `resolver` finds the addresses
    of API-registered servers' hosts; `on_state` is told of each state a server's connection enters.
    """
    settings = config.settings
    data_dir = Path(settings.data_dir)
    sandboxes = Sandboxes(config, metrics)
    workspaces = Workspaces(
        data_dir / "workspaces", settings, dict(transports), clock=wall_clock, servers=config.servers, resolver=resolver
    )
    given = dict(transports)
    listing_slots = ListingSlots()
    grants = Grants(wall_clock)

    def caller_notices(session: SessionContext) -> NoticeHandler:
        async def tell(server: str, notice: Notice) -> None:
            if workspaces.notices is not None:
                await workspaces.notices(server, notice, session)

        return tell

    callers = CallerUpstreams(settings, grants, data_dir / "logs", notices=caller_notices, resolver=resolver)

    def upstream(server: ServerConfig, on_listing: ListingHandler) -> Upstream:
        transport = given.get(server.name)
        logged: LoggedTransportFactory | None = None
        # A server sandboxed as a whole never runs on the host, not even to list its tools; a
        # session-scoped one lists them in an empty workspace of its own.
        if server.sandbox is not None and transport is None:
            workspace = workspaces.discovery_dir(server) if server.scope == "session" else None
            logged = functools.partial(sandboxes.transport, "discovery", server, workspace)
        return Upstream(
            workspaces.discovery(server) if server.scope == "session" else server,
            settings,
            on_listing,
            log_dir=data_dir / "logs",
            transport=transport,
            logged_transport=logged,
            clock=clock,
            wall_clock=wall_clock,
            notices=shared_notices,
            listing_slots=listing_slots,
            resolver=resolver,
            # A server that acts as each user lists its tools with a connected user's grant.
            auth=functools.partial(grants.any_auth, server) if server.oauth is not None else None,
            on_state=on_state,
        )

    async def shared_notices(server: str, notice: Notice) -> None:
        if workspaces.notices is not None:
            await workspaces.notices(server, notice, None)

    local = local_sources(config.local_tools)
    router = Router(local, sandboxes, workspaces, callers)
    return Sources(sandboxes, workspaces, local, router, upstream, grants, callers)


@dataclass(frozen=True)
class Stores:
    """The durable stores: the audit trail, confirmation tokens, parked approvals, API registrations,
    pinned tool definitions, the owners of exposed tool names, Find_Tools' embeddings, and the
    callers' grants for upstream servers."""

    audit: AuditStore
    confirmations: ConfirmationStore
    approvals: ApprovalStore
    registrations: RegistrationStore
    pins: PinStore
    names: NameStore
    vectors: VectorStore
    grants: GrantStore


def open_stores(
    settings: StoreSettings, data_dir: Path, redact: Redactor, wall_clock: Clock, stack: AsyncExitStack
) -> Stores:
    """Open the stores where `settings` put them (SQLite files under `data_dir`, or PostgreSQL),
    their migrations applied; `stack` closes them."""
    audit = AuditStore.open(settings, data_dir, redact)
    stack.callback(audit.close)
    confirmations = ConfirmationStore.open(settings, data_dir)
    stack.callback(confirmations.close)
    # Wall-clock time: confirmation tokens and parked calls outlive the process.
    approvals = ApprovalStore.open(settings, data_dir, wall_clock)
    stack.callback(approvals.close)
    registrations = RegistrationStore.open(settings, data_dir)
    stack.callback(registrations.close)
    pins = PinStore.open(settings, data_dir)
    stack.callback(pins.close)
    names = NameStore.open(settings, data_dir)
    stack.callback(names.close)
    vectors = VectorStore.open(settings, data_dir)
    stack.callback(vectors.close)
    grants = GrantStore.open(settings, data_dir)
    stack.callback(grants.close)
    return Stores(audit, confirmations, approvals, registrations, pins, names, vectors, grants)


def shared_state(config: GatewayConfig, clock: Clock, wall_clock: Clock) -> SharedState:
    """The state replicas share: in Redis when `store.redis` names one, else in this process.

    Redis windows run on the wall clock, which every replica reads alike; a running call's
    concurrency slot is given back at the latest when every attempt of it has timed out.
    """
    settings = config.settings
    if config.store.redis is None:
        return LocalState(clock)
    try:
        from gateway.shared.redisstate import RedisState
    except ImportError:
        raise ConfigError(
            str(config.path or "the configuration"),
            "store.redis",
            "names Redis, but its client is not installed: pip install 'mcp-gateway[replicas]'",
        ) from None
    lease = settings.call_timeout * (settings.retries + 1) + 60
    return RedisState(
        config.store.redis,
        clock=wall_clock,
        session_ttl=settings.session_idle_timeout,
        lease=lease,
        loop_window=settings.loop_window,
    )


def share_step(
    config: GatewayConfig,
    state: SharedState,
    charge_of: Callable[[SessionContext], Charge | None] | None = None,
    *,
    write_through: bool = False,
    holds_attempts: bool = False,
) -> ShareSessionState:
    """The step moving a stateless-era session's state through the seam, kept as long as an idle
    session; with `charge_of`, its round trip counts the call against its budget too, and with
    `holds_attempts` appends the call's attempt to the loop window."""
    settings = config.settings
    return ShareSessionState(
        state,
        session_codecs(settings),
        settings.session_idle_timeout,
        loop_window=settings.loop_window,
        charge_of=charge_of,
        write_through=write_through,
        holds_attempts=holds_attempts,
    )


def approve_command(config: GatewayConfig, environ: Mapping[str, str]) -> Callable[[str], str]:
    """The command that approves one parked call, as a person on this host can paste it: this
    gateway's own Python (which has the gateway installed, where a plain `python` may not), the data
    directory when the environment moved it, and the configuration file unless it is the embedded
    defaults."""
    prefix = ""
    if "GATEWAY_DATA_DIR" in environ:
        prefix = f"GATEWAY_DATA_DIR={shlex.quote(str(config.settings.data_dir))} "
    suffix = ""
    if config.path is not None and config.path != default_config_path():
        suffix = f" --config {shlex.quote(str(config.path))}"
    python = shlex.quote(sys.executable)
    return lambda approval: f"{prefix}{python} -m gateway approvals approve {approval}{suffix}"


def pipeline(
    config: GatewayConfig,
    stores: Stores,
    skills: SkillHost,
    budgets: Budgets,
    share: Step,
    sandboxes: Sandboxes,
    wall_clock: Clock,
    metrics: Metrics,
    terminal: CallNext,
) -> Pipeline:
    """The call pipeline, outermost step first, around `terminal`."""
    settings = config.settings
    confirm = ConfirmRiskyCalls(
        stores.confirmations,
        stores.approvals,
        derive_risk,
        config.confirmation.risk,
        config.confirmation.ttl_seconds,
        wall_clock,
        approve_command=approve_command(config, os.environ),
    )
    steps: list[Step] = [
        AuditCalls(stores.audit, wall_clock, observer(metrics)),
        share,
        ValidateArguments(),
        SkillAccess(skills),
        budgets,
        SandboxGuard(sandboxes.availability),
        confirm,
        SkillLifecycle(skills),
        DetectLoops(settings.loop_window, settings.loop_repeat_limit),
        SessionOrdering(),
        ShapeResult(settings.max_result_chars, settings.max_binary_bytes),
        ExecuteWithDeadline(settings.call_timeout, settings.retries),
    ]
    return Pipeline(steps, terminal)


def meta_pipeline(stores: Stores, share: Step, wall_clock: Clock, metrics: Metrics, terminal: CallNext) -> Pipeline:
    """The meta-tools' short pipeline: audit, the session's shared state (skills load and leave), validation."""
    return Pipeline([AuditCalls(stores.audit, wall_clock, observer(metrics)), share, ValidateArguments()], terminal)


def observer(metrics: Metrics) -> Callable[[AuditEntry, str], None]:
    """What the audit step tells the metrics of each call: the duration its audit row holds."""

    def observe(entry: AuditEntry, server: str) -> None:
        metrics.call(entry.tool, server, entry.outcome, entry.duration_ms / 1000)

    return observe


def has_extended(config: GatewayConfig, servers: Iterable[ServerConfig]) -> bool:
    """Whether any tool of `servers` or the local tools is extended, so that Find_Tools has something to find."""
    return any(
        server.layer == "extended" or any(tool.layer == "extended" for tool in server.tools.values())
        for server in servers
    ) or any(entry.layer == "extended" for entry in config.local_tools)
