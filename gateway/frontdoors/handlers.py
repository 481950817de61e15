"""The MCP request handlers of the gateway's SDK server, one method per request kind: each finds
the client's session, asks the part of the gateway that answers, and turns gateway errors into
protocol errors (`mcpserver.build_server` registers them)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway.catalog.merged import page
from gateway.clients.downstream import bound
from gateway.clients.session import SessionContext
from gateway.clients.tasks import TASK_NOTE
from gateway.errors import ProtocolError, ToolError, clip
from gateway.frontdoors import tasks
from gateway.frontdoors.clientrequests import ClientOfRequest, RequestStream
from gateway.frontdoors.listingcache import ListingCache
from gateway.frontdoors.notifications import ProgressThrottle
from gateway.frontdoors.parked import ParkedCall
from gateway.pipeline.confirmation import ELICIT_NOTE, INPUT_NOTE, TOKEN_NOTE, InputRequest, shown_arguments
from gateway.runtime import requestid
from gateway.runtime.redaction import Redactor
from gateway.service import Gateway
from gateway.skills.metatools import STATE_TOOLS
from gateway.upstreams.grants import CONNECT_NOTE

log = logging.getLogger(__name__)

Context = ServerRequestContext[Any, Any]

APPROVAL_REQUEST = "approval"
APPROVAL_SCHEMA: types.ElicitRequestedSchema = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Run this call?"}},
    "required": ["approve"],
}


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
        if capabilities.elicitation.url is not None:

            async def connect_by_url(message: str, url: str) -> bool:
                answer = await ctx.session.elicit_url(message, url, secrets.token_urlsafe(16))
                return answer.action == "accept"

            notes[CONNECT_NOTE] = connect_by_url
    return notes


class protocol_errors:
    """Answer gateway errors outside a tool result (unknown names, bad cursors, failed reads) as
    JSON-RPC invalid-params errors without secrets; a tool call's own failures are results, never raised here.

    A class, not a generator context manager: every call enters it, and a generator's context
    manager costs several times as much to enter and leave.
    """

    __slots__ = ("_redact",)

    def __init__(self, redact: Redactor) -> None:
        self._redact = redact

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: object) -> None:
        if isinstance(error, ProtocolError | ToolError):
            raise MCPError(code=types.INVALID_PARAMS, message=self._redact(error.client_text())) from None


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


class SessionOf(Protocol):
    """Finds the session context of the client that sent a request (`mcpserver.session_of`)."""

    def __call__(self, ctx: Context, handle: str | None = None) -> SessionContext: ...


class Handlers:
    """The handler of every MCP request the gateway serves, each reading the part of `gateway`
    that answers it; `session_of` finds a request's session, list pages hold `page_size` items,
    and `clock` paces a call's progress notices."""

    def __init__(
        self, gateway: Gateway, session_of: SessionOf, *, page_size: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._session_of = session_of
        self._listing = gateway.listing
        self._calls = gateway.calls
        self._resources = gateway.resources
        self._passthrough = gateway.passthrough
        self._catalog = gateway.catalog
        self._visibility = gateway.visibility
        self._router = gateway.router
        self._redact = gateway.redact
        self._call_timeout = gateway.config.settings.call_timeout
        self._page_size = page_size
        self._clock = clock
        self.listings = ListingCache()
        """tools/list pages kept in wire form, the server's middleware (`listingcache`)."""
        # 2026-era calls waiting for the client's answer to their upstream's request, by request state.
        self._parked: dict[str, ParkedCall] = {}

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        """`tools/list`: a page of the tools the session may list (the first held for the servers)."""
        session = self._session_of(ctx)
        await self._listing.first_listing(session)
        view, stamp = self._listing.listing_view(session)
        if self.listings.holds((ctx.protocol_version, view, _cursor(params)), stamp):
            return types.ListToolsResult(tools=[])
        with protocol_errors(self._redact):
            tools, cursor = page(self._listing.listed_tools(session), _cursor(params), self._page_size, key=_name)
        return types.ListToolsResult(tools=[tool.to_mcp() for tool in tools], next_cursor=cursor)

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """`tools/call`: the call run through the pipeline; in the 2026 era parked while its upstream asks."""
        handle = (params.arguments or {}).get("handle") if params.name in STATE_TOOLS else None
        session = self._session_of(ctx, handle if isinstance(handle, str) and handle else None)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern and params.request_state is not None and params.request_state in self._parked:
            # The retry that answers what the call's upstream asked (see `parked.py`).
            call = self._parked.pop(params.request_state)
            if (call.session.principal or call.session.caller) != (session.principal or session.caller):
                raise MCPError(code=types.INVALID_PARAMS, message="Unknown request state")
            call.answer(params.input_responses)
            return await self._resume(call, ctx)
        progress: ProgressThrottle | None = None
        if ctx.meta is not None and ctx.meta.get("progress_token", ctx.meta.get("progressToken")) is not None:
            progress = ProgressThrottle(ctx.session.report_progress, self._clock)
        notes = client_notes(ctx)
        order = tasks.task_order(ctx, self._catalog, self._visibility, session, params)
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
            with requestid.bound() as request_id, protocol_errors(self._redact):
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("tools/call %s from %s [request %s]", clip(params.name), session.caller, request_id)
                result = await self._calls.call_tool(session, params.name, params.arguments, progress, notes)
            if progress is not None:
                await progress.flush()
            request = notes.get(INPUT_NOTE)
            if isinstance(request, InputRequest) and request.state is not None:
                return _ask_approval(params, request.state)
            return redacted_error(result, self._redact)

        if not modern:
            with bound(ClientOfRequest(ctx, session, params.name, self._passthrough)):
                return await run()
        wait = self._call_timeout
        call = ParkedCall(session, params.name, self._passthrough, ctx.session.client_capabilities, wait)
        assert self._router.group is not None
        call.start(self._router.group, run, lambda: self._parked.pop(call.token or "", None))
        return await self._resume(call, ctx)

    async def _resume(self, call: ParkedCall, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        result, asked = await call.next(RequestStream(ctx))
        if asked is None:
            answer: types.CallToolResult | types.InputRequiredResult = result
            return answer
        assert call.token is not None
        self._parked[call.token] = call
        return asked

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """`resources/list`: a page of the resources the session may see."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact):
            items, cursor = page(self._resources.listed(session), _cursor(params), self._page_size, key=_uri)
        return types.ListResourcesResult(resources=items, next_cursor=cursor)

    async def list_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        """`resources/templates/list`: a page of the resource templates the session may see."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact):
            items, cursor = page(self._resources.templates(session), _cursor(params), self._page_size, key=_template)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=cursor)

    async def read_resource(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        """`resources/read`: a skill file, or a server's resource under its original URI."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact), bound(ClientOfRequest(ctx, session, params.uri, self._passthrough)):
            return await self._resources.read(session, params.uri)

    async def list_prompts(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        """`prompts/list`: a page of the prompts the session may see."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact):
            items, cursor = page(self._resources.prompts(session), _cursor(params), self._page_size, key=_name)
        return types.ListPromptsResult(prompts=items, next_cursor=cursor)

    async def get_prompt(self, ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        """`prompts/get`: the prompt from its server, under its original name."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact), bound(ClientOfRequest(ctx, session, params.name, self._passthrough)):
            return await self._resources.get_prompt(session, params.name, params.arguments)

    async def complete(self, ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        """`completion/complete`: completions of a prompt's or a resource template's argument."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact):
            return await self._resources.complete(session, params)

    async def subscribe(self, ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """`resources/subscribe`: updates of a resource, from its server."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact):
            await self._resources.subscribe(session, params.uri, True)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        """`resources/unsubscribe`: no more updates of a resource."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact):
            await self._resources.subscribe(session, params.uri, False)
        return types.EmptyResult()

    async def set_level(self, ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """`logging/setLevel`: the session's log level, passed on to the servers it can see."""
        session = self._session_of(ctx)
        with protocol_errors(self._redact):
            await self._passthrough.set_logging_level(session, params.level)
        return types.EmptyResult()


def _cursor(params: types.PaginatedRequestParams | None) -> str | None:
    return params.cursor if params is not None else None


def _name(item: Any) -> str:
    return str(item.name)


def _uri(item: types.Resource) -> str:
    return item.uri


def _template(item: types.ResourceTemplate) -> str:
    return item.uri_template
