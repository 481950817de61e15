"""A 2026-era call whose upstream asks the client something, mapped onto the input-required flow.

The 2026-07-28 era has no server-to-client requests: a server answers `InputRequiredResult`
with the questions and an opaque `request_state`, and the client retries the call with its
answers. The gateway's upstream sessions speak the handshake era, where the server waits
mid-call for the answer. So a 2026-era call runs in the gateway's task group (`ParkedCall`);
when its upstream asks, the front door answers the client with the question and a fresh token
as `request_state`, and the call waits, parked, for the retry that carries the answer. An
answer not given within `wait` seconds is an error to the server; the call then ends as it will.

The upstream's log messages go on the stream of the request that waits for the call at the time
(the first one, or a retry), as that era carries them; one sent while the call waits for a retry
has no request to go on, and is dropped.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from gateway.clients.downstream import ClientAnswer, ClientRequest, bound
from gateway.clients.session import SessionContext
from gateway.frontdoors.clientrequests import RequestStream, unsupported
from gateway.serving.passthrough import PassThrough
from gateway.upstreams.clientside import workspace_roots
from gateway.upstreams.workspaces import workspace_of

QUESTION = "upstream"


@dataclass
class _Question:
    request: ClientRequest
    answered: anyio.Event
    answer: ClientAnswer | types.ErrorData | None = None


class ParkedCall:
    """One 2026-era call running in the background; the `Downstream` of its upstream requests."""

    def __init__(
        self,
        session: SessionContext,
        subject: str,
        passthrough: PassThrough,
        capabilities: types.ClientCapabilities | None,
        wait: float,
    ) -> None:
        self._session = session
        self._subject = subject
        self._passthrough = passthrough
        self._capabilities = capabilities
        self._wait = wait
        self._changed = anyio.Event()
        self._question: _Question | None = None
        self._outcome: tuple[Any, BaseException | None] | None = None
        self.token: str | None = None
        self._scope = anyio.CancelScope()
        self._stream: RequestStream | None = None
        """The stream of the request waiting for the call now, if one is."""
        self._logs: list[tuple[str, types.LoggingMessageNotificationParams]] = []

    @property
    def session(self) -> SessionContext:
        """The session the call came in on."""
        return self._session

    @property
    def subject(self) -> str:
        """The exposed tool name."""
        return self._subject

    def start(self, group: TaskGroup, run: Callable[[], Awaitable[Any]], ended: Callable[[], object]) -> None:
        """Run the call in `group`, with this as its client; `ended` runs when it ends."""

        async def go() -> None:
            outcome: tuple[Any, BaseException | None] = (None, anyio.get_cancelled_exc_class()())
            try:
                with self._scope, bound(self):
                    outcome = (await run(), None)
            except Exception as error:  # handed to the request that waits for the call
                outcome = (None, error)
            self._outcome = outcome
            ended()
            self._changed.set()

        group.start_soon(go)

    async def ask(self, server: str, request: ClientRequest) -> ClientAnswer | types.ErrorData:
        """Park the upstream's request until the client's retry answers it."""
        if isinstance(request, types.ListRootsRequest) and (self._capabilities is None or not self._capabilities.roots):
            return workspace_roots(workspace_of(self._session))
        refusal = unsupported(request, self._capabilities) or await self._passthrough.admit(self, server, request)
        if refusal is not None:
            return refusal
        question = _Question(request, anyio.Event())
        self._question = question
        self._changed.set()
        with anyio.move_on_after(self._wait):
            await question.answered.wait()
        self._question = None
        if question.answer is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{request.method}: the client did not answer")
        return question.answer

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """Pass the log message on the stream of the request waiting for the call, if one is."""
        stream = self._stream
        if stream is not None:
            await stream.log(self._passthrough, self._session, server, params)

    def hold_log(self, server: str, params: types.LoggingMessageNotificationParams) -> bool:
        """Keep the log message, in the order it arrived, for the waiting request's stream ahead of
        the call's answer; one that arrives while no request waits is dropped."""
        if self._stream is not None:
            self._logs.append((server, params))
            self._changed.set()
        return True

    def answer(self, responses: types.InputResponses | None) -> None:
        """Give the parked question the client's answer from its retry."""
        question = self._question
        if question is None or question.answered.is_set():
            return
        question.answer = (responses or {}).get(QUESTION)
        question.answered.set()

    async def next(self, stream: RequestStream) -> tuple[Any, types.InputRequiredResult | None]:
        """Wait for the call to end (its result) or to ask (the `InputRequiredResult` to send back),
        its log messages meanwhile on `stream`, the waiting request's; a client that cancels its
        request while waiting cancels the call."""
        self._stream = stream
        try:
            return await self._next(stream)
        except anyio.get_cancelled_exc_class():
            self._scope.cancel()
            raise
        finally:
            self._stream = None
            self._logs.clear()

    async def _next(self, stream: RequestStream) -> tuple[Any, types.InputRequiredResult | None]:
        while True:
            self._changed = anyio.Event()
            while self._logs:
                server, params = self._logs.pop(0)
                await stream.log(self._passthrough, self._session, server, params)
            if self._outcome is not None:
                result, error = self._outcome
                if error is not None:
                    raise error
                return result, None
            question = self._question
            if question is not None and not question.answered.is_set():
                self.token = secrets.token_urlsafe(24)
                return None, types.InputRequiredResult(
                    input_requests={QUESTION: question.request}, request_state=self.token
                )
            await self._changed.wait()
