"""The client of one front-door request, as an upstream sees it: its requests for the user put to
that client, its log messages sent on that request's stream.

A handshake-era client is asked over the back channel of the request being served (on HTTP, the
response stream of that POST). What the client did not declare (sampling, elicitation in the
mode asked, roots) gets the error an SDK client without it answers, at once. Roots a client does
not give are its session's workspace, if it has one. A 2026-era request has no back channel:
see `gateway.frontdoors.parked` for how its input requests travel.

Log messages ride the request's own stream in both eras (`RequestStream`). In the handshake era
every level may go (the session's `logging/setLevel` filters them in `PassThrough.log`); in the
2026-07-28 era only a request whose `_meta` carries a log level (`io.modelcontextprotocol/logLevel`)
takes them, at that level and above, as that era requires.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata

from gateway.clients.downstream import ClientAnswer, ClientRequest
from gateway.clients.session import SessionContext
from gateway.clients.tasks import TaskEntry, as_gateway_s
from gateway.serving.passthrough import PassThrough
from gateway.upstreams.clientside import workspace_roots
from gateway.upstreams.workspaces import workspace_of

Context = ServerRequestContext[Any, Any]
LogParams = types.LoggingMessageNotificationParams


def unsupported(request: ClientRequest, capabilities: types.ClientCapabilities | None) -> types.ErrorData | None:
    """The error for a request the client did not declare it supports, else None."""
    declared = capabilities or types.ClientCapabilities()
    if isinstance(request, types.CreateMessageRequest) and declared.sampling is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="Sampling not supported")
    if isinstance(request, types.ElicitRequest):
        elicitation = declared.elicitation
        url = isinstance(request.params, types.ElicitRequestURLParams)
        if elicitation is None or (url and elicitation.url is None):
            return types.ErrorData(code=types.INVALID_REQUEST, message="Elicitation not supported")
    return None


def answer_type(request: ClientRequest) -> type[ClientAnswer]:
    """What the client answers to `request`."""
    if isinstance(request, types.CreateMessageRequest):
        tools = request.params.tools is not None or request.params.tool_choice is not None
        return types.CreateMessageResultWithTools if tools else types.CreateMessageResult
    if isinstance(request, types.ElicitRequest):
        return types.ElicitResult
    return types.ListRootsResult


class RequestStream:
    """The stream of one front-door request, as the notices an upstream sends during it see it."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._levels = allowed_log_levels(ctx.protocol_version, ctx.meta)

    def takes(self, level: types.LoggingLevel) -> bool:
        """Whether the request's client takes log messages of `level`."""
        return level in self._levels

    async def log(self, passthrough: PassThrough, session: SessionContext, server: str, params: LogParams) -> None:
        """Pass an upstream's log message on, if the client takes its level (before the flood limit
        counts it), within the session's level and the flood limit."""
        if self.takes(params.level):
            await passthrough.log(session, server, params, self._send)

    async def _send(self, session: SessionContext, notice: Any) -> None:
        if isinstance(notice, types.LoggingMessageNotification) and not self.takes(notice.params.level):
            return
        await self._ctx.session.send_notification(notice, related_request_id=self._ctx.request_id)


class ClientOfRequest:
    """The `Downstream` of a handshake-era front-door request."""

    def __init__(
        self,
        ctx: Context,
        session: SessionContext,
        subject: str,
        passthrough: PassThrough,
        task: TaskEntry | None = None,
    ) -> None:
        self._ctx = ctx
        self._session = session
        self._subject = subject
        self._passthrough = passthrough
        self._task = task
        """The task whose result the request waits for: its server's requests name it by the gateway's id."""
        self._stream = RequestStream(ctx)

    @property
    def session(self) -> SessionContext:
        """The session the request came in on."""
        return self._session

    @property
    def subject(self) -> str:
        """The exposed name or URI the client asked for."""
        return self._subject

    async def ask(self, server: str, request: ClientRequest) -> ClientAnswer | types.ErrorData:
        """Put the upstream's request to this client, within its budget; its answer or an error."""
        capabilities = self._ctx.session.client_capabilities
        if isinstance(request, types.ListRootsRequest) and (capabilities is None or capabilities.roots is None):
            return workspace_roots(workspace_of(self._session))
        refusal = unsupported(request, capabilities) or await self._passthrough.admit(self, server, request)
        if refusal is not None:
            return refusal
        params = request.params
        meta = None if self._task is None or params is None else as_gateway_s(params.meta, self._task)
        if params is not None and meta is not None:
            request = request.model_copy(update={"params": params.model_copy(update={"meta": meta})})
        metadata = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        try:
            answer: ClientAnswer = await self._ctx.session.send_request(
                request, answer_type(request), metadata=metadata
            )
        except MCPError as error:
            return error.error
        except NoBackChannelError:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{request.method}: the client cannot be asked")
        return answer

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """Send the log message on this request's stream, within the session's level and flood limit."""
        await self._stream.log(self._passthrough, self._session, server, params)

    def hold_log(self, server: str, params: types.LoggingMessageNotificationParams) -> bool:
        """Log messages go through `log`: the request's stream takes them at once."""
        return False
