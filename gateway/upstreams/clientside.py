"""The client side of the gateway's session with one upstream: what it answers the server and passes on.

The gateway declares sampling, elicitation and roots to every upstream (a server may hide tools
from a client without them) and puts each such request to the client whose request caused it
(`gateway.clients.downstream`). A client that cannot be told, or does not support the request, makes
the server get the protocol's error at once. Roots depend on whose server it is: a shared server
gets the roots its entry configures (`roots`, none by default), whoever calls it, since it serves
every client at once and may keep what it was told (docs/decisions/0060-roots-of-shared-servers.md);
a session's own instance gets its client's roots during a request, else its workspace. Log
messages and resource updates go to the client of the request in flight, or, outside one, to
`notices`, which knows the sessions that can see the server; so do task status notifications,
which `notices` gives the session that created the task.

A log message is matched to its request as it arrives (`intercept`, before the session resolves
any response read after it): a client that takes log messages in order (a 2026-era call) gets it
then, so it goes out ahead of the answer of the request it belongs to, not after
(docs/decisions/0061-log-messages-of-a-2026-era-call.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import Context
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientRequestContext
from pydantic import ValidationError

from gateway.clients.downstream import ClientAnswer, ClientRequest, InFlight
from gateway.clients.session import SessionContext
from gateway.upstreams.directcalls import DirectCalls

Notice = types.LoggingMessageNotification | types.ResourceUpdatedNotification | types.TaskStatusNotification
NoticeHandler = Callable[[str, Notice], Awaitable[None]]
SessionNotices = Callable[[str, Notice, SessionContext | None], Awaitable[None]]
"""The gateway's handler of notices outside a request: the server, the notice, and the one session
whose own instance sent it (None for a shared server)."""

UNROUTABLE = (
    "the gateway cannot tell which of its clients this request is for "
    "(no call of a single client session is in flight on this server)"
)


async def _nobody(server: str, notice: Notice) -> None:
    """Where notices of a connection nobody listens to go."""


def workspace_roots(workspace: Path | None) -> types.ListRootsResult:
    """The roots of a server run in `workspace`: that directory, or none."""
    if workspace is None:
        return types.ListRootsResult(roots=[])
    root = types.Root.model_validate({"uri": workspace.resolve().as_uri(), "name": "workspace"})
    return types.ListRootsResult(roots=[root])


def configured_roots(uris: Sequence[str]) -> types.ListRootsResult:
    """The roots the operator gives a shared server: each directory's `file://` URI, named by its last part."""
    roots = [types.Root.model_validate({"uri": uri, "name": uri.rstrip("/").rsplit("/", 1)[-1]}) for uri in uris]
    return types.ListRootsResult(roots=roots)


class ClientSide:
    """The callbacks of one upstream's `ClientSession`, routing to the client of each request."""

    def __init__(
        self,
        server: str,
        *,
        notices: NoticeHandler | None = None,
        workspace: Path | None = None,
        roots: types.ListRootsResult | None = None,
    ) -> None:
        self.server = server
        self.in_flight = InFlight()
        self._notices = notices or _nobody
        self._workspace = workspace
        self._roots_given = roots
        """A shared server's roots, the same for every caller; None for a session's own instance."""

    def session_options(self) -> dict[str, Any]:
        """The `ClientSession` keyword arguments that declare the capabilities and install the callbacks."""
        return {
            "sampling_callback": self._sample,
            "elicitation_callback": self._elicit,
            "list_roots_callback": self._roots,
            "logging_callback": self._log,
            # Task status is no notification the SDK knows; a binding receives what it does not.
            "notification_bindings": [
                NotificationBinding(
                    method="notifications/tasks/status",
                    params_type=types.TaskStatusNotificationParams,
                    handler=self._task_status,
                )
            ],
        }

    def intercept(
        self, sender: Callable[[], Context | None], direct: DirectCalls, method: str, params: Mapping[str, Any] | None
    ) -> bool:
        """Take a notification as it arrives, before any response the server sent after it: a log
        message goes at once to the client of the request in flight (in `sender`'s context, where
        the transport carries the sending task's) when that client takes them in order, and is
        consumed. The connection's direct calls learn that the session took one more notification."""
        try:
            return method == "notifications/message" and self._hold_log(sender(), params)
        finally:
            direct.seen()

    def _hold_log(self, sender: Context | None, params: Mapping[str, Any] | None) -> bool:
        downstream = sender.run(self.in_flight.caller) if sender is not None else self.in_flight.caller()
        if downstream is None:
            return False
        try:
            parsed = types.LoggingMessageNotificationParams.model_validate(params or {})
        except ValidationError:
            return False  # the session's own check says what is wrong with it
        return downstream.hold_log(self.server, parsed)

    async def on_message(self, message: Any) -> None:
        """Route a resource update from the server to its subscribers."""
        if isinstance(message, types.ResourceUpdatedNotification):
            await self._notices(self.server, message)

    async def _ask(self, request: ClientRequest) -> ClientAnswer | types.ErrorData:
        downstream = self.in_flight.caller()
        if downstream is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{request.method} refused: {UNROUTABLE}")
        return await downstream.ask(self.server, request)

    async def _sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        answer = await self._ask(types.CreateMessageRequest(params=params))
        assert isinstance(answer, types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData)
        return answer

    async def _elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer = await self._ask(types.ElicitRequest(params=params))
        assert isinstance(answer, types.ElicitResult | types.ErrorData)
        return answer

    async def _roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        if self._roots_given is not None:
            return self._roots_given
        if self.in_flight.caller() is None:
            return workspace_roots(self._workspace)
        answer = await self._ask(types.ListRootsRequest())
        assert isinstance(answer, types.ListRootsResult | types.ErrorData)
        return answer

    async def _task_status(self, params: types.TaskStatusNotificationParams) -> None:
        await self._notices(self.server, types.TaskStatusNotification(params=params))

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        downstream = self.in_flight.caller()
        if downstream is not None:
            await downstream.log(self.server, params)
        else:
            await self._notices(self.server, types.LoggingMessageNotification(params=params))
