"""Which source answers a call, a resource read or a prompt: shared upstreams, a session's own
instance, a local function, or a fresh sandbox container."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import mcp_types as types
from anyio.abc import TaskGroup

from gateway.catalog import Route
from gateway.config.model import GatewayConfig, ServerConfig
from gateway.errors import GatewayError, UpstreamUnavailableError
from gateway.pipeline.chain import ToolCall, ToolSource
from gateway.sandbox.sandboxes import Sandboxes
from gateway.session import SessionContext
from gateway.upstreams.connection import TransportFactory, Upstream
from gateway.upstreams.workspaces import Workspaces


class Router:
    """Finds the source behind a route; session-scoped servers start per session in `group`."""

    def __init__(
        self,
        config: GatewayConfig,
        upstreams: Mapping[str, Upstream],
        local_sources: Mapping[str, ToolSource],
        sandboxes: Sandboxes,
        workspaces: Workspaces,
    ) -> None:
        self._servers = {server.name: server for server in config.servers}
        self._session_scoped = {
            server.name: server
            for server in config.servers
            if server.scope == "session" or (server.sandbox is not None and server.sandbox.mode == "per-session")
        }
        self._upstreams = upstreams
        self._sources: dict[str, ToolSource] = {**upstreams, **local_sources}
        self._sandboxes = sandboxes
        self._workspaces = workspaces
        self.group: TaskGroup | None = None

    async def execute(self, call: ToolCall) -> types.CallToolResult:
        """The pipeline's terminal: send the call to its source under its original name."""
        server = self._servers.get(call.tool.source)
        if server is not None and call.tool.sandbox == "per-call":
            return await self._sandboxes.call(call, server, await self._workspaces.open(call.session))
        source: ToolSource | None = self._sources.get(call.tool.source)
        if call.tool.source in self._session_scoped:
            source = await self.upstream(call.session, Route(call.tool.source, call.tool.original_name))
        if source is None:
            raise UpstreamUnavailableError(f"No source '{call.tool.source}' serves {call.tool.name}")
        return await source.call_tool(call.tool, call.arguments, call.progress)

    async def upstream(self, session: SessionContext, route: Route) -> Upstream:
        """The upstream serving `route` for `session`: its own instance of a session-scoped server."""
        scoped = self._session_scoped.get(route.source)
        if scoped is not None:
            assert self.group is not None
            transport = None
            if scoped.sandbox is not None:
                sandboxes = self._sandboxes

                def transport(workspace: Path, server: ServerConfig = scoped) -> TransportFactory:
                    return sandboxes.transport(session.id, server, workspace)

            return await self._workspaces.upstream(session, scoped, self.group, transport)
        upstream = self._upstreams.get(route.source)
        if upstream is None:
            raise GatewayError(f"No server '{route.source}'")
        return upstream
