"""Per-session workspaces and the per-session instances of `scope: session` servers.

Each client session gets its own directory under the data directory, keyed by caller and
session, and its own instance of every session-scoped server with `${WORKSPACE}` pointing at
that directory, so one session can neither read nor list another's files. The instances
stop when the session ends or idles out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from gateway.catalog import SourceListing
from gateway.config import GatewaySettings, ServerConfig
from gateway.errors import UpstreamUnavailableError
from gateway.session import SessionContext
from gateway.upstream import State, TransportFactory, Upstream
from gateway.variables import WORKSPACE_REFERENCE

DISCOVERY = ".discovery"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_workspace(server: ServerConfig, workspace: Path) -> ServerConfig:
    """`server` with every `${WORKSPACE}` replaced by `workspace`."""
    path = str(workspace)

    def fill(text: str) -> str:
        return text.replace(WORKSPACE_REFERENCE, path)

    def fill_map(values: Mapping[str, str]) -> dict[str, str]:
        return {key: fill(value) for key, value in values.items()}

    return replace(
        server,
        command=fill(server.command) if server.command else None,
        args=tuple(fill(arg) for arg in server.args),
        env=fill_map(server.env),
        cwd=fill(server.cwd) if server.cwd else None,
        url=fill(server.url) if server.url else None,
        headers=fill_map(server.headers),
    )


async def _ignore(listing: SourceListing) -> None:
    """Session instances serve the catalog the discovery instance published."""


class Workspaces:
    """Workspace directories and session-scoped server instances."""

    def __init__(self, root: Path, settings: GatewaySettings, transports: Mapping[str, TransportFactory]) -> None:
        self.root = root
        self._settings = settings
        self._transports = transports

    def path(self, session: SessionContext) -> Path:
        """The session's workspace directory, created on first use."""
        directory = self.root / _digest(session.caller) / _digest(session.id)
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def discovery(self, server: ServerConfig) -> ServerConfig:
        """The instance that lists a session-scoped server's tools, in an empty workspace of its own."""
        directory = self.root / DISCOVERY / server.name
        directory.mkdir(parents=True, exist_ok=True)
        return with_workspace(server, directory)

    async def upstream(
        self,
        session: SessionContext,
        server: ServerConfig,
        group: TaskGroup,
        transport: Callable[[Path], TransportFactory] | None = None,
    ) -> Upstream:
        """The session's own instance of `server`, started on first use and stopped with the session.

        `transport` makes the transport to the instance from the session's workspace (a sandbox
        container); without it the instance is the configured process.
        """
        key = f"gateway.upstream.{server.name}"
        upstream: Upstream | None = session.state.get(key)
        if upstream is None:
            workspace = self.path(session)
            upstream = Upstream(
                with_workspace(server, workspace),
                self._settings,
                _ignore,
                log_dir=self.root.parent / "logs",
                transport=transport(workspace) if transport is not None else self._transports.get(server.name),
            )
            session.state[key] = upstream
            scope = anyio.CancelScope()

            async def run(instance: Upstream = upstream) -> None:
                with scope:
                    await instance.run()

            async def stop() -> None:
                scope.cancel()

            group.start_soon(run)
            session.on_close(stop)
        with anyio.move_on_after(self._settings.upstream_connect_timeout):
            await upstream.first_attempt.wait()
        if upstream.status().state != State.READY:
            raise UpstreamUnavailableError(f"Server '{server.name}' did not start for this session")
        return upstream
