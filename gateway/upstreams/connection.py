"""Connections to upstream MCP servers: stdio processes, streamable HTTP and legacy SSE.

Each `Upstream` keeps one long-lived client session, lists what the server offers, follows
its list_changed notifications, and reconnects with exponential backoff when the
connection drops. It is also the `ToolSource` for that server's tools.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.catalog import SourceListing
from gateway.config.model import GatewaySettings, ServerConfig
from gateway.errors import GatewayError, ProtocolError, ToolExecutionError, UpstreamUnavailableError, describe_error
from gateway.pipeline.chain import ProgressFn
from gateway.tools import ToolRecord
from gateway.upstreams.children import server_parameters
from gateway.upstreams.stdio import RESULT_TOO_LARGE, stdio_transport

log = logging.getLogger(__name__)

MAX_DESCRIPTION_CHARS = 8000

_TAIL_BYTES = 4096
Streams = tuple[Any, Any]
TransportFactory = Callable[[], AbstractAsyncContextManager[Streams]]
ListingHandler = Callable[[SourceListing], Awaitable[None]]


class State(StrEnum):
    """Where an upstream connection stands."""

    CONNECTING = "connecting"
    READY = "ready"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
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
        }


class _WatchedStream:
    """A read stream that reports when the peer has gone (EOF or closed)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.closed = anyio.Event()

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.closed.set()
            raise

    async def aclose(self) -> None:
        self.closed.set()
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def transport_for(config: ServerConfig, data_dir: Path, errlog: TextIO, max_message_bytes: int) -> TransportFactory:
    """The client transport that reaches `config`'s server, reading no message over `max_message_bytes`.

    A stdio server is a child of `data_dir`'s gateway (it dies with it), and the gateway frames its
    messages itself, refusing an oversized result by name; over streamable HTTP the SDK's limit on
    one event of a response stream applies, and a call whose event is too large fails as a broken
    stream. Legacy SSE and JSON bodies are read whole.
    """
    if config.transport == "stdio":
        params = server_parameters(config, data_dir)
        return lambda: stdio_transport(params, errlog, max_message_bytes)
    assert config.url is not None
    url, headers = config.url, dict(config.headers)
    if config.transport == "sse":
        return lambda: sse_client(url, headers=headers)

    @asynccontextmanager
    async def http() -> AsyncIterator[Streams]:
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
            streamable_http_client(url, http_client=client, max_sse_event_size=max_message_bytes) as streams,
        ):
            yield streams

    return http


def records_for(config: ServerConfig, tools: list[types.Tool]) -> tuple[ToolRecord, ...]:
    """The server's tools as records, with the operator's per-server and per-tool settings applied."""
    records = []
    for tool in tools:
        settings = config.settings_for(tool.name)
        if not settings.enabled:
            continue
        record = ToolRecord.from_mcp(config.name, tool)
        records.append(
            ToolRecord(
                name=record.name,
                source=record.source,
                original_name=record.original_name,
                description=_bounded(record.description),
                input_schema=record.input_schema,
                output_schema=record.output_schema,
                title=record.title,
                annotations=record.annotations,
                risk=settings.risk or config.risk,
                layer=settings.layer or config.layer,
                tags=frozenset(config.tags) | frozenset(settings.tags),
                sandbox=_sandbox_kind(settings.sandbox or config.sandbox),
                timeout=settings.timeout or config.timeout,
            )
        )
    return tuple(records)


def _bounded(description: str) -> str:
    # A description is read by the model on every listing; one server must not flood its context.
    if len(description) <= MAX_DESCRIPTION_CHARS:
        return description
    return description[:MAX_DESCRIPTION_CHARS] + f" [... {len(description) - MAX_DESCRIPTION_CHARS} characters cut]"


def _sandbox_kind(sandbox: Any) -> str | None:
    return None if sandbox is None else str(sandbox.mode)


class Upstream:
    """One upstream server: a long-lived session, reconnected with backoff."""

    def __init__(
        self,
        config: ServerConfig,
        settings: GatewaySettings,
        on_listing: ListingHandler,
        *,
        log_dir: Path | None = None,
        transport: TransportFactory | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._settings = settings
        self._clock = clock
        self._on_listing = on_listing
        self._log_dir = log_dir
        self._log_start: int | None = None
        self._transport = transport
        self._session: ClientSession | None = None
        self._state = State.CONNECTING
        self._error: str | None = None
        self._tools = 0
        self._restarts = 0
        self.first_attempt = anyio.Event()
        self._refresh = anyio.Event()

    @property
    def name(self) -> str:
        """The server's configured name (also its catalog source name)."""
        return self.config.name

    def status(self) -> Status:
        """Where this upstream stands now."""
        return Status(
            self.name,
            self.config.transport,
            self._state,
            self._error,
            self._tools,
            self._restarts,
            self.config.required,
        )

    async def run(self) -> None:
        """Connect, serve until the connection drops, and reconnect with backoff; until cancelled."""
        try:
            await self._serve_forever()
        finally:
            self._state = State.STOPPED
            self._session = None

    async def _serve_forever(self) -> None:
        backoff = self._settings.restart_backoff_initial
        while True:
            started = self._clock()
            try:
                await self._connect_and_serve()
                self._error = "connection closed by the server" + self._stderr_tail()
            except Exception as error:  # any failure of one upstream must not stop the others
                self._error = _failure(error) + self._stderr_tail()
                log.warning("upstream %s: %s", self.name, self._error)
            finally:
                self._session = None
                self.first_attempt.set()
            if self._clock() - started > 10 * backoff:
                backoff = self._settings.restart_backoff_initial
            self._state = State.RECONNECTING if self._tools else State.FAILED
            self._restarts += 1
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self._settings.restart_backoff_max)

    async def _connect_and_serve(self) -> None:
        self._state = State.CONNECTING if not self._restarts else self._state
        async with AsyncExitStack() as stack:
            limit = self._settings.max_result_bytes
            data_dir = self._settings.data_dir
            factory = self._transport or transport_for(self.config, data_dir, self._errlog(stack), limit)
            read, write = await stack.enter_async_context(factory())
            watched = _WatchedStream(read)
            session = ClientSession(watched, write, message_handler=self._on_message)
            await stack.enter_async_context(session)
            timeout, step = self._settings.upstream_connect_timeout, "initialize"
            try:
                with anyio.fail_after(timeout):
                    await session.initialize()
                    step = "the first listing"
                    await self._publish(session)
            except TimeoutError:
                # Told at once: closing a server that hangs takes a few seconds more.
                self._error = f"timed out after {timeout:g} s during {step}"
                self._state = State.RECONNECTING if self._tools else State.FAILED
                self.first_attempt.set()
                raise UpstreamUnavailableError(self._error) from None
            self._session = session
            self._state = State.READY
            self._error = None
            self.first_attempt.set()
            log.info("upstream %s ready with %d tools", self.name, self._tools)
            async with anyio.create_task_group() as group:
                group.start_soon(self._follow_changes, session)
                await watched.closed.wait()
                group.cancel_scope.cancel()

    def _errlog(self, stack: AsyncExitStack) -> TextIO:
        if self._log_dir is None:
            return stack.enter_context(open(Path("/dev/null"), "w"))
        self._log_dir.mkdir(parents=True, exist_ok=True)
        # A server's raw stderr may hold its credentials: only the gateway's user may read it.
        path = self._log_dir / f"{self.name}.log"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(descriptor, 0o600)
        errlog: TextIO = stack.enter_context(os.fdopen(descriptor, "a"))
        self._log_start = errlog.tell()
        return errlog

    def _stderr_tail(self) -> str:
        """The last line this connection's process wrote to stderr: often the real reason it failed."""
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
        return f" (stderr: {lines[-1]}; full log: {path})" if lines else ""

    async def _publish(self, session: ClientSession) -> None:
        capabilities = session.server_capabilities
        tools = await _all_pages(_paged(session.list_tools), "tools")
        resources: list[types.Resource] = []
        templates: list[types.ResourceTemplate] = []
        prompts: list[types.Prompt] = []
        if capabilities is not None and capabilities.resources is not None:
            resources = await _all_pages(_paged(session.list_resources), "resources")
            templates = await _all_pages(_paged(session.list_resource_templates), "resource_templates")
        if capabilities is not None and capabilities.prompts is not None:
            prompts = await _all_pages(_paged(session.list_prompts), "prompts")
        records = records_for(self.config, tools)
        self._tools = len(records)
        await self._on_listing(
            SourceListing(
                source=self.name,
                namespace=self.config.namespace or self.name,
                tools=records,
                resources=tuple(resources),
                templates=tuple(templates),
                prompts=tuple(prompts),
                wanted_names={
                    original: settings.name for original, settings in self.config.tools.items() if settings.name
                },
            )
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(
            message,
            types.ToolListChangedNotification
            | types.ResourceListChangedNotification
            | types.PromptListChangedNotification,
        ):
            self._refresh.set()

    async def _follow_changes(self, session: ClientSession) -> None:
        while True:
            await self._refresh.wait()
            self._refresh = anyio.Event()
            try:
                await self._publish(session)
            except Exception as error:  # a failed refresh keeps the last listing
                log.warning("upstream %s: refresh failed: %s", self.name, _failure(error))

    def _live_session(self) -> ClientSession:
        if self._session is None:
            # The last error (often the server's stderr) is for operators: `/readyz`, `check` and the log.
            raise UpstreamUnavailableError(f"Server '{self.name}' is unavailable")
        return self._session

    async def call_tool(
        self, tool: ToolRecord, arguments: Mapping[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult:
        """Run `tool` on this server under its original name."""
        session = self._live_session()
        try:
            return await session.call_tool(tool.original_name, dict(arguments), progress_callback=progress)
        except MCPError as error:
            raise _translate(self.name, error) from None

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read a resource by its original URI."""
        try:
            return await self._live_session().read_resource(uri)
        except MCPError as error:
            raise _translate(self.name, error) from None

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        """Get a prompt by its original name."""
        try:
            return await self._live_session().get_prompt(name, arguments)
        except MCPError as error:
            raise _translate(self.name, error) from None

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Forward a completion request whose reference already carries original names."""
        session = self._live_session()
        try:
            argument = {"name": params.argument.name, "value": params.argument.value}
            return await session.complete(params.ref, argument, context_arguments=_context(params))
        except MCPError as error:
            raise _translate(self.name, error) from None


def _context(params: types.CompleteRequestParams) -> dict[str, str] | None:
    context = params.context
    return dict(context.arguments) if context is not None and context.arguments else None


async def _all_pages(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):
        result = await fetch(cursor)
        items.extend(getattr(result, field))
        cursor = result.next_cursor
        if not cursor:
            return items
    raise ToolExecutionError(f"server lists more than 1000 pages of {field}")


def _paged(method: Callable[..., Awaitable[Any]]) -> Callable[[str | None], Awaitable[Any]]:
    def fetch(cursor: str | None) -> Awaitable[Any]:
        return method(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)

    return fetch


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
