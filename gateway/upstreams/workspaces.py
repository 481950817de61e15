"""Per-session workspaces and the per-session instances of `scope: session` servers.

Each client session gets its own directory under the data directory, keyed by caller and
session, and its own instance of every session-scoped server with `${WORKSPACE}` pointing at
that directory, so one session can neither read nor list another's files. The instances
stop when the session ends or idles out.

A workspace belongs to the sandbox's unprivileged user (mode 0700, never world-writable), is
size-limited where the gateway can mount a file system per workspace (see `volumes`), and is
removed `workspace_retention` seconds after its session ended, or sooner when the workspaces of its
caller, or of everyone, take more than their cap on disk (see `retention`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from gateway.catalog.merged import SourceListing
from gateway.clients.session import SessionContext
from gateway.config.model import GatewaySettings, ServerConfig
from gateway.config.variables import WORKSPACE_REFERENCE
from gateway.errors import UpstreamUnavailableError
from gateway.runtime import owners
from gateway.runtime.background import Background
from gateway.upstreams import volumes
from gateway.upstreams.addresses import Resolver, system_resolver
from gateway.upstreams.clientside import Notice, NoticeHandler, SessionNotices
from gateway.upstreams.connection import State, Upstream
from gateway.upstreams.retention import Quota, Workspace, WorkspaceQuotaError, plan
from gateway.upstreams.transports import TransportFactory

log = logging.getLogger(__name__)

DISCOVERY = ".discovery"
# Workspaces made ahead of their session, each mounted by a container started on it (`Spare`).
SPARES = ".spare"
PROBE = ".probe"
IMAGE = ".img"
ENDED = ".ended"
# The gateway process using a workspace (`gateway.runtime.owners`): another gateway starting on the same
# data directory leaves a live one's workspaces mounted and in use.
OWNER = ".owner"
# The sandbox's user when the gateway is root: nobody, who owns nothing else on the host.
SANDBOX_OWNER = (65534, 65534)
SWEEP_INTERVAL_MAX = 3600.0
PRIVILEGED = (
    "runs on the host as root and serves a workspace that sandboxed code can write; "
    "give it `sandbox: {mode: per-session, ...}` or run the gateway as an unprivileged user"
)


def workspace_owner() -> tuple[int, int]:
    """Who owns workspaces and runs inside sandboxes: nobody under a root gateway, else the
    gateway's own user (which cannot give files away, and needs no other user's access)."""
    return SANDBOX_OWNER if os.geteuid() == 0 else (os.getuid(), os.getgid())


WORKSPACE_KEY = "gateway.workspace"


def workspace_of(session: SessionContext) -> Path | None:
    """The session's workspace directory, if it has one yet."""
    directory = session.state.get(WORKSPACE_KEY)
    return directory if isinstance(directory, Path) else None


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


class Spare(Protocol):
    """A workspace made ahead of its session, with a container already started on it."""

    @property
    def workspace(self) -> Path:
        """The spare workspace's directory (under `.spare`) until a session adopts it."""

    async def discard(self) -> None:
        """Not adopted: remove the container and the spare workspace."""


async def _ignore(listing: SourceListing) -> None:
    """Session instances serve the catalog the discovery instance published."""


class Workspaces:
    """Workspace directories, their limits and lifetimes, and session-scoped server instances."""

    def __init__(
        self,
        root: Path,
        settings: GatewaySettings,
        transports: Mapping[str, TransportFactory],
        *,
        clock: Callable[[], float] = time.time,
        servers: Iterable[ServerConfig] = (),
        resolver: Resolver = system_resolver,
    ) -> None:
        self.root = root
        self.owner = workspace_owner()
        self.size = settings.workspace_size
        self.retention = settings.workspace_retention
        self.quota = Quota(settings.max_workspace_bytes_per_caller, settings.max_workspace_bytes)
        # Workspaces are made, ended and removed in worker threads; deciding what fits under the
        # caps and acting on it is one step, or two new sessions could both take the last room.
        self._disk = threading.Lock()
        self.unlimited: str | None = "not checked yet"
        """Why workspaces are not size-limited, or None when they are."""
        self.privileged = [
            server.name
            for server in servers
            if os.geteuid() == 0 and server.scope == "session" and server.sandbox is None and server.command
        ]
        """Session-scoped servers that run on the host with a root gateway's privileges."""
        self._settings = settings
        self._transports = transports
        self._resolver = resolver
        self._clock = clock
        self.notices: SessionNotices | None = None
        """Where the log messages and resource updates of upstreams go outside a request; a session
        instance's go to its session alone."""

    async def start(self, background: Background, *, owner: bool = True) -> None:
        """Find out whether workspaces can be size-limited; as the owner of the data directory
        also tidy what an earlier run left, and remove expired workspaces now and periodically."""
        _private_dir(self.root)
        self.unlimited = await anyio.to_thread.run_sync(volumes.probe, self.root / f"{PROBE}-{os.getpid()}")
        if self.unlimited is None:
            log.info("workspaces are size-limited to %d bytes each", self.size)
        else:
            log.warning("workspaces are NOT size-limited: %s", self.unlimited)
        for name in self.privileged:
            log.warning("server %s: %s", name, PRIVILEGED)
        if owner:
            await anyio.to_thread.run_sync(self._recover)
            background.start("workspace_sweep", self._sweep_periodically)

    async def open(self, session: SessionContext, spare: Callable[[], Spare | None] | None = None) -> Path:
        """The session's workspace directory, made (and mounted) on first use, released with the session.

        On first use `spare` may offer a workspace made ahead, with a container started on it: the
        session adopts it (under the same caps as a new one) unless it comes back to a workspace of its own.
        """
        key = WORKSPACE_KEY
        # Concurrent first calls of one session must mount its file system once.
        async with session.state.setdefault(f"{key}.lock", anyio.Lock()):
            directory: Path | None = session.state.get(key)
            if directory is None:
                directory = self.root / _digest(session.caller) / _digest(session.id)
                taken = spare() if spare is not None else None
                if taken is None:
                    await anyio.to_thread.run_sync(self._prepare, directory)
                else:
                    await self._adopt_or_prepare(taken, directory)
                session.state[key] = directory

                async def end(path: Path = directory) -> None:
                    # Sessions are also closed while the gateway shuts down: the mount must not outlive it.
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(self._end, path)

                session.on_close(end)
        return directory

    async def _adopt_or_prepare(self, taken: Spare, directory: Path) -> None:
        try:
            adopted = await anyio.to_thread.run_sync(self._adopt, taken.workspace, directory)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await taken.discard()
            raise
        if not adopted:
            await taken.discard()
            await anyio.to_thread.run_sync(self._prepare, directory)

    def spare(self) -> Path:
        """A fresh workspace that is no session's yet, made as a session's would be (blocking)."""
        directory = self.root / SPARES / uuid.uuid4().hex
        with self._disk:
            _private_dir(self.root)
            _private_dir(directory.parent)
            directory.with_suffix(OWNER).write_text(owners.own_token())
            _private_dir(directory, self.owner)
            if self.unlimited is None:
                image = directory.with_suffix(IMAGE)
                volumes.create(image, self.size, self.owner)
                volumes.mount(image, directory)
        return directory

    def discard(self, spare: Path) -> None:
        """Remove a spare workspace no session adopted (blocking)."""
        with self._disk:
            remove(spare)

    def _adopt(self, spare: Path, directory: Path) -> bool:
        """Make `spare` the workspace at `directory`, under the caps a new one meets; False when
        `directory` exists already (its session came back to it)."""
        with self._disk:
            if directory.exists():
                return False
            self._make_room(directory.parent, self.size)
            _private_dir(self.root)
            _private_dir(directory.parent)
            directory.with_suffix(ENDED).unlink(missing_ok=True)
            directory.with_suffix(OWNER).write_text(owners.own_token())
            if os.path.ismount(spare):
                # A mount point cannot be renamed; its file system moves, and its image with it.
                _private_dir(directory, self.owner)
                volumes.move(spare, directory)
                spare.with_suffix(IMAGE).rename(directory.with_suffix(IMAGE))
                spare.rmdir()
            else:
                spare.rename(directory)
            spare.with_suffix(OWNER).unlink(missing_ok=True)
        return True

    def _notices_of(self, session: SessionContext) -> NoticeHandler:
        async def tell(server: str, notice: Notice) -> None:
            if self.notices is not None:
                await self.notices(server, notice, session)

        return tell

    def discovery(self, server: ServerConfig) -> ServerConfig:
        """The instance that lists a session-scoped server's tools, in an empty workspace of its own."""
        return with_workspace(server, self.discovery_dir(server))

    def discovery_dir(self, server: ServerConfig) -> Path:
        """The empty workspace of the instance that lists a session-scoped server's tools."""
        _private_dir(self.root)
        _private_dir(self.root / DISCOVERY)
        directory = self.root / DISCOVERY / server.name
        _private_dir(directory, self.owner)
        return directory

    def entries(self) -> list[Workspace]:
        """Every session workspace on disk, oldest first."""
        found = []
        for caller in sorted(_children(self.root)):
            if caller.name.startswith("."):
                continue
            for directory in sorted(path for path in _children(caller) if path.is_dir()):
                found.append(Workspace(directory, _ended_at(directory), _used(directory)))
        return sorted(found, key=lambda workspace: workspace.ended_at or 0.0)

    def sweep(self, now: float | None = None) -> list[Path]:
        """Remove the workspaces whose session ended `retention` seconds ago or longer."""
        now = self._clock() if now is None else now
        with self._disk:
            expired = [
                workspace.path
                for workspace in self.entries()
                if workspace.ended_at is not None and now - workspace.ended_at >= self.retention
            ]
            for directory in expired:
                remove(directory)
                log.info("removed workspace %s, whose session ended over %.0f s ago", directory, self.retention)
        return expired

    def _make_room(self, caller: Path, room: int, reopened: Path | None = None) -> None:
        """Remove ended workspaces, oldest first, until `caller`'s (the directory of its workspaces)
        and everyone's leave `room` bytes under their caps; raise `WorkspaceQuotaError` when that
        cannot be done. Runs holding `_disk`."""
        # A session that comes back to its ended workspace uses it again: it is not one to remove.
        held = [replace(entry, ended_at=None) if entry.path == reopened else entry for entry in self.entries()]
        decided = plan(held, caller, self.quota, room)
        if decided.refusal:
            raise WorkspaceQuotaError(decided.refusal)
        for path in decided.remove:
            try:
                remove(path)
            except (OSError, volumes.VolumeError) as error:  # the next session's start or end tries again
                log.warning("removing ended workspace %s failed: %s", path, error)
                continue
            log.info("removed ended workspace %s early: workspaces were over their cap on disk", path)

    def _prepare(self, directory: Path) -> None:
        with self._disk:
            self._make_room(directory.parent, self.size, reopened=directory)
            _private_dir(self.root)
            _private_dir(directory.parent)
            image = directory.with_suffix(IMAGE)
            directory.with_suffix(ENDED).unlink(missing_ok=True)
            directory.with_suffix(OWNER).write_text(owners.own_token())
            _private_dir(directory, self.owner)
            if self.unlimited is not None or os.path.ismount(directory):
                return
            if not image.exists():
                volumes.create(image, self.size, self.owner)
            volumes.mount(image, directory)

    def _end(self, directory: Path) -> None:
        if os.path.ismount(directory):
            volumes.unmount(directory)
        with self._disk:
            directory.with_suffix(ENDED).write_text(repr(self._clock()))
            self._make_room(directory.parent, 0)

    def _recover(self) -> None:
        """At start-up: no session of a gateway that is gone lives on, so its mounts go and its
        workspaces count as ended now. Those of a gateway still running here are left alone."""
        for spare in _children(self.root / SPARES):
            if spare.is_dir() and not _in_use(spare):
                remove(spare)
        in_use = {workspace.path.resolve() for workspace in self.entries() if _in_use(workspace.path)}
        for point in volumes.mounted_under(self.root):
            # Not the probe of a gateway that only inspects (check), which may run meanwhile.
            hidden = any(part.startswith(".") for part in point.relative_to(self.root.resolve()).parts)
            if not hidden and point not in in_use:
                volumes.unmount(point)
        for workspace in self.entries():
            if workspace.path.resolve() in in_use:
                continue
            # Workspaces of gateways before ownership were made world-writable.
            os.chmod(workspace.path, 0o700)
            if workspace.ended_at is None:
                workspace.path.with_suffix(ENDED).write_text(repr(self._clock()))
        self.sweep()

    async def _sweep_periodically(self) -> None:
        interval = max(1.0, min(SWEEP_INTERVAL_MAX, self.retention / 4))
        while True:
            await anyio.sleep(interval)
            try:
                await anyio.to_thread.run_sync(self.sweep)
            except (OSError, volumes.VolumeError) as error:  # the next sweep tries again
                log.warning("workspace sweep failed: %s", error)

    async def upstream(
        self,
        session: SessionContext,
        server: ServerConfig,
        group: TaskGroup,
        transport: Callable[[Path], TransportFactory] | None = None,
        spare: Callable[[], Spare | None] | None = None,
    ) -> Upstream:
        """The session's own instance of `server`, started on first use and stopped with the session.

        `transport` makes the transport to the instance from the session's workspace (a sandbox
        container); without it the instance is the configured process. `spare` offers a workspace
        made ahead, as `open` takes it.
        """
        key = f"gateway.upstream.{server.name}"
        upstream: Upstream | None = session.state.get(key)
        if upstream is None:
            workspace = await self.open(session, spare)
            upstream = Upstream(
                with_workspace(server, workspace),
                self._settings,
                _ignore,
                log_dir=self.root.parent / "logs",
                transport=transport(workspace) if transport is not None else self._transports.get(server.name),
                notices=self._notices_of(session),
                workspace=workspace,
                resolver=self._resolver,
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


def remove(directory: Path) -> None:
    """Delete a workspace: its file system (unmounted first), image and markers."""
    if os.path.ismount(directory):
        volumes.unmount(directory)
    shutil.rmtree(directory, onerror=_make_removable)
    directory.with_suffix(IMAGE).unlink(missing_ok=True)
    directory.with_suffix(ENDED).unlink(missing_ok=True)
    directory.with_suffix(OWNER).unlink(missing_ok=True)


def _make_removable(function: Callable[..., Any], path: str, info: object) -> None:
    # Sandboxed code may have left a directory without write or search permission for its owner.
    os.chmod(os.path.dirname(path), 0o700)
    function(path)


def _private_dir(directory: Path, owner: tuple[int, int] | None = None) -> None:
    directory.mkdir(mode=0o700, exist_ok=True)
    if owner is not None and os.geteuid() == 0:
        os.chown(directory, *owner)
    os.chmod(directory, 0o700)


def _children(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except FileNotFoundError:
        return []


def _in_use(directory: Path) -> bool:
    """Whether another live gateway holds `directory`'s session open (not ended, its owner running)."""
    if directory.with_suffix(ENDED).exists():
        return False
    try:
        return owners.is_another_live_gateway(directory.with_suffix(OWNER).read_text())
    except (FileNotFoundError, ValueError):
        return False


def _ended_at(directory: Path) -> float | None:
    try:
        return float(directory.with_suffix(ENDED).read_text())
    except (FileNotFoundError, ValueError):
        return None


def _used(directory: Path) -> int:
    if os.path.ismount(directory):
        # What its file system holds now: the image file grows only as the kernel writes back.
        held = os.statvfs(directory)
        return (held.f_blocks - held.f_bfree) * held.f_frsize
    image = directory.with_suffix(IMAGE)
    if image.exists():
        return image.stat().st_blocks * 512
    total = 0
    for parent, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_blocks * 512
            except OSError:
                continue
    return total
