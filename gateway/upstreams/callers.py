"""The connections of servers reached with each caller's own OAuth grant: one per (server, caller),
shared by that caller's sessions, ended with the last of them, when the grant ends, or when the
server leaves the live set.

A shared server has one connection for everyone and a session-scoped one an instance per session
(`gateway.upstreams.workspaces`); a server that acts as each user cannot be either, since a
connection carries one user's tokens. Its shared connection (the live set's) only lists what it
offers, with the first connected caller's grant (`Grants.any_auth`); calls never use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from gateway.catalog.merged import SourceListing
from gateway.clients.session import SessionContext
from gateway.config.model import GatewaySettings, ServerConfig
from gateway.errors import GatewayError, UpstreamUnavailableError
from gateway.upstreams.addresses import Resolver, system_resolver
from gateway.upstreams.clientside import Notice, NoticeHandler
from gateway.upstreams.connection import State, Upstream
from gateway.upstreams.grants import Grants


async def _ignore(listing: SourceListing) -> None:
    """A caller's connection serves the catalog its server's shared connection published."""


@dataclass(eq=False)
class _Running:
    """A caller's connection, the scope that ends it, and the sessions using it."""

    upstream: Upstream
    scope: anyio.CancelScope
    sessions: dict[str, SessionContext] = field(default_factory=dict)


class CallerUpstreams:
    """Each caller's own connection to each server that takes their grant."""

    def __init__(
        self,
        settings: GatewaySettings,
        grants: Grants,
        log_dir: Path,
        *,
        notices: Callable[[SessionContext], NoticeHandler] | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._settings = settings
        self._grants = grants
        self._log_dir = log_dir
        self._notices = notices
        self._resolver = resolver
        self._running: dict[tuple[str, str], _Running] = {}

    async def upstream(self, session: SessionContext, server: ServerConfig, group: TaskGroup) -> Upstream:
        """`session`'s caller's connection to `server`, opened on first use; `ConnectionNeededError`
        when the caller holds no grant for it."""
        key = (server.name, session.caller)
        running = self._running.get(key)
        if running is None:
            if not await self._grants.connected(server.name, session.caller):
                raise self._grants.needed(server.name, session.caller)
            running = self._running.get(key) or self._start(server, session, group)
        if session.id not in running.sessions:
            running.sessions[session.id] = session

            async def release(session_id: str = session.id) -> None:
                running.sessions.pop(session_id, None)
                if not running.sessions and self._running.get(key) is running:
                    self._stop(key)

            session.on_close(release)
        upstream = running.upstream
        with anyio.move_on_after(self._settings.upstream_connect_timeout):
            await upstream.first_attempt.wait()
        # One that was ready and is reconnecting serves the call once back, as a shared one does.
        if upstream.status().state in (State.CONNECTING, State.FAILED):
            if (server.name, session.caller) in self._grants.lost:
                self._stop(key)
                raise self._grants.needed(server.name, session.caller)
            raise UpstreamUnavailableError(
                f"Server '{server.name}' did not connect for you: {upstream.status().error or 'not yet'}"
            )
        return upstream

    def _start(self, server: ServerConfig, session: SessionContext, group: TaskGroup) -> _Running:
        caller = session.caller
        sessions: dict[str, SessionContext] = {}

        async def auth() -> object:
            return self._grants.auth(server, caller)

        async def tell(name: str, notice: Notice) -> None:
            # What the server says outside a request is for its caller alone: each of their sessions.
            if self._notices is not None:
                for each in list(sessions.values()):
                    await self._notices(each)(name, notice)

        upstream = Upstream(
            server,
            self._settings,
            _ignore,
            log_dir=self._log_dir,
            notices=tell,
            resolver=self._resolver,
            auth=auth,
        )
        running = _Running(upstream, anyio.CancelScope(), sessions)
        self._running[(server.name, caller)] = running

        async def run() -> None:
            with running.scope:
                await upstream.run()

        group.start_soon(run)
        return running

    def _stop(self, key: tuple[str, str]) -> None:
        running = self._running.pop(key, None)
        if running is not None:
            running.scope.cancel()

    def answer(self, server: str, caller: str, error: GatewayError) -> GatewayError:
        """What a failed call on a caller's connection tells them: to connect again when the
        provider refused their grant meanwhile, else `error` itself."""
        if (server, caller) in self._grants.lost:
            self._stop((server, caller))
            return self._grants.needed(server, caller)
        return error

    async def until_connected(self, server: str, caller: str) -> None:
        """Return once `caller` has connected `server`."""
        await self._grants.until_connected(server, caller)

    async def disconnect(self, server: ServerConfig, caller: str) -> bool:
        """End `caller`'s grant for `server` (at its provider too, where it can) and their
        connection to it; whether they held one."""
        self._stop((server.name, caller))
        return await self._grants.revoke(server, caller)

    def withdraw(self, server: str) -> None:
        """End every caller's connection to `server` (it left the live set, or changed)."""
        for key in [key for key in self._running if key[0] == server]:
            self._stop(key)
