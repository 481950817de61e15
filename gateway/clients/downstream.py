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

from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def bound(downstream: Downstream) -> Iterator[None]:
    """Make `downstream` the client of everything sent upstream inside the block."""
    token = current.set(downstream)
    try:
        yield
    finally:
        current.reset(token)


class InFlight:
    """The clients of one upstream connection's requests in flight."""

    def __init__(self) -> None:
        self._requests: list[Downstream] = []

    @contextmanager
    def request(self) -> Iterator[None]:
        """Count the current client's request as in flight on this connection for the block."""
        downstream = current.get()
        if downstream is None:
            yield
            return
        self._requests.append(downstream)
        try:
            yield
        finally:
            self._requests.remove(downstream)

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
