"""The MCP front door: an SDK `Server` whose handlers (`handlers.Handlers`) route every request to
the part of the `Gateway` that answers it.

Both protocol eras are served by the SDK; this module builds the server, finds the client's
session context of each request, and tells clients when their lists change (`ListNotices`).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from importlib.metadata import version as package_version
from typing import Any
from uuid import uuid4

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Scope

from gateway.auth.identity import Identity, caller_key, handle_key
from gateway.auth.middleware import current_identity
from gateway.clients.session import SessionContext, Transport
from gateway.frontdoors import tasks
from gateway.frontdoors.handlers import Handlers, redacted_error
from gateway.frontdoors.listen import listen_handler
from gateway.frontdoors.notifications import Coalescer, ListChanges, ListKind, Lists
from gateway.frontdoors.requestspans import RequestSpans
from gateway.frontdoors.sdkserver import connection_of
from gateway.service import Gateway

log = logging.getLogger(__name__)

SESSION_KEY = "gateway.clients.session"
CONNECTION_KEY = "gateway.connection"
NOTICES_KEY = "gateway.list-changes"
DEFAULT_HANDLE = "default"
GROUP_STATE = "group"
Context = ServerRequestContext[Any, Any]

SENDERS: dict[ListKind, Callable[[Connection], Awaitable[None]]] = {
    "tools": Connection.send_tool_list_changed,
    "prompts": Connection.send_prompt_list_changed,
    "resources": Connection.send_resource_list_changed,
}
BUS_EVENTS: dict[ListKind, Callable[[], ServerEvent]] = {
    "tools": ToolsListChanged,
    "prompts": PromptsListChanged,
    "resources": ResourcesListChanged,
}

# For the SDK's check of 2026-era `Mcp-Param-*` headers, which runs in the request's task with the
# tool name alone; handlers read the group from the request's state instead.
_GROUP: ContextVar[str | None] = ContextVar("gateway.group", default=None)


@contextmanager
def group_endpoint(scope: Scope, group: str) -> Iterator[None]:
    """Serve the HTTP request `scope` as one to the endpoint of tool group `group` (`/mcp/g/<group>`)."""
    scope.setdefault("state", {})[GROUP_STATE] = group
    token = _GROUP.set(group)
    try:
        yield
    finally:
        _GROUP.reset(token)


class GatewayServer(Server[Any]):
    """The SDK server, advertising list_changed for tools, prompts and resources."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """Initialization options whose capabilities say the lists can change."""
        changes = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(
            notification_options or changes, experimental_capabilities, extensions
        )

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        """The SDK's capabilities, and tasks in the handshake era once they are served (`tasks.install`)."""
        capabilities = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version not in MODERN_PROTOCOL_VERSIONS and self.get_request_handler("tasks/get") is not None:
            capabilities.tasks = tasks.CAPABILITY
        return capabilities


def session_connection(gateway: Gateway, session_id: str) -> Connection | None:
    """The SDK connection of the HTTP session `session_id`, once a request of it reached the gateway."""
    context = gateway.sessions.get(session_id)
    connection = context.state.get(CONNECTION_KEY) if context is not None else None
    return connection if isinstance(connection, Connection) and connection.session_id == session_id else None


def identity_of(gateway: Gateway, ctx: Context) -> Identity:
    """Who sent this request: what the HTTP auth middleware found, else the local (stdio) identity."""
    request = ctx.request
    identity = getattr(getattr(request, "state", None), "identity", None)
    return identity if isinstance(identity, Identity) else gateway.local_identity


def group_of(gateway: Gateway, ctx: Context) -> str | None:
    """The tool group whose endpoint this request reached: the URL's on HTTP, else the local (stdio) one."""
    state = getattr(ctx.request, "state", None)
    if state is None:
        return gateway.local_group
    group = getattr(state, GROUP_STATE, None)
    return group if isinstance(group, str) else None


def session_of(gateway: Gateway, ctx: Context, handle: str | None = None) -> SessionContext:
    """The session context of the client that sent this request.

    In the stateless era there is no session: state keys on the caller and a handle the caller
    passes back (so one caller can keep several conversations apart), except for an anonymous
    caller, who cannot be told from another and so keeps nothing beyond its request. A session
    belongs to the caller who opened it; anyone else is told it does not exist. The group is the
    one of the endpoint the session was opened on (the HTTP edge keeps a session to its endpoint),
    and part of a stateless-era caller's key.
    """
    identity = identity_of(gateway, ctx)
    group = group_of(gateway, ctx)
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    if modern and identity.method != "anonymous":
        handle = handle or DEFAULT_HANDLE
        return gateway.sessions.open(handle_key(identity, handle, group), identity, "stateless", handle, group)
    connection = connection_of(ctx)
    context: SessionContext | None = connection.state.get(SESSION_KEY)
    if context is None:
        # A connection without an SDK session id (stdio, or one stateless-era request) gets a fresh
        # random one: a reused id would hand a later anonymous request an earlier one's workspace.
        session_id = connection.session_id or uuid4().hex
        transport: Transport = "stateless" if modern else "http" if connection.session_id else "stdio"
        context = gateway.sessions.open(session_id, identity, transport, group=group)
        context.state[CONNECTION_KEY] = connection
        connection.state[SESSION_KEY] = context
        connection.exit_stack.push_async_callback(gateway.sessions.close, session_id)
    elif caller_key(identity, context.id) != context.caller:
        raise MCPError(code=types.INVALID_REQUEST, message="Session not found")
    else:
        gateway.sessions.open(context.id, identity, context.transport)
    return context


def seen_lists(gateway: Gateway, session: SessionContext) -> Lists:
    """The tools, prompts and resources (with templates) `session` sees now."""
    resources = gateway.resources
    listed = (resources.listed(session), resources.templates(session))
    return Lists(gateway.listing.listed_tools(session), resources.prompts(session), listed)


def published_lists(gateway: Gateway) -> Lists:
    """What decides the lists of 2026-era clients, which are told through one stream, not told apart."""
    visibility = (gateway.policy.roles, gateway.groups.all())
    catalog = gateway.catalog
    return Lists(
        (catalog.tools, gateway.skills.names, visibility),
        (catalog.prompts, visibility),
        (catalog.resources, catalog.templates, gateway.skills.names, visibility),
    )


async def tell_lists_changed(sessions: Iterable[SessionContext]) -> None:
    """Tell each of `sessions` of its lists that changed, each session in a task of its own: one
    waiting out its interval or slow to take a message holds up no other."""

    async def tell(notices: ListChanges) -> None:
        try:
            await notices()
        except Exception:  # a client that went away must not stop the others being told
            log.debug("list_changed not delivered", exc_info=True)

    async with anyio.create_task_group() as group:
        for context in sessions:
            notices = context.state.get(NOTICES_KEY)
            if isinstance(notices, ListChanges):
                group.start_soon(tell, notices)


class ListNotices:
    """What clients are told of their lists and of notices outside a request: a session of its
    lists that changed (from its handshake on), 2026-era clients through the server's subscription
    `bus`, which does not tell them apart, a handshake-era client an upstream's notice; `clock`
    paces the telling (`notifications`)."""

    def __init__(self, gateway: Gateway, bus: InMemorySubscriptionBus, clock: Callable[[], float]) -> None:
        self._gateway = gateway
        self._bus = bus
        self._clock = clock
        self._interval = gateway.config.settings.notify_coalesce_ms / 1000
        self._published = published_lists(gateway)
        # A storm of upstream list changes makes at most one round of telling per interval.
        self.changed = Coalescer(self.notify, self._interval, clock)
        """Told of each change of the catalog."""

    async def initialized(self, ctx: Context, params: types.NotificationParams) -> None:
        """A client finished its handshake (`notifications/initialized`)."""
        # Known from its handshake, a client that has sent no request yet is still told of list
        # changes, from the lists it can see now on.
        gateway = self._gateway
        session = session_of(gateway, ctx)
        connection = session.state.get(CONNECTION_KEY)
        if not isinstance(connection, Connection) or not connection.has_standalone_channel:
            return

        async def send(kind: ListKind) -> None:
            # A notice held back for its interval may come due after the session ended: its client
            # may be closing its streams, and would take the notice for a broken message.
            if gateway.sessions.get(session.id) is session:
                await SENDERS[kind](connection)

        notices = ListChanges(lambda: seen_lists(gateway, session), send, self._interval, self._clock)
        session.state[NOTICES_KEY] = notices

    async def notify(self) -> None:
        """Tell every client of the lists that changed as it sees them."""
        lists = published_lists(self._gateway)
        for kind in lists.changed(self._published):
            await self._bus.publish(BUS_EVENTS[kind]())
        self._published = lists
        await tell_lists_changed(self._gateway.sessions.live())

    async def session_changed(self, session: SessionContext) -> None:
        """Tell `session` of its own lists that changed (skills loaded or left)."""
        await tell_lists_changed([session])

    async def group_changed(self, name: str) -> None:
        """Tell the sessions on the endpoint of group `name` that their lists changed."""
        await tell_lists_changed([context for context in self._gateway.sessions.live() if context.group == name])

    async def deliver(self, session: SessionContext, notice: Any) -> None:
        """Send `notice`, which an upstream sent outside a request, to `session`'s client."""
        # Outside a request a notice can only reach a handshake-era client with its stream open.
        connection = session.state.get(CONNECTION_KEY)
        if isinstance(connection, Connection) and connection.has_standalone_channel:
            data = notice.model_dump(by_alias=True, mode="json", exclude_none=True)
            await connection.notify(data["method"], data.get("params"))


def build_server(
    gateway: Gateway, *, page_size: int = 500, clock: Callable[[], float] = time.monotonic
) -> GatewayServer:
    """The MCP server that fronts `gateway`; `clock` paces the notifications it sends (`notifications`)."""
    handlers = Handlers(gateway, partial(session_of, gateway), page_size=page_size, clock=clock)

    def input_schema(name: str) -> Mapping[str, Any] | None:
        # The SDK asks before dispatch, in the HTTP request's task, with the name alone.
        identity = current_identity()
        if identity is None:
            return gateway.listing.input_schema(name, gateway.local_identity.role, gateway.local_group)
        return gateway.listing.input_schema(name, identity.role, _GROUP.get())

    bus = InMemorySubscriptionBus()
    # Logging, subscriptions and roots are deprecated in the 2026 era, and still what handshake-era
    # clients use; the SDK warns once, at construction.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = GatewayServer(
            "mcp-gateway",
            version=package_version("mcp-gateway"),
            instructions="One endpoint for every tool of this organisation. Tool names are <server>__<tool>.",
            on_list_tools=handlers.list_tools,
            on_call_tool=handlers.call_tool,
            on_list_resources=handlers.list_resources,
            on_list_resource_templates=handlers.list_templates,
            on_read_resource=handlers.read_resource,
            on_list_prompts=handlers.list_prompts,
            on_get_prompt=handlers.get_prompt,
            on_completion=handlers.complete,
            on_subscriptions_listen=listen_handler(gateway.resources, bus, lambda ctx: session_of(gateway, ctx)),
            on_subscribe_resource=handlers.subscribe,
            on_unsubscribe_resource=handlers.unsubscribe,
            on_set_logging_level=handlers.set_level,
            get_tool_input_schema=input_schema,
        )

    # The SDK's default middleware opens a tracing span per request, a measurable cost per call
    # that buys nothing until a tracer is installed. The listing cache serves tools/list pages.
    server.middleware.clear()
    if gateway.tracing.enabled:
        server.middleware.append(RequestSpans(gateway.tracing))
    tasks.install(
        server, gateway, lambda ctx: session_of(gateway, ctx), lambda r: redacted_error(r, gateway.redact), page_size
    )
    server.middleware.append(handlers.listings)

    notices = ListNotices(gateway, bus, clock)
    server.add_notification_handler("notifications/initialized", types.NotificationParams, notices.initialized)
    gateway.passthrough.deliver = notices.deliver
    gateway.live_catalog.on_change(notices.changed)
    gateway.groups.on_change(notices.group_changed)
    gateway.sessions.on_change(notices.session_changed)
    return server
