"""The client side of a request in flight: what an upstream server may ask of, or tell, the client
whose request it is serving.

An upstream's sampling, elicitation and roots requests, and its log messages, belong to the client
session whose call caused them. The front door binds a `Downstream` around every request it sends
on (`bound`). The upstream connection finds it again when the server asks (`InFlight.caller`):
through the context variable, which the SDK carries from the task that sent a message to the
task that handles the answer on transports that pass the sender's context along (in memory,
streamable HTTP); else, on a transport that cannot (stdio, legacy SSE), as the only session with
calls in flight on that connection. When several sessions have calls in flight there and the
transport cannot tell them apart, nobody is asked: the server gets an error, never another
client's answer.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

import mcp_types as types

from gateway.clients.session import SessionContext

ClientRequest = types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest
ClientAnswer = (
    types.CreateMessageResult | types.CreateMessageResultWithTools | types.ElicitResult | types.ListRootsResult
)


class Downstream(Protocol):
    """The client session of one request the gateway is forwarding."""

    @property
    def session(self) -> SessionContext:
        """The session the request came in on."""
        ...

    @property
    def subject(self) -> str:
        """What the client asked for: the exposed tool name, resource URI or prompt name."""
        ...

    async def ask(self, server: str, request: ClientRequest) -> ClientAnswer | types.ErrorData:
        """Put an upstream's sampling, elicitation or roots request to the client; its answer, or an error."""
        ...

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """Pass on a log message the upstream sent while serving this request."""
        ...

    def hold_log(self, server: str, params: types.LoggingMessageNotificationParams) -> bool:
        """Take a log message the upstream sent while serving this request as it arrives, to pass
        on ahead of the request's answer; False leaves it to `log`, once it is handled."""
        ...


current: ContextVar[Downstream | None] = ContextVar("gateway_downstream", default=None)


class bound:
    """Make `downstream` the client of everything sent upstream inside the block (a class: it is
    entered once a call, and a generator's context manager costs several times as much)."""

    __slots__ = ("_downstream", "_token")

    def __init__(self, downstream: Downstream) -> None:
        self._downstream = downstream

    def __enter__(self) -> None:
        self._token = current.set(self._downstream)

    def __exit__(self, *exc_info: object) -> None:
        current.reset(self._token)


class InFlight:
    """The clients of one upstream connection's requests in flight."""

    def __init__(self) -> None:
        self._requests: list[Downstream] = []

    def request(self) -> _InFlightRequest:
        """Count the current client's request as in flight on this connection for the block."""
        return _InFlightRequest(self._requests)

    def caller(self) -> Downstream | None:
        """The client whose request caused what the server sends now, or None when it cannot be told."""
        downstream = current.get()
        if downstream is not None:
            return downstream
        sessions = {id(request.session) for request in self._requests}
        return self._requests[-1] if len(sessions) == 1 else None

    def sessions(self) -> list[SessionContext]:
        """The sessions with requests in flight."""
        return list({id(request.session): request.session for request in self._requests}.values())


class _InFlightRequest:
    """`InFlight.request`'s block (a class: it is entered once a call upstream)."""

    __slots__ = ("_downstream", "_requests")

    def __init__(self, requests: list[Downstream]) -> None:
        self._requests = requests

    def __enter__(self) -> None:
        self._downstream = current.get()
        if self._downstream is not None:
            self._requests.append(self._downstream)

    def __exit__(self, *exc_info: object) -> None:
        if self._downstream is not None:
            self._requests.remove(self._downstream)
