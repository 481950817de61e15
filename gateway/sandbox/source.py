"""`DockerSandbox`: the gateway's handle on sandboxed MCP servers, per call or per client session."""

from __future__ import annotations

import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.to_thread
import docker
import docker.errors
import mcp_types as types
from docker import DockerClient
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from gateway.config.limits import SandboxLimits
from gateway.errors import SandboxUnavailableError, ToolError, ToolExecutionError, ToolTimeoutError
from gateway.runtime import owners, tracing
from gateway.sandbox.containers import (
    DOCKER_ERRORS,
    ContainerStdio,
    Reaper,
    SandboxContainer,
    destroy,
    launch,
    unavailable,
)
from gateway.sandbox.demand import Demand
from gateway.sandbox.hardening import DEFAULT_IMAGE, LABEL_OWNER, LABEL_SCOPE, container_kwargs
from gateway.sandbox.pool import WarmPool
from gateway.sandbox.sweeper import sweep, sweep_all
from gateway.upstreams.outputs import OutputValidators

logger = logging.getLogger(__name__)

LABEL_SESSION = "io.mcp-gateway.clients.session"
_PREWARM_TIMEOUT = 120.0
SANDBOX_START = "sandbox start"
"""The span of taking a container for a call: a warm one from the pool, or one started now."""
PoolKey = tuple[tuple[str, ...], SandboxLimits, Path | None]
SessionPoolKey = tuple[tuple[str, ...], SandboxLimits]
SESSION_WARM_AGE = 300.0
"""Seconds a session container started ahead may wait for its session before it is replaced, so
that a session taking it keeps nearly the whole `lifetime` of a container started for it."""


class DockerSandbox:
    """Runs MCP servers in hardened containers; fails closed when Docker or the image is missing.

    Per-call use takes a fresh container from a warm pool (one pool per command, limits and
    workspace, the least recently used dropped past `max_pools`). Per-session use keeps one
    container for each client session until `close_session` or `session_idle` seconds unused.
    Every container carries the `scope` label; sweeps touch only that scope's containers.
    """

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        docker_url: str | None = None,
        warm_size: int = 2,
        max_pools: int = 4,
        session_idle: float = 600.0,
        scope: str = "default",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.image = image
        self.scope = scope
        self.docker_url = docker_url
        self.warm_size = warm_size
        self.max_pools = max_pools
        self.session_idle = session_idle
        self._clock = clock
        self._wall_clock = wall_clock
        self._docker: DockerClient | None = None
        self._pools: OrderedDict[PoolKey, WarmPool] = OrderedDict()
        self._sessions: dict[str, ContainerStdio] = {}
        self._session_pools: dict[SessionPoolKey, WarmPool] = {}
        self._demand: dict[SessionPoolKey, Demand] = {}
        self._reaper = Reaper()
        self._output_validators = OutputValidators()

    def client(self) -> DockerClient:
        """The docker-py client, connected on first use (blocking); SandboxUnavailableError if unreachable."""
        if self._docker is None:
            try:
                self._docker = docker.DockerClient(base_url=self.docker_url) if self.docker_url else docker.from_env()
            except DOCKER_ERRORS as error:
                raise unavailable(error, self.image) from error
        return self._docker

    def check(self) -> None:
        """Raise SandboxUnavailableError unless the daemon answers and the image exists (blocking; never pulls)."""
        try:
            client = self.client()
            client.ping()
            client.images.get(self.image)
        except DOCKER_ERRORS as error:
            raise unavailable(error, self.image) from error

    def available(self) -> tuple[bool, str]:
        """Whether sandboxed tools can run, and why not (blocking, a few milliseconds)."""
        try:
            self.check()
        except SandboxUnavailableError as error:
            return False, error.message
        return True, f"Docker is reachable and sandbox image {self.image} is present"

    async def call_per_call(
        self,
        command: Sequence[str],
        tool_name: str,
        arguments: Mapping[str, Any],
        limits: SandboxLimits,
        workspace: Path | None,
        output_schema: Mapping[str, Any] | None = None,
        started: SandboxContainer | None = None,
    ) -> types.CallToolResult:
        """Call one tool on a fresh container running `command` (`started` ahead, when given; the
        workspace's pool then fills for the calls after it): initialize, call, destroy.

        A result is checked against `output_schema` (the tool's, from the catalog) here, with a
        validator compiled once per schema: a fresh client session would list the container's
        tools and compile one for every call (a round trip and about 6 ms).
        """
        pool = await self._pool(command, limits, workspace)
        ahead = [started] if started is not None else []

        async def acquire() -> SandboxContainer:
            with tracing.span(SANDBOX_START):
                if ahead:
                    pool.offer(ahead[0].companions)
                    pool.fill()
                    return ahead.pop()
                return await pool.acquire()

        transport = ContainerStdio(
            acquire, self._reaper.dispose, max_message_bytes=_message_cap(limits), clock=self._clock
        )
        result = await _call(transport, tool_name, arguments, limits.deadline)
        if output_schema is not None and not result.is_error:
            self._output_validators.check(tool_name, output_schema, result)
        return result

    def session_transport(
        self,
        session_id: str,
        command: Sequence[str],
        limits: SandboxLimits,
        workspace: Path | None,
        errlog: TextIO | None = None,
        started: SandboxContainer | None = None,
    ) -> ContainerStdio:
        """The MCP transport to a container kept for this client session (started when entered, or
        `started` ahead, from `take_session`); the server's stderr is written to `errlog` too, when given."""
        current = self._sessions.get(session_id)
        if current is not None and current.container_id is not None:
            raise ValueError(f"session {session_id} already has a sandbox container; close it first")
        labels = {LABEL_SESSION: session_id}
        ahead = [started] if started is not None else []

        async def acquire() -> SandboxContainer:
            with tracing.span(SANDBOX_START):
                if ahead:
                    return ahead.pop()
                return await anyio.to_thread.run_sync(self._launch, command, limits, workspace, labels)

        transport = ContainerStdio(
            acquire, self._reaper.dispose, max_message_bytes=_message_cap(limits), clock=self._clock, errlog=errlog
        )
        self._sessions[session_id] = transport
        return transport

    def session_pool(
        self,
        command: Sequence[str],
        limits: SandboxLimits,
        size: int,
        spare: Callable[[], Path],
        discard: Callable[[Path], None],
        companions: int = 0,
    ) -> WarmPool:
        """The pool of containers started ahead of their session, each on a spare workspace from
        `spare` (blocking), which `discard` removes when no session took it; filled in the background.
        It holds at least `size` containers, more while sessions arrive faster (`Demand`). Each
        comes with `companions` more on its workspace (a per-call tool's warm pool for that session)."""
        key: SessionPoolKey = (tuple(command), limits)
        pool = self._session_pools.get(key)
        if pool is None:
            demand = self._demand[key] = Demand(size, self._clock)

            def start() -> SandboxContainer:
                workspace = spare()
                started: list[SandboxContainer] = []
                try:
                    begun = self._clock()
                    started.append(self._launch(command, limits, workspace, {}))
                    demand.started(self._clock() - begun)
                    started.extend(self._launch(command, limits, workspace, {}) for _ in range(companions))
                except BaseException:
                    for handle in started:
                        destroy(handle)
                    discard(workspace)
                    raise
                handle, *others = started
                handle.workspace, handle.companions = workspace, others
                return handle

            def dispose(handle: SandboxContainer) -> None:
                # The workspace first (a lazy unmount, at once): a gateway stopped while removing
                # containers, which takes seconds, leaves no file system mounted.
                if handle.workspace is not None:
                    discard(handle.workspace)
                for companion in handle.companions:
                    destroy(companion)
                destroy(handle)

            remaining = max(limits.lifetime - SESSION_WARM_AGE, limits.deadline + 10.0)
            pool = WarmPool(size, start, min_remaining=remaining, wall_clock=self._wall_clock, dispose=dispose)
            self._session_pools[key] = pool
        pool.fill()
        return pool

    async def sessions_warm(self) -> None:
        """Wait until every pool of containers started ahead of their session is full."""
        with anyio.fail_after(_PREWARM_TIMEOUT):
            for pool in list(self._session_pools.values()):
                await pool.wait_full()

    def take_session(self, command: Sequence[str], limits: SandboxLimits) -> SandboxContainer | None:
        """A container started ahead on a spare workspace for `command`, when one is ready (never
        blocks); the pool grows to what the sessions arriving now need."""
        key: SessionPoolKey = (tuple(command), limits)
        pool = self._session_pools.get(key)
        if pool is None:
            return None
        demand = self._demand[key]
        demand.arrived()
        pool.size = demand.size()
        return pool.take()

    async def close_session(self, session_id: str) -> None:
        """Destroy the session's container; its client then sees the connection end."""
        transport = self._sessions.pop(session_id, None)
        if transport is not None:
            await transport.terminate()

    async def close_idle(self, now: float) -> int:
        """Close sessions unused for `session_idle` seconds (`now` from the monotonic `clock`); return how many."""
        idle = [sid for sid, t in self._sessions.items() if now - t.last_activity > self.session_idle]
        for session_id in idle:
            await self.close_session(session_id)
        return len(idle)

    async def release_workspace(self, workspace: Path) -> int:
        """Remove the warm pools whose containers mount `workspace` (its session ended); return how many."""
        keys = [key for key in self._pools if key[2] == workspace]
        for key in keys:
            await self._pools.pop(key).close()
        return len(keys)

    async def take(self, command: Sequence[str], limits: SandboxLimits, workspace: Path | None) -> SandboxContainer:
        """A fresh started container running `command` from its warm pool (a cold start when none is
        ready); give it back to `dispose` when done."""
        pool = await self._pool(command, limits, workspace)
        with tracing.span(SANDBOX_START):
            return await pool.acquire()

    async def dispose(self, handle: SandboxContainer) -> None:
        """Remove a container from `take` in the background."""
        await self._reaper.dispose(handle)

    async def prewarm(self, command: Sequence[str], limits: SandboxLimits, workspace: Path | None) -> None:
        """Fill the warm pool for this command now rather than on its first call."""
        pool = await self._pool(command, limits, workspace)
        with anyio.fail_after(_PREWARM_TIMEOUT):
            await pool.wait_full()

    async def sweep_leftovers(self) -> int:
        """Remove every sandbox container left by a gateway that is gone; call once at start-up, before any use."""
        client = await anyio.to_thread.run_sync(self.client)
        return await anyio.to_thread.run_sync(sweep_all, client, self.scope)

    async def maintain(self, interval: float = 30.0) -> None:
        """Until cancelled: sweep expired containers, close idle sessions, refresh warm pools."""
        while True:
            try:
                await anyio.to_thread.run_sync(lambda: sweep(self.client(), self._wall_clock(), self.scope))
            except (SandboxUnavailableError, *DOCKER_ERRORS) as error:
                logger.warning("sandbox maintenance could not sweep: %s", error)
            await self.close_idle(self._clock())
            for key, pool in self._session_pools.items():
                # Past a burst the pool shrinks back as its containers age out unreplaced.
                pool.size = self._demand[key].size()
            for pool in [*self._pools.values(), *self._session_pools.values()]:
                pool.fill()
            await anyio.sleep(interval)

    async def close(self) -> None:
        """Destroy every container this sandbox holds: started ahead (their spare workspaces
        first), sessions', warm pools, queued removals."""
        with anyio.CancelScope(shield=True):
            while self._session_pools:
                await self._session_pools.popitem()[1].close()
            for session_id in list(self._sessions):
                await self.close_session(session_id)
            while self._pools:
                await self._pools.popitem()[1].close()
            self._demand.clear()
            await self._reaper.close()
            docker_client, self._docker = self._docker, None
            if docker_client is not None:
                docker_client.close()

    async def _pool(self, command: Sequence[str], limits: SandboxLimits, workspace: Path | None) -> WarmPool:
        key: PoolKey = (tuple(command), limits, workspace)
        pool = self._pools.get(key)
        if pool is None:
            # First use of this command: fail closed here, before anything is started.
            await anyio.to_thread.run_sync(self.check)
            pool = self._pools.get(key)
        if pool is None:
            factory = functools.partial(self._launch, command, limits, workspace, {})
            pool = WarmPool(self.warm_size, factory, min_remaining=limits.deadline + 10.0, wall_clock=self._wall_clock)
            self._pools[key] = pool
            while len(self._pools) > self.max_pools:
                await self._pools.popitem(last=False)[1].close()
        self._pools.move_to_end(key)
        return pool

    def _launch(
        self, command: Sequence[str], limits: SandboxLimits, workspace: Path | None, labels: Mapping[str, str]
    ) -> SandboxContainer:
        """Start one container (blocking); the deadline label counts from this moment."""
        labels = {**labels, LABEL_SCOPE: self.scope, LABEL_OWNER: owners.own_token()}
        kwargs = container_kwargs(
            self.image, command, limits, labels, workspace, now=self._wall_clock(), lifetime=limits.lifetime
        )
        return launch(self.client(), kwargs)


def _message_cap(limits: SandboxLimits) -> int:
    """Largest JSON-RPC line accepted: the output cap, with room for JSON escaping and envelope."""
    return 8 * limits.max_output + 64 * 1024


async def _call(
    transport: ContainerStdio, tool_name: str, arguments: Mapping[str, Any], deadline: float
) -> types.CallToolResult:
    """Connect, call one tool and disconnect, translating every failure into a ToolError."""
    try:
        with anyio.fail_after(deadline):
            # The handshake era, which every server speaks: `auto` would first probe for the 2026 era.
            async with Client(transport, mode="legacy") as client:
                params = types.CallToolRequestParams(name=tool_name, arguments=dict(arguments))
                request = types.CallToolRequest(params=params)
                attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool_name}
                # The SDK's session writes the current span's trace context into `_meta`.
                with tracing.span(f"tools/call {tool_name}", attributes, client=True):
                    return await client.session.send_request(request, types.CallToolResult)
    except TimeoutError as error:
        raise ToolTimeoutError(f"sandboxed tool {tool_name} ran past its {deadline:g} s deadline") from error
    except (MCPError, ExceptionGroup) as error:
        failure = _first_leaf(error)
        if isinstance(failure, ToolError):
            raise failure from error  # e.g. Docker went away while a cold start was under way
        if not isinstance(failure, MCPError):
            raise
        # The session only saw the connection close; the transport knows why it closed it.
        reason = transport.failure or failure.message
        # A server's stderr may hold what its configuration gave it: it is for operators, not callers.
        tail = transport.stderr_tail.strip()[-500:]
        if tail:
            logger.warning("sandboxed tool %s failed: %s; server stderr: %s", tool_name, reason, tail)
        raise ToolExecutionError(f"sandboxed tool {tool_name} failed: {reason}") from error


def _first_leaf(error: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) task-group exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


__all__ = ["DockerSandbox", "SandboxContainer", "SandboxUnavailableError"]
