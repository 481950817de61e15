"""Sandboxed tools inside the running gateway: the guard step and the routing to Docker.

A tool marked `sandbox` runs only through the Docker sandbox, never on the host. When the
sandbox is unavailable (no daemon, no image) the call is refused by `SandboxGuard`, before it
is queued, confirmed or executed, with the reason. `Sandboxes` turns the configuration into
sandbox calls: per call (a fresh container from the warm pool) or per session (one container
kept for the client session, speaking MCP over its stdin/stdout). The session's workspace is
the only host directory a container sees.
"""

from __future__ import annotations

import hashlib
import logging
import math
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.to_thread
import mcp_types as types

from gateway.catalog.tools import ToolRecord
from gateway.config.limits import SandboxLimits
from gateway.config.model import GatewayConfig, GatewaySettings, SandboxSettings, ServerConfig
from gateway.errors import SandboxUnavailableError
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.runtime.background import Background
from gateway.runtime.metrics import Metrics
from gateway.sandbox.hardening import parse_size
from gateway.skills.codemode import OnCall, ScriptOutcome
from gateway.upstreams.transports import Streams, TransportFactory
from gateway.upstreams.workspaces import Workspaces, workspace_owner

if TYPE_CHECKING:
    from gateway.sandbox.containers import SandboxContainer
    from gateway.sandbox.source import DockerSandbox

log = logging.getLogger(__name__)

AVAILABILITY_INTERVAL = 30.0
RELEASE_KEY = "gateway.sandbox.release"


class SandboxGuard:
    """Refuses calls to sandboxed tools while the sandbox is unavailable."""

    def __init__(self, availability: Callable[[], tuple[bool, str]]) -> None:
        self._availability = availability

    def applies_to(self, tool: ToolRecord) -> bool:
        """Only sandboxed tools are guarded."""
        return tool.sandbox is not None

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        if self.applies_to(call.tool):
            ready, reason = self._availability()
            if not ready:
                raise SandboxUnavailableError(
                    f"Tool {call.tool.name} runs only in a Docker sandbox, and the sandbox is unavailable: "
                    f"{reason}. The call was not run."
                )
        return await call_next(call)


def container_command(server: ServerConfig, settings: SandboxSettings) -> list[str]:
    """What runs in the container: the configured command, else the server's own, where the
    gateway's Python becomes the image's `python3`."""
    if settings.command:
        return list(settings.command)
    assert server.command is not None
    command = "python3" if server.command == sys.executable else server.command
    return [command, *server.args]


def limits_of(settings: SandboxSettings, user: tuple[int, int]) -> SandboxLimits:
    """The container limits for a tool's sandbox settings, run as `user` (the workspaces' owner)."""
    return SandboxLimits(
        user=f"{user[0]}:{user[1]}",
        memory=parse_size(settings.memory),
        cpus=settings.cpus,
        pids=settings.pids,
        tmpfs=parse_size(settings.tmpfs),
        deadline=settings.deadline,
        max_output=settings.max_output_bytes,
    )


def needs_sandbox(server: ServerConfig) -> bool:
    """Whether `server` or one of its tools runs in the sandbox."""
    return server.sandbox is not None or any(tool.sandbox is not None for tool in server.tools.values())


def sandbox_scope(settings: GatewaySettings) -> str:
    """The scope label of this gateway's containers: stable across restarts on the same data
    directory, so that a restarted gateway sweeps what its predecessor left."""
    return "gw-" + hashlib.sha256(str(settings.data_dir).encode()).hexdigest()[:12]


class WarmStart:
    """A session container started ahead on a spare workspace, taken for one session's first use."""

    def __init__(self, handle: SandboxContainer, workspaces: Workspaces) -> None:
        self.handle = handle
        self._workspaces = workspaces
        self.discarded = False

    @property
    def workspace(self) -> Path:
        """The spare workspace the container mounts."""
        assert self.handle.workspace is not None
        return self.handle.workspace

    async def discard(self) -> None:
        """Not adopted: remove the container and its spare workspace."""
        from gateway.sandbox.containers import destroy

        self.discarded = True
        with anyio.CancelScope(shield=True):
            for companion in self.handle.companions:
                await anyio.to_thread.run_sync(destroy, companion)
            await anyio.to_thread.run_sync(destroy, self.handle)
            await anyio.to_thread.run_sync(self._workspaces.discard, self.workspace)


def warms_sessions(server: ServerConfig) -> bool:
    """Whether `server` runs in a container per client session, which can be started ahead."""
    return server.sandbox is not None and server.sandbox.mode == "per-session"


class Sandboxes:
    """The gateway's Docker sandbox, created only when some tool needs one."""

    def __init__(self, config: GatewayConfig, metrics: Metrics) -> None:
        self._settings = config.settings
        self._metrics = metrics
        self.docker: DockerSandbox | None = None
        if config.settings.code_mode or any(needs_sandbox(server) for server in config.servers):
            self.docker = self._docker()
        self._state = (False, "the Docker sandbox has not been checked yet")
        # The workspace's owner, so the container reaches it through ownership, not a world-writable mode.
        self._user = workspace_owner()
        self._started: tuple[Background, bool] | None = None
        self._servers = list(config.servers)
        self._workspaces: Workspaces | None = None

    def _docker(self) -> DockerSandbox:
        # docker-py (and requests) load only for a configuration whose tools use the sandbox.
        from gateway.sandbox.source import DockerSandbox

        settings = self._settings
        # Session containers end with their client sessions (the gateway's own idle expiry), not
        # on a timer of the sandbox's: a quiet session would otherwise lose its server's state.
        return DockerSandbox(
            settings.sandbox_image,
            warm_size=settings.sandbox_warm,
            scope=sandbox_scope(settings),
            session_idle=math.inf,
        )

    async def require(self, server: ServerConfig) -> None:
        """Turn the sandbox on for `server`, added while the gateway runs, when nothing needed it before."""
        if self.docker is not None or not needs_sandbox(server):
            return
        self.docker = self._docker()
        if self._started is not None:
            background, owner = self._started
            await self.start(background, owner=owner)

    def warm_sessions(self, workspaces: Workspaces) -> None:
        """Start `sandbox_session_warm` containers ahead, each on a spare workspace of `workspaces`,
        for every server sandboxed per session, once Docker answered (as the data directory's owner).
        A tool sandboxed per call gets its own at its first call (`claim`): none wait for a tool
        nobody calls, and the gateway's start launches no more containers than before."""
        self._workspaces = workspaces
        if self.docker is None or not self._state[0] or self._settings.sandbox_session_warm == 0:
            return
        for server in self._servers:
            if warms_sessions(server):
                assert server.sandbox is not None
                self._session_pool(server, server.sandbox)

    def _session_pool(self, server: ServerConfig, settings: SandboxSettings) -> None:
        assert self.docker is not None and self._workspaces is not None
        command = container_command(server, settings)
        limits = limits_of(settings, self._user)
        workspaces = self._workspaces
        # A per-call tool's spare comes with its session's warm pool: the calls after the first are warm too.
        companions = self._settings.sandbox_warm if settings.mode == "per-call" else 0
        self.docker.session_pool(
            command, limits, self._settings.sandbox_session_warm, workspaces.spare, workspaces.discard, companions
        )

    def claim(self, server: ServerConfig, tool: str | None = None) -> WarmStart | None:
        """A container started ahead for `server` (for its per-call `tool`, when given), when one is
        ready; a server first seen now gets its pool started for the sessions after this one."""
        docker, workspaces = self.docker, self._workspaces
        settings = server.sandbox if tool is None else server.settings_for(tool).sandbox
        if docker is None or workspaces is None or settings is None or not self._state[0]:
            return None
        if self._settings.sandbox_session_warm == 0:
            return None
        command = container_command(server, settings)
        handle = docker.take_session(command, limits_of(settings, self._user))
        if handle is None:
            self._session_pool(server, settings)
            return None
        return WarmStart(handle, workspaces)

    def availability(self) -> tuple[bool, str]:
        """Whether sandboxed tools can run now, and why not (as of the last check)."""
        if self.docker is None:
            return False, "no tool of this configuration uses the sandbox"
        return self._state

    async def start(self, background: Background, *, owner: bool = True) -> None:
        """Check Docker; as the owner of the data directory's containers also remove leftovers of
        earlier runs and keep both up to date in the background."""
        self._started = (background, owner)
        if self.docker is None:
            return
        await self._check()
        if not owner:
            return
        if self._state[0]:
            removed = await self.docker.sweep_leftovers()
            if removed:
                log.info("removed %d sandbox containers left by an earlier run", removed)
        background.start("sandbox_watch", self._watch)
        background.start("sandbox_upkeep", self.docker.maintain)
        if self._settings.code_mode and self._state[0]:
            # The first script of the gateway's first session takes a container started now.
            background.start("code_mode_warm", self._warm_scripts)

    def script_limits(self) -> SandboxLimits:
        """The limits of a code mode script's container: the sandbox's defaults, the code mode deadline."""
        deadline = self._settings.code_mode_deadline
        return SandboxLimits(user=f"{self._user[0]}:{self._user[1]}", deadline=deadline, lifetime=max(3600.0, deadline))

    async def _warm_scripts(self) -> None:
        from gateway.sandbox.scripts import runner_command

        assert self.docker is not None
        await self.docker.prewarm(runner_command(), self.script_limits(), None)
        await anyio.sleep_forever()

    async def run_script(self, start: Mapping[str, Any], max_output: int, on_call: OnCall) -> ScriptOutcome:
        """Run a code mode script (`start`, see `gateway.sandbox.scriptrunner`) in a fresh container
        from the scripts' warm pool, which mounts no host directory; `on_call` answers its tool calls."""
        from gateway.sandbox.scripts import run_script, runner_command

        docker = self.docker
        ready, reason = self.availability()
        if docker is None or not ready:
            raise SandboxUnavailableError(f"Run_Code runs scripts in a Docker sandbox, which is unavailable: {reason}")
        limits = self.script_limits()
        handle = await docker.take(runner_command(), limits, None)
        try:
            return await run_script(handle, start, limits.deadline, max_output, on_call)
        finally:
            await docker.dispose(handle)

    async def close(self) -> None:
        """Destroy every container the sandbox holds."""
        if self.docker is not None:
            await self.docker.close()

    async def _check(self) -> None:
        assert self.docker is not None
        with anyio.move_on_after(10):
            self._state = await anyio.to_thread.run_sync(self.docker.available)
            return
        self._state = (False, "Docker did not answer within 10 s")

    async def _watch(self) -> None:
        while True:
            await anyio.sleep(AVAILABILITY_INTERVAL)
            before = self._state[0]
            await self._check()
            if before != self._state[0]:
                log.warning("sandbox %s: %s", "available" if self._state[0] else "unavailable", self._state[1])

    async def call(
        self, call: ToolCall, server: ServerConfig, workspace: Path, warm: WarmStart | None = None
    ) -> types.CallToolResult:
        """Run one call of a per-call sandboxed tool in a fresh container: the one `warm` started
        ahead on the spare workspace that became the session's, when given."""
        docker = self.docker
        assert docker is not None
        settings = server.settings_for(call.tool.original_name).sandbox
        assert settings is not None
        if RELEASE_KEY not in call.session.state:
            # Warm containers mount this session's workspace: nobody else may use them once it ends.
            call.session.state[RELEASE_KEY] = True

            async def release() -> None:
                await docker.release_workspace(workspace)

            call.session.on_close(release)
        started, outcome = self._metrics.clock(), "failed"
        try:
            result = await docker.call_per_call(
                container_command(server, settings),
                call.tool.original_name,
                call.arguments,
                limits_of(settings, self._user),
                workspace,
                call.tool.output_schema,
                warm.handle if warm is not None and not warm.discarded else None,
            )
            outcome = "error" if result.is_error else "ok"
            return result
        finally:
            self._metrics.sandbox_run(outcome, started)

    def transport(
        self,
        owner: str,
        server: ServerConfig,
        workspace: Path | None,
        errlog: TextIO | None = None,
        warm: WarmStart | None = None,
    ) -> TransportFactory:
        """The transport to `owner`'s container of a server sandboxed as a whole (one per session),
        the one `warm` started ahead when given; its stderr is written to `errlog` too, when given."""
        docker = self.docker
        assert docker is not None and server.sandbox is not None
        key = f"{owner}/{server.name}"
        command = container_command(server, server.sandbox)
        limits = limits_of(server.sandbox, self._user)
        # Taken on the first connection only: a reconnection starts a fresh container.
        ahead = [warm.handle] if warm is not None and not warm.discarded else []

        @asynccontextmanager
        async def open_container() -> AsyncIterator[Streams]:
            started = ahead.pop() if ahead else None
            async with docker.session_transport(key, command, limits, workspace, errlog, started) as streams:
                try:
                    yield streams
                finally:
                    await docker.close_session(key)

        return open_container
