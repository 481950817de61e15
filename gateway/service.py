"""The gateway service: upstreams, local tools, the catalog, sessions and the call pipeline.

`Gateway` is what every front door (MCP over HTTP or stdio, REST, CLI) talks to. It owns
every resource it starts; `async with Gateway(config)` starts them and closes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import Identity, caller_key
from gateway.auth.policy import derive_risk
from gateway.catalog import Catalog, Route, SourceListing
from gateway.config.model import GatewayConfig, ServerConfig
from gateway.errors import GatewayError, ProtocolError, UnknownToolError, UpstreamUnavailableError
from gateway.pipeline.approvals import APPROVALS_FILE, ApprovalStore
from gateway.pipeline.audit import AuditCalls, AuditEntry, AuditStore, arguments_digest
from gateway.pipeline.budgets import Budgets
from gateway.pipeline.chain import Pipeline, ProgressFn, Step, ToolCall, ToolSource
from gateway.pipeline.confirmation import ConfirmationStore, ConfirmRiskyCalls, strip_confirmation
from gateway.pipeline.execution import ExecuteWithDeadline
from gateway.pipeline.loops import DetectLoops
from gateway.pipeline.ordering import SessionOrdering
from gateway.pipeline.shaping import ShapeResult
from gateway.pipeline.validation import ValidateArguments
from gateway.redaction import Redactor
from gateway.sandbox.sandboxes import Sandboxes, SandboxGuard
from gateway.session import SessionContext, SessionRegistry, Transport
from gateway.skills.folder import Skill, load_skills
from gateway.skills.host import SKILL_SCHEME, SkillAccess, SkillHost, SkillLifecycle
from gateway.skills.metatools import SOURCE as META_SOURCE
from gateway.skills.metatools import MetaTools
from gateway.skills.metatools import records as meta_records
from gateway.tools import ToolRecord
from gateway.upstreams.connection import Status, TransportFactory, Upstream
from gateway.upstreams.localtools import local_sources
from gateway.upstreams.workspaces import Workspaces

log = logging.getLogger(__name__)

MAX_HANDLES_PER_CALLER = 32
ChangeListener = Callable[[], Awaitable[None]]
SessionListener = Callable[[SessionContext], Awaitable[None]]


class Gateway:
    """Everything behind the front doors."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        transports: Mapping[str, TransportFactory] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        local_identity: Identity | None = None,
        serving: bool = True,
    ) -> None:
        self.config = config
        # A gateway that only inspects (check, catalog) must not sweep the containers of one that serves.
        self._serving = serving
        settings = config.settings
        self._clock = clock
        self.redact = Redactor.from_config(config)
        self.data_dir = Path(settings.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        transports = dict(transports or {})
        self.sandboxes = Sandboxes(config)
        self.workspaces = Workspaces(
            self.data_dir / "workspaces", settings, transports, clock=wall_clock, servers=config.servers
        )
        for server in config.servers:
            # A server sandboxed as a whole never runs on the host, not even to list its tools; a
            # session-scoped one lists them in an empty workspace of its own.
            if server.sandbox is not None and server.name not in transports:
                workspace = self.workspaces.discovery_dir(server) if server.scope == "session" else None
                transports[server.name] = self.sandboxes.transport("discovery", server, workspace)
        self.upstreams = {
            server.name: Upstream(
                self.workspaces.discovery(server) if server.scope == "session" else server,
                settings,
                self._on_listing,
                log_dir=self.data_dir / "logs",
                transport=transports.get(server.name),
            )
            for server in config.servers
            if server.enabled
        }
        self._servers = {server.name: server for server in config.servers}
        self._session_scoped = {
            server.name: server
            for server in config.servers
            if server.scope == "session" or (server.sandbox is not None and server.sandbox.mode == "per-session")
        }
        self.local_sources = local_sources(config.local_tools)
        self.policy = config.policy
        self.authenticator = Authenticator(config.auth)
        self.local_identity = local_identity or Identity(settings.stdio_caller, settings.stdio_role, "stdio")
        skills = load_skills(settings.skill_dirs)
        self._meta_kinds = {"with_skills": bool(skills.skills), "with_search": _has_extended(config)}
        self._meta = {tool.name: tool for tool in meta_records(None, **self._meta_kinds)}
        order = [server.name for server in config.servers] + list(self.local_sources)
        self.catalog = Catalog(order, reserved=list(self._meta))
        self.skills = SkillHost(skills, self.catalog, settings, self.may_see, self.may_see_skill, self._session_changed)
        self.sessions = SessionRegistry(settings.session_idle_timeout)
        self.audit = AuditStore(self.data_dir / "audit.db", self.redact)
        self.confirmations = ConfirmationStore(self.data_dir / "confirmations.db")
        # Wall-clock time: confirmation tokens and parked calls outlive the process.
        self.approvals = ApprovalStore(self.data_dir / APPROVALS_FILE, wall_clock)
        self.budgets = Budgets(self.policy.budget, clock)
        self._confirm = ConfirmRiskyCalls(
            self.confirmations,
            self.approvals,
            derive_risk,
            config.confirmation.risk,
            config.confirmation.ttl_seconds,
            wall_clock,
        )
        self._sources: dict[str, ToolSource] = {**self.upstreams, **self.local_sources}
        self.pipeline = Pipeline(self._steps(), self._execute)
        meta = MetaTools(self.skills, self.call_tool)
        self._meta_pipeline = Pipeline([AuditCalls(self.audit, time.time), ValidateArguments()], meta.run)
        self._listeners: list[ChangeListener] = []
        self._session_listeners: list[SessionListener] = []
        self._group: TaskGroup | None = None
        self._stack = AsyncExitStack()

    def _steps(self) -> list[Step]:
        settings = self.config.settings
        return [
            AuditCalls(self.audit, time.time),
            ValidateArguments(),
            SkillAccess(self.skills),
            self.budgets,
            SandboxGuard(self.sandbox_availability),
            self._confirm,
            SkillLifecycle(self.skills),
            DetectLoops(settings.loop_window, settings.loop_repeat_limit),
            SessionOrdering(),
            ShapeResult(settings.max_result_chars, settings.max_binary_bytes),
            ExecuteWithDeadline(settings.call_timeout, settings.retries),
        ]

    def sandbox_availability(self) -> tuple[bool, str]:
        """Whether sandboxed tools can run now, and why not."""
        return self.sandboxes.availability()

    async def _execute(self, call: ToolCall) -> types.CallToolResult:
        server = self._servers.get(call.tool.source)
        if server is not None and call.tool.sandbox == "per-call":
            return await self.sandboxes.call(call, server, await self.workspaces.open(call.session))
        source: ToolSource | None = self._sources.get(call.tool.source)
        if call.tool.source in self._session_scoped:
            source = await self._upstream(call.session, Route(call.tool.source, call.tool.original_name))
        if source is None:
            raise UpstreamUnavailableError(f"No source '{call.tool.source}' serves {call.tool.name}")
        return await source.call_tool(call.tool, call.arguments, call.progress)

    async def __aenter__(self) -> Gateway:
        self._stack.callback(self.audit.close)
        self._stack.callback(self.confirmations.close)
        self._stack.callback(self.approvals.close)
        for name, source in self.local_sources.items():
            self.catalog.update(SourceListing(source=name, namespace=name, tools=tuple(source.records)))
        self._group = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.push_async_callback(self.sandboxes.close)
        await self.sandboxes.start(self._group, owner=self._serving)
        await self.workspaces.start(self._group, owner=self._serving)
        self._stack.push_async_callback(self._close_sessions)
        self._stack.callback(self._group.cancel_scope.cancel)
        for upstream in self.upstreams.values():
            self._group.start_soon(upstream.run)
        self._group.start_soon(self._expire_idle_sessions)
        self._group.start_soon(self.audit.maintain)
        await self.wait_for_upstreams()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def wait_for_upstreams(self) -> None:
        """Wait until every upstream has tried once to connect, at most the connect timeout."""
        with anyio.move_on_after(self.config.settings.upstream_connect_timeout + 1):
            for upstream in self.upstreams.values():
                await upstream.first_attempt.wait()

    def statuses(self) -> list[Status]:
        """Where each upstream stands; a last error (often a server's stderr) comes without secrets."""
        statuses = [upstream.status() for upstream in self.upstreams.values()]
        return [replace(status, error=self.redact(status.error)) if status.error else status for status in statuses]

    def on_change(self, listener: ChangeListener) -> None:
        """Call `listener` whenever the catalog changes (to tell connected clients)."""
        self._listeners.append(listener)

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

    async def _on_listing(self, listing: SourceListing) -> None:
        self.catalog.update(listing)
        self.skills.refresh()
        for clash in self.catalog.clashes:
            log.warning(clash.describe())
        for listener in list(self._listeners):
            try:
                await listener()
            except Exception:  # a client that went away must not stop the others being told
                log.debug("change listener failed", exc_info=True)

    # Sessions

    def open_session(
        self, session_id: str, identity: Identity, transport: Transport, handle: str | None = None
    ) -> SessionContext:
        """The context of a client session, created on first use and bound to its caller and role.

        The context's caller is the unambiguous key of `identity` (an anonymous session's own);
        `handle` names a stateless-era caller's state, which a cap per caller keeps bounded.
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
        return context

    def _make_room_for_handle(self, caller: str) -> None:
        # Handles are chosen by the client; a cap per caller keeps one caller from growing state without end.
        mine = sorted(
            (s for s in self.sessions.live() if s.handle is not None and s.caller == caller),
            key=lambda s: s.last_seen,
        )
        for context in mine[: max(0, len(mine) - MAX_HANDLES_PER_CALLER + 1)]:
            self.sessions.release(context.id)
            if self._group is not None:
                self._group.start_soon(context.close)

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

    def may_see(self, session: SessionContext, tool: ToolRecord) -> bool:
        """Whether the session's caller may know that `tool` exists (meta-tools: always)."""
        return tool.source == META_SOURCE or self.policy.may_see(session.role, tool)

    def may_see_skill(self, session: SessionContext, skill: Skill) -> bool:
        """Whether the session's caller may see `skill`."""
        return self.policy.may_see_skill(session.role, skill.name, skill.roles)

    def visible_tools(self, session: SessionContext) -> list[ToolRecord]:
        """Every tool this session may see, listed or not, in catalog order."""
        return [tool for tool in self.catalog.tools if self.may_see(session, tool)]

    def listed_tools(self, session: SessionContext) -> list[ToolRecord]:
        """What tools/list shows this session: meta-tools, core tools, and in list_changed mode
        the tools of its active skills."""
        extra: set[str] = set()
        if self.config.settings.disclosure == "list_changed" and session.transport != "stateless":
            extra = self.skills.active_tools(session)
        listed = [tool for tool in self.visible_tools(session) if tool.layer == "core" or tool.name in extra]
        return self.meta_tools(session) + listed

    def meta_tools(self, session: SessionContext) -> list[ToolRecord]:
        """The meta-tools as this session's role sees them (skill names limited to its skills)."""
        names = [skill.name for skill in self.skills.visible_skills(session)]
        return meta_records(names, **self._meta_kinds)

    def input_schema(self, name: str, role: str | None) -> Mapping[str, Any] | None:
        """A tool's input schema by exposed name, for the SDK's check of 2026-era `Mcp-Param-*`
        headers (without it the SDK runs a whole tools/list before every call). None for a tool
        `role` may not see: its headers go unchecked, so it is answered like a tool that does not exist."""
        tool = self._meta.get(name) or self.catalog.tool(name)
        if tool is None or not self.policy.may_see(role, tool):
            return None
        return tool.input_schema

    def resolve(self, session: SessionContext, name: str) -> ToolRecord:
        """The tool `name` as this session may see it; unknown and invisible tools are alike."""
        tool = self._meta.get(name) or self.catalog.tool(name)
        if tool is None or not self.may_see(session, tool):
            raise UnknownToolError(name)
        return tool

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
            tool = self.resolve(session, name)
        except UnknownToolError:
            await self.audit.record(
                AuditEntry(
                    epoch=time.time(),
                    session=session.id,
                    caller=session.caller,
                    tool=name,
                    args_digest=arguments_digest(plain),
                    outcome="unknown_tool",
                    duration_ms=0.0,
                )
            )
            raise
        call = ToolCall(session=session, tool=tool, arguments=plain, progress=progress, notes=dict(notes or {}))
        if tool.name in self._meta:
            return await self._meta_pipeline.run(call)
        return await self.pipeline.run(call)

    def visible_sources(self, session: SessionContext) -> set[str]:
        """Sources whose resources and prompts the session may see: with roles, those of which
        it may see at least one tool; without roles, every source."""
        if self.policy.roles is None:
            return set(self.catalog.sources())
        return {tool.source for tool in self.visible_tools(session)}

    def listed_resources(self, session: SessionContext) -> list[types.Resource]:
        """Resources this session may see: its skills' files, then the servers' resources."""
        sources = self.visible_sources(session)
        return self.skills.resources(session) + [
            resource for resource in self.catalog.resources if self.catalog.source_of(resource.uri) in sources
        ]

    def listed_templates(self, session: SessionContext) -> list[types.ResourceTemplate]:
        """Resource templates of the sources this session may see."""
        sources = self.visible_sources(session)
        return [item for item in self.catalog.templates if self.catalog.source_of(item.uri_template) in sources]

    def listed_prompts(self, session: SessionContext) -> list[types.Prompt]:
        """Prompts of the sources this session may see."""
        sources = self.visible_sources(session)
        return [prompt for prompt in self.catalog.prompts if self.catalog.prompt_route(prompt.name).source in sources]

    def _visible_route(self, session: SessionContext, route: Route, what: str) -> Route:
        if route.source not in self.visible_sources(session):
            raise ProtocolError(f"Unknown {what}")
        return route

    async def read_resource(self, session: SessionContext, uri: str) -> types.ReadResourceResult:
        """Read an exposed resource: a skill file, or a resource of the server behind it."""
        if uri.startswith(SKILL_SCHEME):
            return self.skills.read_resource(session, uri)
        route = self._visible_route(session, self.catalog.resource_route(uri), f"resource: {uri}")
        result = await (await self._upstream(session, route)).read_resource(route.original)
        contents = [content.model_copy(update={"uri": uri}) for content in result.contents]
        return result.model_copy(update={"contents": contents})

    async def get_prompt(
        self, session: SessionContext, name: str, arguments: dict[str, str] | None
    ) -> types.GetPromptResult:
        """Get an exposed prompt from the server behind it."""
        route = self._visible_route(session, self.catalog.prompt_route(name), f"prompt: {name}")
        return await (await self._upstream(session, route)).get_prompt(route.original, arguments)

    async def complete(self, session: SessionContext, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Forward argument completion for an exposed prompt or resource template."""
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            route = self._visible_route(session, self.catalog.prompt_route(ref.name), f"prompt: {ref.name}")
            ref = ref.model_copy(update={"name": route.original})
        else:
            route = self._visible_route(session, self.catalog.resource_route(ref.uri), f"resource: {ref.uri}")
            ref = ref.model_copy(update={"uri": route.original})
        return await (await self._upstream(session, route)).complete(params.model_copy(update={"ref": ref}))

    async def _upstream(self, session: SessionContext, route: Route) -> Upstream:
        scoped = self._session_scoped.get(route.source)
        if scoped is not None:
            assert self._group is not None
            transport = None
            if scoped.sandbox is not None:
                sandboxes = self.sandboxes

                def transport(workspace: Path, server: ServerConfig = scoped) -> TransportFactory:
                    return sandboxes.transport(session.id, server, workspace)

            return await self.workspaces.upstream(session, scoped, self._group, transport)
        upstream = self.upstreams.get(route.source)
        if upstream is None:
            raise GatewayError(f"No server '{route.source}'")
        return upstream


def _has_extended(config: GatewayConfig) -> bool:
    return any(
        server.layer == "extended" or any(tool.layer == "extended" for tool in server.tools.values())
        for server in config.servers
    ) or any(entry.layer == "extended" for entry in config.local_tools)
