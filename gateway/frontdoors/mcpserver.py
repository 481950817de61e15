"""The MCP front door: an SDK `Server` whose handlers route every request to the `Gateway`.

Both protocol eras are served by the SDK; this module only maps requests to the gateway,
finds the client's session context, and turns gateway errors into protocol errors.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
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
from gateway.catalog.merged import page
from gateway.clients.downstream import bound
from gateway.clients.session import SessionContext, Transport
from gateway.clients.tasks import TASK_NOTE
from gateway.errors import ProtocolError, ToolError, clip
from gateway.frontdoors import tasks
from gateway.frontdoors.clientrequests import ClientOfRequest, RequestStream
from gateway.frontdoors.listen import listen_handler
from gateway.frontdoors.listingcache import ListingCache
from gateway.frontdoors.notifications import Coalescer, ListChanges, ListKind, Lists, ProgressThrottle
from gateway.frontdoors.parked import ParkedCall
from gateway.frontdoors.requestspans import RequestSpans
from gateway.pipeline.confirmation import ELICIT_NOTE, INPUT_NOTE, TOKEN_NOTE, InputRequest, shown_arguments
from gateway.runtime import requestid
from gateway.runtime.redaction import Redactor
from gateway.service import Gateway
from gateway.skills.metatools import STATE_TOOLS

log = logging.getLogger(__name__)

SESSION_KEY = "gateway.clients.session"
CONNECTION_KEY = "gateway.connection"
NOTICES_KEY = "gateway.list-changes"
DEFAULT_HANDLE = "default"
APPROVAL_REQUEST = "approval"
APPROVAL_SCHEMA: types.ElicitRequestedSchema = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Run this call?"}},
    "required": ["approve"],
}
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


def _connection(ctx: Context) -> Connection:
    # The SDK keeps per-connection state and teardown on the Connection, which it only
    # reaches handlers through the request's session proxy.
    connection: Connection = ctx.session._connection
    return connection


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
    connection = _connection(ctx)
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


def _approves(answer: object) -> bool:
    """Whether a person's answer to the approval form approves the call."""
    return (
        isinstance(answer, types.ElicitResult)
        and answer.action == "accept"
        and bool((answer.content or {}).get("approve"))
    )


async def _declined(message: str, summary: dict[str, Any]) -> bool:
    return False


def _ask_approval(params: types.CallToolRequestParams, token: str) -> types.InputRequiredResult:
    """The stateless era's way to ask the person: the client elicits, then retries the call with
    the answer; the token travels as the request state, bound to this exact call."""
    message = f"Allow '{params.name}' to run with these arguments?\n{shown_arguments(params.arguments or {})}"
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
    )
    return types.InputRequiredResult(input_requests={APPROVAL_REQUEST: request}, request_state=token)


def client_notes(ctx: Context) -> dict[str, Any]:
    """What the pipeline may use of this client: a way to ask its user, if it has one.

    Nothing the request carries (arguments, `_meta`) is taken as a confirmation: only a person's
    answer through elicitation, or a person deciding a parked approval, confirms a call.
    """
    notes: dict[str, Any] = {}
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return notes
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        notes[INPUT_NOTE] = InputRequest()
    elif ctx.session.can_send_request:

        async def elicit(message: str, summary: dict[str, Any]) -> bool:
            return _approves(await ctx.session.elicit_form(message, APPROVAL_SCHEMA))

        notes[ELICIT_NOTE] = elicit
    return notes


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


@contextmanager
def protocol_errors(redact: Redactor) -> Iterator[None]:
    """Answer gateway errors outside a tool result (unknown names, bad cursors, failed reads) as
    JSON-RPC invalid-params errors without secrets; a tool call's own failures are results, never raised here."""
    try:
        yield
    except (ProtocolError, ToolError) as error:
        raise MCPError(code=types.INVALID_PARAMS, message=redact(error.client_text())) from None


def redacted_error(result: types.CallToolResult, redact: Redactor) -> types.CallToolResult:
    """A failed call's result as the client sees it: its texts without secrets (a server's error
    may quote its own credentials). Successful results are the tool's data and go back as they are."""
    if not result.is_error:
        return result
    content = [
        block.model_copy(update={"text": redact(block.text)}) if isinstance(block, types.TextContent) else block
        for block in result.content
    ]
    return result.model_copy(update={"content": content})


def build_server(
    gateway: Gateway, *, page_size: int = 500, clock: Callable[[], float] = time.monotonic
) -> GatewayServer:
    """The MCP server that fronts `gateway`; `clock` paces the notifications it sends (`notifications`)."""
    # 2026-era calls waiting for the client's answer to their upstream's request, by request state.
    parked: dict[str, ParkedCall] = {}
    listings = ListingCache()

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        session = session_of(gateway, ctx)
        await gateway.listing.first_listing(session)
        view, stamp = gateway.listing.listing_view(session)
        if listings.holds((ctx.protocol_version, view, _cursor(params)), stamp):
            return types.ListToolsResult(tools=[])
        with protocol_errors(gateway.redact):
            tools, cursor = page(gateway.listing.listed_tools(session), _cursor(params), page_size, key=_name)
        return types.ListToolsResult(tools=[tool.to_mcp() for tool in tools], next_cursor=cursor)

    async def call_tool(
        ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        handle = (params.arguments or {}).get("handle") if params.name in STATE_TOOLS else None
        session = session_of(gateway, ctx, handle if isinstance(handle, str) and handle else None)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern and params.request_state is not None and params.request_state in parked:
            # The retry that answers what the call's upstream asked (see `parked.py`).
            call = parked.pop(params.request_state)
            if (call.session.principal or call.session.caller) != (session.principal or session.caller):
                raise MCPError(code=types.INVALID_PARAMS, message="Unknown request state")
            call.answer(params.input_responses)
            return await _resume(call, ctx)
        progress: ProgressThrottle | None = None
        if ctx.meta is not None and ctx.meta.get("progress_token", ctx.meta.get("progressToken")) is not None:
            progress = ProgressThrottle(ctx.session.report_progress, clock)
        notes = client_notes(ctx)
        order = tasks.task_order(ctx, gateway, session, params)
        if order is not None:
            notes[TASK_NOTE] = order
        if modern and params.request_state is not None:
            # The retry after the person answered the approval the gateway asked for below.
            if _approves((params.input_responses or {}).get(APPROVAL_REQUEST)):
                notes[TOKEN_NOTE] = params.request_state
            else:
                notes[ELICIT_NOTE] = _declined

        async def run() -> types.CallToolResult | types.InputRequiredResult:
            # One id links this call's log lines, its upstream call and its audit row.
            with requestid.bound() as request_id, protocol_errors(gateway.redact):
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("tools/call %s from %s [request %s]", clip(params.name), session.caller, request_id)
                result = await gateway.calls.call_tool(session, params.name, params.arguments, progress, notes)
            if progress is not None:
                await progress.flush()
            request = notes.get(INPUT_NOTE)
            if isinstance(request, InputRequest) and request.state is not None:
                return _ask_approval(params, request.state)
            return redacted_error(result, gateway.redact)

        if not modern:
            with bound(ClientOfRequest(ctx, session, params.name, gateway.passthrough)):
                return await run()
        wait = gateway.config.settings.call_timeout
        call = ParkedCall(session, params.name, gateway.passthrough, ctx.session.client_capabilities, wait)
        assert gateway.router.group is not None
        call.start(gateway.router.group, run, lambda: parked.pop(call.token or "", None))
        return await _resume(call, ctx)

    async def _resume(call: ParkedCall, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        result, asked = await call.next(RequestStream(ctx))
        if asked is None:
            answer: types.CallToolResult | types.InputRequiredResult = result
            return answer
        assert call.token is not None
        parked[call.token] = call
        return asked

    async def list_resources(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact):
            items, cursor = page(gateway.resources.listed(session), _cursor(params), page_size, key=_uri)
        return types.ListResourcesResult(resources=items, next_cursor=cursor)

    async def list_templates(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact):
            items, cursor = page(gateway.resources.templates(session), _cursor(params), page_size, key=_template)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=cursor)

    async def read_resource(ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact), bound(ClientOfRequest(ctx, session, params.uri, gateway.passthrough)):
            return await gateway.resources.read(session, params.uri)

    async def list_prompts(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact):
            items, cursor = page(gateway.resources.prompts(session), _cursor(params), page_size, key=_name)
        return types.ListPromptsResult(prompts=items, next_cursor=cursor)

    async def get_prompt(ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact), bound(ClientOfRequest(ctx, session, params.name, gateway.passthrough)):
            return await gateway.resources.get_prompt(session, params.name, params.arguments)

    async def complete(ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact):
            return await gateway.resources.complete(session, params)

    async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact):
            await gateway.resources.subscribe(session, params.uri, True)
        return types.EmptyResult()

    async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact):
            await gateway.resources.subscribe(session, params.uri, False)
        return types.EmptyResult()

    async def set_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        session = session_of(gateway, ctx)
        with protocol_errors(gateway.redact):
            await gateway.passthrough.set_logging_level(session, params.level)
        return types.EmptyResult()

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
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_subscriptions_listen=listen_handler(gateway.resources, bus, lambda ctx: session_of(gateway, ctx)),
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_set_logging_level=set_level,
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
    server.middleware.append(listings)

    interval = gateway.config.settings.notify_coalesce_ms / 1000

    async def initialized(ctx: Context, params: types.NotificationParams) -> None:
        # Known from its handshake, a client that has sent no request yet is still told of list
        # changes, from the lists it can see now on.
        session = session_of(gateway, ctx)
        connection = session.state.get(CONNECTION_KEY)
        if not isinstance(connection, Connection) or not connection.has_standalone_channel:
            return

        async def send(kind: ListKind) -> None:
            # A notice held back for its interval may come due after the session ended: its client
            # may be closing its streams, and would take the notice for a broken message.
            if gateway.sessions.get(session.id) is session:
                await SENDERS[kind](connection)

        session.state[NOTICES_KEY] = ListChanges(lambda: seen_lists(gateway, session), send, interval, clock)

    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    published = [published_lists(gateway)]

    async def notify() -> None:
        lists = published_lists(gateway)
        for kind in lists.changed(published[0]):
            await bus.publish(BUS_EVENTS[kind]())
        published[0] = lists
        await tell_lists_changed(gateway.sessions.live())

    # A storm of upstream list changes makes at most one round of telling per interval.
    changed = Coalescer(notify, interval, clock)

    async def session_changed(session: SessionContext) -> None:
        await tell_lists_changed([session])

    async def group_changed(name: str) -> None:
        await tell_lists_changed([context for context in gateway.sessions.live() if context.group == name])

    async def deliver(session: SessionContext, notice: Any) -> None:
        # Outside a request a notice can only reach a handshake-era client with its stream open.
        connection = session.state.get(CONNECTION_KEY)
        if isinstance(connection, Connection) and connection.has_standalone_channel:
            data = notice.model_dump(by_alias=True, mode="json", exclude_none=True)
            await connection.notify(data["method"], data.get("params"))

    gateway.passthrough.deliver = deliver
    gateway.live_catalog.on_change(changed)
    gateway.groups.on_change(group_changed)
    gateway.sessions.on_change(session_changed)
    return server


def _cursor(params: types.PaginatedRequestParams | None) -> str | None:
    return params.cursor if params is not None else None


def _name(item: Any) -> str:
    return str(item.name)


def _uri(item: types.Resource) -> str:
    return item.uri


def _template(item: types.ResourceTemplate) -> str:
    return item.uri_template
