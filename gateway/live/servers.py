"""The live set of upstream servers: those of the config file and those registered through the API.

Each enabled server's connection (`Upstream`) runs in a cancel scope of its own inside the
gateway's task group, so one server can be added, replaced, restarted or removed while the others
serve. Removing a server first takes its tools out of the catalog and the router (no new call
reaches it), then lets the calls already running finish, at most `drain_timeout` seconds, then
disconnects. Changing or restarting one loses no call: a change that needs no new connection
applies to the one it has; otherwise the new connection takes over the server's calls (make before
break) and the old one ends once its calls finished. API registrations are validated by the config
file's own parser and kept in the `RegistrationStore`; the config file wins a name both define.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup

from gateway.builder import ListingHandler, UpstreamFactory
from gateway.catalog.merged import SourceListing
from gateway.config.loading import parse_server
from gateway.config.model import ServerConfig
from gateway.config.registration import RegistrationPolicy
from gateway.config.variables import MASK, masked
from gateway.errors import ConfigError, ConflictError, NotFoundError
from gateway.sandbox.sandboxes import Sandboxes
from gateway.serving.routing import Router
from gateway.stores.registrations import RegistrationStore
from gateway.stores.serverevents import ADDED, CHANGED, REMOVED, RESTART
from gateway.upstreams.connection import State, Status, Upstream

log = logging.getLogger(__name__)

Source = Literal["file", "api"]
REGISTRATION = "registration"
"""How a `ConfigError` about an API registration names where the entry came from."""


@dataclass(frozen=True, slots=True)
class Member:
    """One server of the live set: its configuration, where it is defined, and (API) its entry as registered."""

    config: ServerConfig
    source: Source
    entry: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The server's name."""
        return self.config.name


CONNECTION_KEYS = ("transport", "command", "args", "env", "cwd", "url", "headers", "scope", "sandbox")
"""What a server's connection is made of: a change to any of these needs a new connection."""


def same_connection(old: ServerConfig, new: ServerConfig) -> bool:
    """Whether `new` differs from `old` only in settings the connection `old` has can take live."""
    return all(getattr(old, key) == getattr(new, key) for key in CONNECTION_KEYS)


@dataclass(slots=True)
class _Running:
    upstream: Upstream
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


class LiveServers:
    """Every configured server, enabled or not, and the running connection of each enabled one."""

    def __init__(
        self,
        make: UpstreamFactory,
        router: Router,
        sandboxes: Sandboxes,
        on_listing: ListingHandler,
        on_removed: Callable[[str], Awaitable[None]],
        *,
        file: str,
        base_dir: Path,
        secrets: Callable[[], Mapping[str, str]],
        registration: RegistrationPolicy,
        drain_timeout: float,
        vet_names: Callable[[ServerConfig], None],
        reserved_namespaces: Iterable[str] = (),
        on_event: Callable[[str, str], None] | None = None,
    ) -> None:
        self._make = make
        self._router = router
        self._sandboxes = sandboxes
        self._on_listing = on_listing
        self._on_removed = on_removed
        self._file = file
        self._base_dir = base_dir
        # Read at each parse: a reloaded `secrets` section applies to the next registration.
        self._secrets = secrets
        self._registration = registration
        self._drain_timeout = drain_timeout
        self._vet_names = vet_names
        self._reserved = frozenset(reserved_namespaces)
        # Told of each restart and change of a server (its name and the event), for its history.
        self._on_event = on_event or (lambda server, event: None)
        self.members: dict[str, Member] = {}
        self.upstreams: dict[str, Upstream] = {}
        """The connection of each enabled server, by name."""
        self._running: dict[str, _Running] = {}
        self._group: TaskGroup | None = None
        self._store: RegistrationStore | None = None
        self.lock = anyio.Lock()
        """Held by every change of the set, so that two changes never interleave."""

    # Building the set

    def enlist(self, member: Member, subscribed: Upstream | None = None) -> None:
        """Add a server that is not in the set; its connection starts now if the set has started,
        holding the resource subscriptions of `subscribed` (the connection it replaces)."""
        self.members[member.name] = member
        if not member.config.enabled:
            self._router.serve(member.config, None)
            return
        upstream = self._upstream(member.config)
        if subscribed is not None:
            upstream.take_subscriptions(subscribed)
        self.upstreams[member.name] = upstream
        self._router.serve(member.config, upstream)
        if self._group is not None:
            self._launch(upstream)

    def _upstream(self, config: ServerConfig) -> Upstream:
        upstream: Upstream | None = None

        async def listing(update: SourceListing) -> None:
            # A connection being replaced, or replacing one, may list too; only the live one speaks for the server.
            if upstream is not None and self.upstreams.get(config.name) is upstream:
                await self._on_listing(update)

        upstream = self._make(config, listing)
        return upstream

    def start(self, group: TaskGroup, store: RegistrationStore) -> None:
        """Start every enabled server's connection in `group`, after adding the API registrations of `store`."""
        self._group, self._store = group, store
        self.load_registered(store.entries("server"))
        for upstream in self.upstreams.values():
            if upstream.name not in self._running:
                self._launch(upstream)

    def load_registered(self, stored: Mapping[str, Mapping[str, Any]]) -> None:
        """Enlist each registration of `stored` (the store's entries) not in the set yet; one whose
        name or namespace the file takes, or that no longer validates, is skipped with a warning
        (the file wins)."""
        for name, entry in stored.items():
            current = self.members.get(name)
            if current is not None:
                if current.source == "file":
                    log.warning("registered server %r skipped: the config file defines a server of that name", name)
                continue
            try:
                member = self._parse({**entry, "name": name})
                self._check_namespace(member.config)
            except (ConfigError, ConflictError) as error:
                log.warning("registered server %r skipped: %s", name, error.message)
                continue
            self.enlist(member)

    def _launch(self, upstream: Upstream) -> _Running:
        assert self._group is not None
        running = _Running(upstream)
        self._running[upstream.name] = running

        async def run() -> None:
            try:
                with running.scope:
                    await upstream.run()
            finally:
                running.done.set()

        self._group.start_soon(run)
        return running

    # Changing the set

    async def put(self, member: Member) -> None:
        """Add `member`, or change the server of its name without losing a call: settings that need
        no new connection apply to the one it has; otherwise a new connection starts beside the old
        one and takes over once it has tried to connect, while the old one's calls finish."""
        await self._sandboxes.require(member.config)
        current = self.members.get(member.name)
        upstream = self.upstreams.get(member.name)
        self._on_event(member.name, ADDED if current is None else CHANGED)
        if current is None:
            self.enlist(member)
        elif upstream is None or not member.config.enabled:
            await self._stop(member.name, drain=True)
            self.enlist(member)
        elif self._group is None:
            self.members[member.name] = member
            await self._stop(member.name, drain=False)
            self.enlist(member)
        elif same_connection(current.config, member.config):
            self.members[member.name] = member
            self._router.serve(member.config, upstream)
            await upstream.reconfigure(member.config)
        else:
            await self._replace(member)

    async def _replace(self, member: Member) -> None:
        """Make before break: the new connection first tries to connect (bounded by its connect
        timeout) while the old one serves, then takes over the server's calls and listing."""
        fresh = self._upstream(member.config)
        old = self._running.pop(member.name, None)
        if old is not None:
            fresh.take_subscriptions(old.upstream)
        running = self._launch(fresh)
        await fresh.first_attempt.wait()
        self.members[member.name] = member
        self.upstreams[member.name] = fresh
        self._router.serve(member.config, fresh)
        if fresh.listing is not None:
            await self._on_listing(fresh.listing)
        self._running[member.name] = running
        if old is not None:
            self._retire(old)

    def _retire(self, old: _Running) -> None:
        """Let the calls running on a replaced or removed connection finish, at most `drain_timeout` s, then end it."""
        assert self._group is not None

        old.upstream.retire()

        async def retire() -> None:
            with anyio.move_on_after(self._drain_timeout):
                await old.upstream.drained()
            old.scope.cancel()
            await old.done.wait()

        self._group.start_soon(retire)

    async def discard(self, name: str) -> None:
        """Take the server `name` out of the set now; its running calls finish (at most
        `drain_timeout` s) and its connection ends in the background."""
        self._on_event(name, REMOVED)
        running = self._running.pop(name, None)
        self.upstreams.pop(name, None)
        self.members.pop(name, None)
        self._router.withdraw(name)
        await self._on_removed(name)
        if running is not None:
            self._retire(running)

    async def drop(self, name: str) -> None:
        """Take the server `name` out of the set: its running calls finish first."""
        self._on_event(name, REMOVED)
        await self._stop(name, drain=True)
        self.members.pop(name, None)

    async def _stop(self, name: str, *, drain: bool) -> None:
        running = self._running.pop(name, None)
        self.upstreams.pop(name, None)
        self._router.withdraw(name)
        await self._on_removed(name)
        if drain:
            with anyio.move_on_after(self._drain_timeout):
                await self._router.idle(name)
        if running is not None:
            running.scope.cancel()
            await running.done.wait()

    async def restart(self, name: str) -> Status:
        """Open a new connection (a new process) and send the server's calls to it from now on,
        waiting for it within their deadlines; the calls running on the old one finish there
        (at most `drain_timeout` s) before it ends. Its tools stay listed meanwhile."""
        member = self._member(name)
        if not member.config.enabled:
            raise ConflictError(f"Server '{name}' is disabled; enable it before restarting it")
        self._on_event(name, RESTART)
        old = self._running.pop(name, None)
        self.enlist(member, subscribed=old.upstream if old is not None else None)
        if old is not None:
            self._retire(old)
        return self.status(name)

    async def follow_file(self, servers: Iterable[ServerConfig]) -> None:
        """Make the config file's servers those of `servers` (an edited file): removed, added,
        changed ones replaced; a registered server whose name or namespace the file now takes gives way."""
        wanted = {server.name: server for server in servers}
        for name, member in list(self.members.items()):
            if member.source == "file" and name not in wanted:
                log.info("server %r left the config file: removing it", name)
                await self.drop(name)
        for server in wanted.values():
            current = self.members.get(server.name)
            if current is not None and current.source == "file" and current.config == server:
                continue
            for member in list(self.members.values()):
                taken = member.name == server.name or (server.prefix and member.config.prefix == server.prefix)
                if member.source == "api" and taken:
                    log.warning("registered server %r gives way to the file's server %r", member.name, server.name)
                    await self.drop(member.name)
            changed = current is not None and current.source == "file"
            log.info("server %r %s the config file", server.name, "changed in" if changed else "added to")
            await self.put(Member(server, "file"))
        if self._store is not None:
            # In a worker thread: PostgreSQL may take its connect timeout to answer.
            self.load_registered(await anyio.to_thread.run_sync(self._store.entries, "server"))

    async def follow_store(self) -> None:
        """Make the API's servers those the store holds now (another replica changed them): gone
        ones removed (their calls finish in the background, so that the changes announced after
        this one wait for none of them), changed ones replaced, new ones added."""
        assert self._store is not None
        # In a worker thread: PostgreSQL may take its connect timeout to answer.
        stored = await anyio.to_thread.run_sync(self._store.entries, "server")
        for name, member in list(self.members.items()):
            if member.source == "api" and name not in stored:
                log.info("registered server %r was removed on another replica", name)
                await self.discard(name)
        for name, entry in stored.items():
            current = self.members.get(name)
            if current is None or current.source == "file" or current.entry == entry:
                continue
            try:
                member = self._parse({**entry, "name": name})
            except ConfigError as error:
                log.warning("registered server %r skipped: %s", name, error.message)
                continue
            log.info("registered server %r was changed on another replica", name)
            await self.put(member)
        self.load_registered(stored)

    # The operations of the API

    async def register(self, entry: Mapping[str, Any]) -> Status:
        """Validate, persist and start a server given in the config file's form plus its "name"."""
        member = self._parse(entry)
        if member.name in self.members:
            raise ConflictError(f"A server named '{member.name}' already exists")
        self._check_namespace(member.config)
        self._vet_names(member.config)
        assert self._store is not None
        await anyio.to_thread.run_sync(self._store.save, "server", member.name, member.entry)
        await self.put(member)
        return self.status(member.name)

    async def change(self, name: str, changes: Mapping[str, Any]) -> Status:
        """Replace keys of a registered server's entry (`enabled` too), validated again, its connection replaced."""
        current = self._editable(name)
        member = self._parse({**current.entry, **changes, "name": name})
        self._check_namespace(member.config)
        self._vet_names(member.config)
        assert self._store is not None
        await anyio.to_thread.run_sync(self._store.save, "server", name, member.entry)
        await self.put(member)
        return self.status(name)

    async def unregister(self, name: str) -> None:
        """Remove a registered server: forgotten by the store first (a store that fails leaves it running),
        then its calls finish or time out, and it is disconnected."""
        self._editable(name)
        assert self._store is not None
        await anyio.to_thread.run_sync(self._store.remove, "server", name)
        await self.drop(name)

    def _member(self, name: str) -> Member:
        member = self.members.get(name)
        if member is None:
            raise NotFoundError(f"No server named '{name}'")
        return member

    def _editable(self, name: str) -> Member:
        member = self._member(name)
        if member.source == "file":
            raise ConflictError(f"Server '{name}' is defined in {self._file}; edit it there, it is reloaded live")
        return member

    def _parse(self, entry: Mapping[str, Any]) -> Member:
        if not isinstance(entry, Mapping):
            raise ConfigError(REGISTRATION, "servers", f"expected a map, got {type(entry).__name__}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(REGISTRATION, "servers", 'a server entry needs a "name", a non-empty string')
        body = {key: value for key, value in entry.items() if key != "name"}
        config = parse_server(name, body, source=REGISTRATION, base_dir=self._base_dir, secrets=self._secrets())
        return Member(replace(config, registration=self._registration), "api", body)

    def _check_namespace(self, config: ServerConfig) -> None:
        """Refuse (`ConflictError`, naming both) a namespace that is another server's name or
        namespace, or the local tools': the names under it are that one's."""
        prefix = config.prefix
        if not prefix:
            return  # whether its tools' names are others' is `vet_names`'s to judge
        if prefix in self._reserved:
            raise ConflictError(f"The namespace '{prefix}' of server '{config.name}' is the local tools' namespace")
        for member in self.members.values():
            if member.name != config.name and prefix in (member.name, member.config.prefix):
                kind = "namespace" if prefix == member.config.prefix else "name"
                raise ConflictError(
                    f"The namespace '{prefix}' of server '{config.name}' is taken: it is the {kind} of server"
                    f" '{member.name}'; give it another `namespace`"
                )

    # Reading the set

    def status(self, name: str) -> Status:
        """Where the server `name` stands (NotFoundError when there is none)."""
        member = self._member(name)
        upstream = self.upstreams.get(name)
        if upstream is None:
            config = member.config
            return Status(name, config.transport, State.DISABLED, None, 0, 0, config.required, member.source, False)
        return replace(upstream.status(), source=member.source)

    def statuses(self) -> list[Status]:
        """Every server, enabled or not: the config file's first, then the API's."""
        ordered = sorted(self.members.values(), key=lambda member: member.source != "file")
        return [self.status(member.name) for member in ordered]

    def credentials(self, name: str) -> dict[str, dict[str, str]]:
        """The server's `headers` and `env` as the API shows them: a registered server's values as
        registered, `${secret:NAME}` references kept and everything else masked; a file server's masked."""
        member = self._member(name)
        if member.source == "api":
            written = {key: member.entry.get(key, {}) for key in ("headers", "env")}
        else:
            written = {"headers": member.config.headers, "env": member.config.env}
        return {
            key: {field: masked(value) if member.source == "api" else MASK for field, value in values.items()}
            for key, values in written.items()
        }

    def order(self) -> list[str]:
        """Server names in catalog order: the config file's first, then the API's."""
        return [status.name for status in self.statuses()]
