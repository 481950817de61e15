"""Which source answers a call, a resource read or a prompt: shared upstreams, a session's own
instance, a local function, or a fresh sandbox container."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from gateway.catalog.merged import Route
from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.clients.tasks import TASK_NOTE, TaskEntry, TaskOrder
from gateway.config.model import ServerConfig
from gateway.errors import ConnectionNeededError, GatewayError, UpstreamUnavailableError
from gateway.pipeline.chain import ToolCall, ToolSource
from gateway.sandbox.sandboxes import Sandboxes, WarmStart
from gateway.upstreams.callers import CallerUpstreams
from gateway.upstreams.connection import Upstream
from gateway.upstreams.grants import CONNECT_NOTE, ConnectByUrl
from gateway.upstreams.transports import TransportFactory
from gateway.upstreams.workspaces import Workspaces

log = logging.getLogger(__name__)

ABANDON_TIMEOUT = 10.0
"""How long a session's end waits for its server to cancel a task nobody can ask for any more."""


class Router:
    """Finds the source behind a route; session-scoped servers start per session in `group`.

    The servers it routes to follow the live server set (`serve`, `withdraw`), and it counts the
    calls running on each, so that a server being removed can let them finish (`idle`).
    """

    def __init__(
        self,
        local_sources: Mapping[str, ToolSource],
        sandboxes: Sandboxes,
        workspaces: Workspaces,
        callers: CallerUpstreams,
    ) -> None:
        self._servers: dict[str, ServerConfig] = {}
        self._upstreams: dict[str, Upstream] = {}
        self._local = dict(local_sources)
        self._sandboxes = sandboxes
        self._workspaces = workspaces
        self._callers = callers
        self._running: dict[str, int] = {}
        self._idle: dict[str, anyio.Event] = {}
        self.group: TaskGroup | None = None

    def serve(self, server: ServerConfig, upstream: Upstream | None) -> None:
        """Route `server`'s tools from now on (to `upstream`, its shared connection, when it has one)."""
        if self._servers.get(server.name) not in (None, server):
            self._callers.withdraw(server.name)  # each caller's connection reconnects as the entry now says
        self._servers[server.name] = server
        if upstream is None:
            self._upstreams.pop(server.name, None)
        else:
            self._upstreams[server.name] = upstream

    def withdraw(self, name: str) -> None:
        """Route nothing more to the server `name`; calls already running go on."""
        self._servers.pop(name, None)
        self._upstreams.pop(name, None)
        self._callers.withdraw(name)

    async def idle(self, name: str) -> None:
        """Return once no call routed to the source `name` is running."""
        if self._running.get(name):
            await self._idle.setdefault(name, anyio.Event()).wait()

    def _ended(self, name: str) -> None:
        """A call of source `name` that `execute` counted has ended."""
        self._running[name] -= 1
        if not self._running[name]:
            del self._running[name]
            event = self._idle.pop(name, None)
            if event is not None:
                event.set()

    def _session_scoped(self, name: str) -> ServerConfig | None:
        server = self._servers.get(name)
        if server is not None and (
            server.scope == "session" or (server.sandbox is not None and server.sandbox.mode == "per-session")
        ):
            return server
        return None

    async def cancel_abandoned(self, entry: TaskEntry) -> None:
        """Cancel on its server a task whose session ended, best effort: the connection all sessions
        share, if it still runs (a session-scoped server's instance ends with its session, tasks and all)."""
        upstream = None if self._session_scoped(entry.server) is not None else self._upstreams.get(entry.server)
        if upstream is None or entry.upstream_id is None:
            return
        request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=entry.upstream_id))
        # Shielded: a session often ends because its scope is being cancelled.
        with anyio.move_on_after(ABANDON_TIMEOUT, shield=True):
            try:
                await upstream.send_as_is(request)
            except GatewayError as error:
                log.info(
                    "task %s of %r not cancelled when its session ended: %s", entry.upstream_id, entry.server, error
                )

    async def execute(self, call: ToolCall) -> types.CallToolResult:
        """The pipeline's terminal: send the call to its source under its original name."""
        name = call.tool.source
        # Counted without a context manager: a generator's costs several times a try on every call.
        self._running[name] = self._running.get(name, 0) + 1
        try:
            server = self._servers.get(name)
            if server is not None and call.tool.sandbox == "per-call":
                return await self._sandboxed_call(call, server)
            if server is not None and server.oauth is not None:
                return await self._as_caller(call, server)
            source: ToolSource | None = self._upstreams.get(name) or self._local.get(name)
            if self._session_scoped(name) is not None:
                source = await self.upstream(call.session, Route(name, call.tool.original_name))
            if source is None:
                raise UpstreamUnavailableError(f"No source '{name}' serves {call.tool.name}")
            order = call.notes.get(TASK_NOTE)
            if isinstance(order, TaskOrder) and isinstance(source, Upstream):
                # A source that runs no tasks runs the call now; the front door makes its result a finished task.
                task = await source.create_task(call.tool, call.arguments, order.metadata)
                if task is not None:
                    return order.placed(task)
            elif isinstance(source, Upstream) and _task_only(call.tool):
                # A plain call of it passed the front door: its caller holds no tasks (2026 era, Use_Tool).
                return await source.call_as_task(call.tool, call.arguments)
            return await source.call_tool(call.tool, call.arguments, call.progress)
        finally:
            self._ended(name)

    async def _as_caller(self, call: ToolCall, server: ServerConfig) -> types.CallToolResult:
        """A call of a server that takes each caller's grant, on the caller's own connection."""
        assert self.group is not None
        try:
            upstream = await self._callers.upstream(call.session, server, self.group)
        except ConnectionNeededError as needed:
            # A client that can open a URL for its user offers the page; once they connect, the call runs.
            ask: ConnectByUrl | None = call.notes.get(CONNECT_NOTE)
            if ask is None or not await ask(needed.message, needed.url):
                raise
            await self._callers.until_connected(server.name, call.session.caller)
            upstream = await self._callers.upstream(call.session, server, self.group)
        try:
            return await upstream.call_tool(call.tool, call.arguments, call.progress)
        except GatewayError as error:
            raise self._callers.answer(server.name, call.session.caller, error) from None

    async def _sandboxed_call(self, call: ToolCall, server: ServerConfig) -> types.CallToolResult:
        """A per-call sandboxed tool's call: a session's first sandboxed use takes a container
        started ahead on a spare workspace, which becomes the session's."""
        sandboxes = self._sandboxes
        claimed: list[WarmStart] = []

        def spare() -> WarmStart | None:
            taken = sandboxes.claim(server, call.tool.original_name)
            claimed.extend([taken] if taken is not None else [])
            return taken

        workspace = await self._workspaces.open(call.session, spare)
        return await sandboxes.call(call, server, workspace, claimed[0] if claimed else None)

    async def upstream(self, session: SessionContext, route: Route) -> Upstream:
        """The upstream serving `route` for `session`: its own instance of a session-scoped server,
        its caller's connection to a server that takes their grant."""
        server = self._servers.get(route.source)
        if server is not None and server.oauth is not None:
            assert self.group is not None
            return await self._callers.upstream(session, server, self.group)
        scoped = self._session_scoped(route.source)
        if scoped is not None:
            assert self.group is not None
            transport = spare = None
            if scoped.sandbox is not None:
                sandboxes = self._sandboxes
                # A container started ahead serves the session when its workspace comes with it.
                claimed: list[WarmStart] = []

                def spare() -> WarmStart | None:
                    taken = sandboxes.claim(scoped)
                    claimed.extend([taken] if taken is not None else [])
                    return taken

                def transport(workspace: Path, server: ServerConfig = scoped) -> TransportFactory:
                    warm = claimed.pop() if claimed else None
                    return sandboxes.transport(session.id, server, workspace, warm=warm)

            return await self._workspaces.upstream(session, scoped, self.group, transport, spare)
        upstream = self._upstreams.get(route.source)
        if upstream is None:
            raise GatewayError(f"No server '{route.source}'")
        return upstream


def _task_only(tool: ToolRecord) -> bool:
    """Whether the tool's server runs it only as a task."""
    return tool.execution is not None and tool.execution.task_support == "required"
