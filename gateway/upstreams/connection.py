"""Connections to upstream MCP servers: stdio processes, streamable HTTP and legacy SSE.

Each `Upstream` keeps one long-lived client session, lists what the server offers, follows
its list_changed notifications (a burst of them becomes one re-list), pings the server every
`health_interval` seconds, and reconnects with backoff when the connection drops or the server
fails `unhealthy_after` pings in a row. It is also the `ToolSource` for that server's tools: a
call that arrives while the server restarts waits for it, within the call's deadline.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from gateway.catalog.merged import SourceListing
from gateway.catalog.ownership import Withheld
from gateway.catalog.tools import ToolRecord
from gateway.config.model import GatewaySettings, ServerConfig
from gateway.errors import (
    GatewayError,
    ProtocolError,
    ToolExecutionError,
    UpstreamRestartingError,
    UpstreamUnavailableError,
    describe_error,
)
from gateway.pipeline.chain import ProgressFn
from gateway.runtime import requestid, tracing
from gateway.runtime.backoff import Backoff
from gateway.runtime.datadir import private_dirs
from gateway.upstreams import faults, tasking
from gateway.upstreams.addresses import Resolver, system_resolver
from gateway.upstreams.clientside import ClientSide, NoticeHandler, configured_roots
from gateway.upstreams.directcalls import DirectCalls, ResultParser
from gateway.upstreams.faults import FaultLog
from gateway.upstreams.grants import unanswered_challenge
from gateway.upstreams.listing import ListingSlots, PageFetch, UpstreamSession, all_pages, paged, records_for
from gateway.upstreams.outputs import OutputValidators
from gateway.upstreams.sdkclient import send_as_is
from gateway.upstreams.stdio import RESULT_TOO_LARGE
from gateway.upstreams.transports import (
    AuthSource,
    LoggedTransportFactory,
    TransportFactory,
    WatchedStream,
    transport_for,
)

log = logging.getLogger(__name__)

TASK_CANCEL_TIMEOUT = 10.0
"""How long a task run for a caller who stopped waiting waits for its server to take the cancellation."""

_TAIL_BYTES = 4096
_TAIL_LINES = 3
# Time kept back from a call's deadline while it waits for a restart, to answer why it gave up.
_ANSWER_RESERVE = 0.25
ListingHandler = Callable[[SourceListing], Awaitable[None]]
StateHandler = Callable[[str, str], None]
"""Told of each state an upstream's connection enters: the server's name and the state."""


class State(StrEnum):
    """Where an upstream connection stands."""

    CONNECTING = "connecting"
    READY = "ready"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    UNHEALTHY = "unhealthy"
    STOPPED = "stopped"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Status:
    """A snapshot of one upstream for `check`, `/readyz` and the catalog."""

    name: str
    transport: str
    state: State
    error: str | None
    tools: int
    restarts: int
    required: bool
    source: str = "file"
    """Where the server is defined: "file" (the config file) or "api" (registered through the API)."""
    enabled: bool = True
    resources: int = 0
    """Resources and resource templates listed."""
    prompts: int = 0
    last_health_check: float | None = None
    """When the server was last pinged (epoch seconds); None before the first ping."""
    withheld: tuple[Withheld, ...] = ()
    """Its tools left out of the catalog because their names are another's (`gateway.catalog.ownership`)."""
    icons: tuple[types.Icon, ...] = ()
    """The icons the server gave for itself when it connected (`serverInfo.icons`)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "state": self.state.value,
            "transport": self.transport,
            "tools": self.tools,
            "restarts": self.restarts,
            "required": self.required,
            "error": self.error,
            "source": self.source,
            "enabled": self.enabled,
            "resources": self.resources,
            "prompts": self.prompts,
            "last_health_check": self.last_health_check,
            "withheld": [withheld.as_dict() for withheld in self.withheld],
            "icons": [icon.model_dump(mode="json", by_alias=True, exclude_none=True) for icon in self.icons],
        }


class Upstream:
    """One upstream server: a long-lived session, health-checked, reconnected with backoff."""

    def __init__(
        self,
        config: ServerConfig,
        settings: GatewaySettings,
        on_listing: ListingHandler,
        *,
        log_dir: Path | None = None,
        transport: TransportFactory | None = None,
        logged_transport: LoggedTransportFactory | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        notices: NoticeHandler | None = None,
        workspace: Path | None = None,
        listing_slots: ListingSlots | None = None,
        resolver: Resolver = system_resolver,
        auth: AuthSource | None = None,
        on_state: StateHandler | None = None,
    ) -> None:
        self.config = config
        self._on_state = on_state
        self._retired = False
        # Shared by a gateway's upstreams; one's own otherwise.
        self._listing_slots = listing_slots or ListingSlots()
        # A session's own instance runs in its workspace; a shared server has the roots of its entry.
        roots = configured_roots(config.roots) if workspace is None else None
        self.client_side = ClientSide(config.name, notices=notices, workspace=workspace, roots=roots)
        self._settings = settings
        self._clock = clock
        self._wall_clock = wall_clock
        self._on_listing = on_listing
        self._log_dir = log_dir
        self._log_start: int | None = None
        self._transport = transport
        self._logged_transport = logged_transport
        self._resolver = resolver
        self._auth = auth
        self._challenge: str | None = None
        """What the server's last OAuth challenge asked for, when it refused the gateway's own credentials."""
        self._session: ClientSession | None = None
        self._direct: tuple[DirectCalls, ResultParser] | None = None
        """The connection's direct path for plain calls, when its transport offers one (stdio), and
        how its results are read for the session's revision."""
        self._outputs = OutputValidators()
        self._current = State.CONNECTING
        if on_state is not None:
            on_state(config.name, State.CONNECTING.value)
        self._error: str | None = None
        self._tools = 0
        self._resources = 0
        self._prompts = 0
        self._restarts = 0
        self._failures = 0
        self._was_ready = False
        self._last_health_check: float | None = None
        self._icons: tuple[types.Icon, ...] = ()
        self._resume_at: float | None = None
        self._unimplemented: set[str] = set()
        """The list methods the server answered "Method not found", each logged once."""
        self.backoff = Backoff(
            settings.restart_backoff_initial, settings.restart_backoff_max, settings.restart_backoff_reset, clock
        )
        self.faults = FaultLog(config.name, clock)
        self.first_attempt = anyio.Event()
        self._ready = anyio.Event()
        self._refresh = anyio.Event()
        self.listing: SourceListing | None = None
        """What the server listed last, as the catalog gets it (also while the connection is not
        the live one: a replacement publishes it when it takes over)."""
        self._calls = 0
        self._drained: anyio.Event | None = None
        self._subscribed: set[str] = set()
        """The resources (original URIs) the gateway holds a subscription to: renewed on each new
        connection, which the server knows nothing of."""

    @property
    def _state(self) -> State:
        return self._current

    @_state.setter
    def _state(self, state: State) -> None:
        # A connection being replaced no longer speaks for its server: its replacement does.
        if state != self._current and self._on_state is not None and not self._retired:
            self._on_state(self.name, state.value)
        self._current = state

    @property
    def name(self) -> str:
        """The server's configured name (also its catalog source name)."""
        return self.config.name

    def status(self) -> Status:
        """Where this upstream stands now."""
        return Status(
            name=self.name,
            transport=self.config.transport,
            state=self._state,
            error=self._error,
            tools=self._tools,
            restarts=self._restarts,
            required=self.config.required,
            resources=self._resources,
            prompts=self._prompts,
            last_health_check=self._last_health_check,
            icons=self._icons,
        )

    async def run(self) -> None:
        """Connect, serve until the connection drops, and reconnect with backoff; until cancelled."""
        faults.contain_sdk_faults()
        # Every task of the connection inherits this: the SDK's records of this server's faults find its log.
        faults.current.set(self.faults)
        # A connection started by a call (a session's own instance) lives on after it: its pings and
        # listings are no part of that call's trace.
        tracing.detach()
        try:
            await self._serve_forever()
        finally:
            self._state = State.STOPPED
            self._not_ready()
            self.faults.flush()

    async def _serve_forever(self) -> None:
        while True:
            try:
                await self._connect_and_serve()
                self._error = "connection closed by the server" + self._stderr_tail()
                log.warning("upstream %s: %s", self.name, self._error)
            except Exception as error:  # any failure of one upstream must not stop the others
                self._error = (self._challenged() or _failure(error)) + self._stderr_tail()
                log.warning("upstream %s: %s", self.name, self._error)
            finally:
                self._not_ready()
                self.first_attempt.set()
            self.faults.flush()
            self._failures += 1
            self._state = self._down_state()
            self._restarts += 1
            delay = self.backoff.failed()
            self._resume_at = self._clock() + delay
            await anyio.sleep(delay)
            self._resume_at = None

    def _challenged(self) -> str | None:
        """Why a server that answered with an OAuth challenge did not connect, and what makes it."""
        challenge, self._challenge = self._challenge, None
        return None if challenge is None else unanswered_challenge(challenge)

    def _take_challenge(self, challenge: str) -> None:
        self._challenge = challenge

    def _down_state(self) -> State:
        """The state of a server that is not connected: unhealthy after too many failures in a row."""
        if not self._was_ready:
            return State.FAILED
        return State.UNHEALTHY if self._failures >= self._settings.unhealthy_after else State.RECONNECTING

    def _not_ready(self) -> None:
        """Calls from now on wait for the next connection instead of using this one."""
        self._session = None
        self._direct = None
        if self._ready.is_set():
            self._ready = anyio.Event()

    async def _connect_and_serve(self) -> None:
        self._state = State.CONNECTING if not self._restarts else self._state
        async with AsyncExitStack() as stack:
            limit = self._settings.max_result_bytes
            data_dir = self._settings.data_dir
            direct = DirectCalls()
            if self._transport is not None:
                factory = self._transport
            elif self._logged_transport is not None:
                # A sandboxed server's stderr reaches the same log as a host server's, so its failure says as much.
                factory = self._logged_transport(self._errlog(stack))
            else:
                factory = transport_for(
                    self.config,
                    data_dir,
                    self._errlog(stack),
                    limit,
                    self.faults,
                    direct,
                    self._resolver,
                    self._auth,
                    self._take_challenge,
                )
            read, write = await stack.enter_async_context(factory())
            watched = WatchedStream(read)
            options = self.client_side.session_options()
            intercept = partial(self.client_side.intercept, lambda: watched.last_context, direct)
            session = UpstreamSession(watched, write, message_handler=self._on_message, intercept=intercept, **options)
            await stack.enter_async_context(session)
            timeout, step = self._settings.upstream_connect_timeout, "initialize"
            try:
                with anyio.fail_after(timeout):
                    await session.initialize()
                    step = "the first listing"
                    # Held for the first listing only, which the connect timeout bounds.
                    async with self._listing_slots.slot():
                        await self._publish(session)
            except TimeoutError:
                # Told at once: closing a server that hangs takes a few seconds more.
                self._error = f"timed out after {timeout:g} s during {step}"
                self._state = self._down_state()
                self.first_attempt.set()
                raise UpstreamUnavailableError(self._error) from None
            self._session = session
            self._icons = tuple(session.server_info.icons or ()) if session.server_info is not None else ()
            self._direct = (direct, ResultParser(session.protocol_version)) if direct.open else None
            self._state = State.READY
            self._error = None
            self._failures = 0
            self._was_ready = True
            self.backoff.ready()
            self._ready.set()
            self.first_attempt.set()
            log.info("upstream %s ready with %d tools", self.name, self._tools)
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._follow_changes, session)
                    group.start_soon(self._check_health, session)
                    if self._subscribed:
                        group.start_soon(self._renew_subscriptions, session)
                    await watched.closed.wait()
                    group.cancel_scope.cancel()
            finally:
                # Before the process is stopped (seconds, for one that hangs): new calls wait for the restart.
                self._not_ready()
                if self._state == State.READY:
                    self._state = State.RECONNECTING

    async def _check_health(self, session: ClientSession) -> None:
        """Ping every `health_interval` s; after `unhealthy_after` failures in a row, end the connection."""
        interval = self._settings.health_interval
        timeout = min(interval, self._settings.upstream_connect_timeout)
        while True:
            await anyio.sleep(interval)
            try:
                with anyio.fail_after(timeout):
                    await session.send_ping()
                self._failures = 0
            except MCPError as error:
                if error.error.code == types.CONNECTION_CLOSED:
                    return  # the connection is ending anyway
                self._failures = 0  # an error answer is still an answer
            except TimeoutError:
                self._failures += 1
                self.faults.report("unanswered health check", f"no answer to a ping within {timeout:g} s")
                if self._failures >= self._settings.unhealthy_after:
                    self._state = State.UNHEALTHY
                    self._not_ready()
                    raise UpstreamUnavailableError(
                        f"did not answer {self._failures} health checks in a row; restarting it"
                    ) from None
            finally:
                self._last_health_check = self._wall_clock()

    def _errlog(self, stack: AsyncExitStack) -> TextIO:
        if self._log_dir is None:
            return stack.enter_context(open(Path("/dev/null"), "w"))
        private_dirs(self._log_dir)
        # A server's raw stderr may hold its credentials: only the gateway's user may read it.
        path = self._log_dir / f"{self.name}.log"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(descriptor, 0o600)
        errlog: TextIO = stack.enter_context(os.fdopen(descriptor, "a"))
        self._log_start = errlog.tell()
        return errlog

    def _stderr_tail(self) -> str:
        """The last few lines this connection's server wrote to stderr (on the host or in its sandbox):
        often the real reason it failed, and a traceback's last lines say where."""
        first, self._log_start = self._log_start, None
        if self._log_dir is None or first is None:
            return ""
        path = self._log_dir / f"{self.name}.log"
        try:
            with path.open("rb") as file:
                end = file.seek(0, os.SEEK_END)
                start = file.seek(max(first, end - _TAIL_BYTES))
                lines = file.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        # Whole lines only: a line cut short could hold part of a secret, which redaction cannot recognise.
        if start > first:
            lines = lines[1:]
        lines = [line.strip() for line in lines if line.strip()]
        return f" (stderr: {' | '.join(lines[-_TAIL_LINES:])}; full log: {path})" if lines else ""

    async def _publish(self, session: UpstreamSession) -> None:
        capabilities = session.server_capabilities
        records = records_for(self.config, await self._listed("tools/list", session.tool_page))
        resources: list[types.Resource] = []
        templates: list[types.ResourceTemplate] = []
        prompts: list[types.Prompt] = []
        if capabilities is not None and capabilities.resources is not None:
            resources = await self._listed("resources/list", paged(session.list_resources, "resources"))
            templates = await self._listed(
                "resources/templates/list", paged(session.list_resource_templates, "resource_templates")
            )
        if capabilities is not None and capabilities.prompts is not None:
            prompts = await self._listed("prompts/list", paged(session.list_prompts, "prompts"))
        self._tools = len(records)
        self._resources = len(resources) + len(templates)
        self._prompts = len(prompts)
        self.listing = SourceListing(
            source=self.name,
            namespace=self.config.prefix,
            tools=records,
            resources=tuple(resources),
            templates=tuple(templates),
            prompts=tuple(prompts),
            wanted_names={original: settings.name for original, settings in self.config.tools.items() if settings.name},
        )
        await self._on_listing(self.listing)

    async def reconfigure(self, config: ServerConfig) -> None:
        """Take settings that need no new connection (risk, tags, layer, timeouts, tool overrides,
        namespace): the server is listed again under them, on the connection it has."""
        self.config = config
        session = self._session
        if not isinstance(session, UpstreamSession):
            return  # not connected: the next connection lists under them
        try:
            await self._publish(session)
        except Exception as error:  # the listing follows with the next list_changed or connection
            self.faults.report("failed refresh", _failure(error))

    async def _listed(self, method: str, fetch: PageFetch) -> list[Any]:
        """Every page of one listing; a method the server does not implement lists nothing.

        Many servers declare `resources` without implementing `resources/templates/list`: the
        rest of what they offer is served all the same.
        """
        try:
            return await all_pages(fetch, method)
        except MCPError as error:
            if error.error.code != types.METHOD_NOT_FOUND:
                raise
        if method not in self._unimplemented:
            self._unimplemented.add(method)
            log.info("upstream %s does not implement %s: it lists none", self.name, method)
        return []

    async def _on_message(self, message: Any) -> None:
        await self.client_side.on_message(message)
        if isinstance(
            message,
            types.ToolListChangedNotification
            | types.ResourceListChangedNotification
            | types.PromptListChangedNotification,
        ):
            self._refresh.set()

    async def _follow_changes(self, session: UpstreamSession) -> None:
        pause = self._settings.notify_coalesce_ms / 1000
        while True:
            await self._refresh.wait()
            self._refresh = anyio.Event()
            try:
                await self._publish(session)
            except Exception as error:  # a failed refresh keeps the last listing
                self.faults.report("failed refresh", _failure(error))
            # A burst of list_changed (a storm: thousands) arriving meanwhile becomes one more re-list.
            await anyio.sleep(pause)

    def retry_after(self) -> int:
        """Whole seconds until the server may be back: what is left of the backoff, and one to connect."""
        waiting = 0.0 if self._resume_at is None else max(0.0, self._resume_at - self._clock())
        return math.ceil(waiting) + 1

    def _unavailable(self) -> UpstreamUnavailableError:
        # The last error (often the server's stderr, and its log's path) is for operators: `/readyz`, `check`, the log.
        return UpstreamUnavailableError(
            f"Server '{self.name}' is unavailable",
            hint=f"It is not answering and the gateway is restarting it; try again in about {self.retry_after()} s "
            "or use another tool.",
        )

    async def _live_session(self) -> ClientSession:
        """The connected session; while the server restarts, wait for it within the caller's deadline."""
        if self._session is not None:
            return self._session
        if self._state not in (State.CONNECTING, State.RECONNECTING):
            raise self._unavailable()
        ready = self._ready
        # A call has its deadline from the pipeline; a request without one waits at most a call's timeout.
        remaining = anyio.current_effective_deadline() - anyio.current_time()
        budget = min(remaining - _ANSWER_RESERVE, self._settings.call_timeout)
        if budget > 0:
            with anyio.move_on_after(budget):
                await ready.wait()
        if self._session is not None:
            return self._session
        if self._state not in (State.CONNECTING, State.RECONNECTING):
            raise self._unavailable()
        retry = self.retry_after()
        raise UpstreamRestartingError(
            f"Server '{self.name}' is restarting; retry in {retry} s",
            hint=f"Call the tool again in {retry} s.",
        )

    async def call_tool(
        self, tool: ToolRecord, arguments: Mapping[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        """Run `tool` on this server under its original name.

        A call that asks for no progress takes the connection's direct path when it has one
        (`directcalls`), others the SDK's session; either way the result is checked against the
        tool's output schema here, once (the session keeps no schemas: `listing.UpstreamSession`).
        """
        # Counted without a context manager: a generator's costs several times a try on every call.
        self._calls += 1
        try:
            return await self._call_tool(tool, arguments, progress)
        finally:
            self._ended()

    async def call_as_task(self, tool: ToolRecord, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """Run `tool`, which its server runs only as a task (`taskSupport: required`), for a caller
        that holds no tasks (the 2026 era has none; `Use_Tool`): the task is created, its result
        waited for, and the task cancelled on the server when the caller stops waiting. A server
        that runs no tasks gets a plain call."""
        self._calls += 1
        try:
            task = await self.create_task(tool, arguments, types.TaskMetadata())
            if task is None:
                return await self._call_tool(tool, arguments, None)
            try:
                answer = await self.send_as_is(tasking.result_request(task.task_id))
            except anyio.get_cancelled_exc_class():
                with anyio.move_on_after(TASK_CANCEL_TIMEOUT, shield=True), suppress(GatewayError):
                    await self.send_as_is(tasking.cancel_request(task.task_id))
                raise
            result = tasking.task_result(self.name, answer)
        finally:
            self._ended()
        if tool.output_schema is not None and not result.is_error:
            self._outputs.check(tool.original_name, tool.output_schema, result)
        return result

    def _ended(self) -> None:
        """A counted call has ended: `_calls` counts those running, so that a connection being
        replaced can let its calls finish (`drained`)."""
        self._calls -= 1
        if not self._calls and self._drained is not None:
            self._drained.set()
            self._drained = None

    def retire(self) -> None:
        """This connection is being replaced: calls waiting for it to connect stop waiting, and are
        told to call again (the replacement takes them); calls it is running go on."""
        self._retired = True
        if self._session is None:
            self._ready.set()

    async def drained(self) -> None:
        """Return once no call is running on this connection (one being replaced lets them finish)."""
        if self._calls:
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()

    async def _call_tool(
        self, tool: ToolRecord, arguments: Mapping[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        session = await self._live_session()
        direct = self._direct
        if log.isEnabledFor(logging.DEBUG):
            log.debug("upstream %s: calling %s [request %s]", self.name, tool.original_name, requestid.current())
        attributes = {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": tool.original_name,
            "gateway.upstream": self.name,
        }
        with tracing.span(f"tools/call {tool.original_name}", attributes, client=True):
            try:
                with self.client_side.in_flight.request():
                    if progress is not None or direct is None:
                        # The SDK's session writes the current span's trace context into `_meta`.
                        result = await session.call_tool(
                            tool.original_name, dict(arguments), progress_callback=progress
                        )
                    else:
                        calls, results = direct
                        result = results.parse(await calls.call(tool.original_name, dict(arguments), tracing.carrier()))
            except MCPError as error:
                raise _translate(self.name, error) from None
            if result.is_error:
                tracing.failed("tool_error")
        if tool.output_schema is not None and not result.is_error:
            self._outputs.check(tool.original_name, tool.output_schema, result)
        return result

    async def create_task(
        self, tool: ToolRecord, arguments: Mapping[str, Any], metadata: types.TaskMetadata
    ) -> types.Task | None:
        """Ask the server to run `tool` as a task; its task, or None when it runs no tasks."""
        session = await self._live_session()
        if not tasking.runs_tasks(session.server_capabilities):
            return None
        answer = await self.send_as_is(tasking.task_call(tool.original_name, arguments, metadata))
        return tasking.created_task(self.name, answer)

    async def send_as_is(self, request: types.Request[Any, Any]) -> dict[str, Any]:
        """Send a task-augmented call or a `tasks/*` request, which the SDK neither sends nor reads."""
        session = await self._live_session()
        try:
            with self.client_side.in_flight.request():
                return await send_as_is(session, request)
        except MCPError as error:
            raise _translate(self.name, error) from None

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read a resource by its original URI."""
        session = await self._live_session()
        try:
            with self.client_side.in_flight.request():
                return await session.read_resource(uri)
        except MCPError as error:
            raise _translate(self.name, error) from None

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        """Get a prompt by its original name."""
        session = await self._live_session()
        try:
            with self.client_side.in_flight.request():
                return await session.get_prompt(name, arguments)
        except MCPError as error:
            raise _translate(self.name, error) from None

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Forward a completion request whose reference already carries original names."""
        session = await self._live_session()
        try:
            argument = {"name": params.argument.name, "value": params.argument.value}
            return await session.complete(params.ref, argument, context_arguments=_context(params))
        except MCPError as error:
            raise _translate(self.name, error) from None

    async def subscribe(self, uri: str, subscribed: bool) -> None:
        """Subscribe to (or, with `subscribed` false, unsubscribe from) updates of a resource by its original URI."""
        session = await self._live_session()
        if not subscribed:
            self._subscribed.discard(uri)
        await self._send_subscription(session, uri, subscribed)
        if subscribed:
            self._subscribed.add(uri)

    def take_subscriptions(self, old: Upstream) -> None:
        """Hold the subscriptions `old` (the connection this one replaces) held: this one makes them
        once it connects."""
        self._subscribed |= old._subscribed

    async def _renew_subscriptions(self, session: ClientSession) -> None:
        """Subscribe a new connection to what the gateway's subscribers follow, and tell them each
        resource may have changed while the server was away."""
        for uri in sorted(self._subscribed):
            try:
                await self._send_subscription(session, uri, True)
            except GatewayError as error:
                log.warning("upstream %s: the subscription to %s was not renewed: %s", self.name, uri, error.message)
                continue
            params = types.ResourceUpdatedNotificationParams(uri=uri)
            await self.client_side.on_message(types.ResourceUpdatedNotification(params=params))

    async def _send_subscription(self, session: ClientSession, uri: str, subscribed: bool) -> None:
        try:
            # The typed request, not the SDK's helpers, which warn that the 2026 era drops subscriptions.
            request: types.ClientRequest = (
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
                if subscribed
                else types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
            )
            await session.send_request(request, types.EmptyResult)
        except MCPError as error:
            raise _translate(self.name, error) from None

    def supports_subscriptions(self) -> bool:
        """Whether the connected server takes resource subscriptions."""
        capabilities = self._session.server_capabilities if self._session is not None else None
        resources = capabilities.resources if capabilities is not None else None
        return bool(resources is not None and resources.subscribe)

    async def set_logging_level(self, level: types.LoggingLevel) -> None:
        """Ask the server to send log messages of `level` and above; a server without logging is left alone."""
        session = self._session
        capabilities = session.server_capabilities if session is not None else None
        if session is None or capabilities is None or capabilities.logging is None:
            return
        try:
            await session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)), types.EmptyResult
            )
        except MCPError as error:
            raise _translate(self.name, error) from None


def _context(params: types.CompleteRequestParams) -> dict[str, str] | None:
    context = params.context
    return dict(context.arguments) if context is not None and context.arguments else None


def _translate(server: str, error: MCPError) -> Exception:
    if error.error.code == types.CONNECTION_CLOSED:
        return UpstreamUnavailableError(f"Server '{server}' closed the connection")
    if error.error.code == RESULT_TOO_LARGE:
        return ToolExecutionError(
            f"Server '{server}': {error.error.message}",
            hint="Ask for less at a time: a narrower query, a smaller range, one page.",
        )
    return ProtocolError(f"Server '{server}' answered: {error.error.message}")


def _failure(error: BaseException) -> str:
    if isinstance(error, GatewayError):
        return error.message
    if isinstance(error, TimeoutError):
        return "timed out while connecting"
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_failure(inner) for inner in error.exceptions)
    return describe_error(error)
