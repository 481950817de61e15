"""HTTP sessions with limits per caller and in total, so that one client cannot fill the session table.

The SDK's session manager caps the sessions of everyone together; a single caller reaching that cap
locks every other caller out. Here a caller at its own limit makes room by losing its own
least recently used idle session (one with no request in flight and no open event stream); nobody
else's session is ever ended to make room. A caller whose every session is busy, or a newcomer to
a full gateway, is refused with a JSON-RPC error saying which limit and what to do. The rule and
where sessions are counted (this process, or every replica) are `gateway.shared.sessions`.

A session also belongs to the endpoint that opened it (`/mcp` or a tool group's `/mcp/g/<group>`):
presented at any other, it is answered as a session that does not exist.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import Any
from uuid import uuid4

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.auth.identity import Identity
from gateway.errors import StateUnavailableError
from gateway.frontdoors.mcpserver import GROUP_STATE
from gateway.frontdoors.responsemode import MESSAGE_STATE, ConnectionOf, HotPath, ResponseModeTransport
from gateway.frontdoors.sdkserver import SessionManagerSeam
from gateway.runtime.background import Background
from gateway.shared.sessions import Admission, HeldSession, SessionDirectory, SessionLimits

log = logging.getLogger(__name__)

# What the gateway is told of a refusal or an eviction: (caller key, session id or "", outcome, detail).
SessionEvent = Callable[[str, str, str, str], Awaitable[None]]
_SESSION_KEY = MCP_SESSION_ID_HEADER.lower().encode()
_VERSION_KEY = MCP_PROTOCOL_VERSION_HEADER.lower().encode()
# How long a stopping process waits to take its sessions out of a shared directory.
LEAVE_SECONDS = 5.0


def endpoint_of(scope: Scope) -> str | None:
    """The tool group whose endpoint a request reached (None: `/mcp`)."""
    group = scope.get("state", {}).get(GROUP_STATE)
    return group if isinstance(group, str) else None


def caller_of(scope: Scope) -> str:
    """The key the limits count a request's sessions under: the caller's key, every anonymous client
    together (`anonymous`), as for budgets, so that a fresh session does not bring a fresh allowance."""
    identity = scope.get("state", {}).get("identity")
    return identity.key if isinstance(identity, Identity) else ""


class LimitedSessionManager(SessionManagerSeam):
    """The SDK's streamable HTTP session manager, with `SessionLimits` in place of its global cap."""

    def __init__(
        self,
        app: Server[Any],
        limits: SessionLimits,
        on_event: SessionEvent,
        directory: SessionDirectory,
        background: Background,
        *,
        connection_of: ConnectionOf | None = None,
        **options: Any,
    ) -> None:
        super().__init__(app, max_sessions=None, **options)
        # Given how to find a session's connection, its tools/call and tools/list take the hot path.
        self._hot = None if connection_of is None else HotPath(app, connection_of, lambda: self.lifespan_state)
        self._limits = limits
        self._on_event = on_event
        self._directory = directory
        self._background = background
        # Session id -> wall-clock seconds of the end of its latest request.
        self._active: dict[str, float] = {}
        # Session id -> its caller's key, least recently used first.
        self._owners: dict[str, str] = {}
        # Session id -> the group whose endpoint opened it (None: `/mcp`).
        self._endpoints: dict[str, str | None] = {}
        self._busy: Counter[str] = Counter()

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The SDK's run, with this process's sessions kept known to the directory while it serves;
        they leave it when it stops."""
        async with super().run():
            try:
                async with anyio.create_task_group() as group:
                    serve = partial(
                        self._directory.serve, self._held, self._end_idle, self.end_session, self._background.report
                    )
                    group.start_soon(self._background.keep, "session_directory", serve)
                    try:
                        yield
                    finally:
                        group.cancel_scope.cancel()
            finally:
                # Also when the server stops by cancellation; a Redis that does not answer within
                # LEAVE_SECONDS leaves the sessions to expire.
                with anyio.move_on_after(LEAVE_SECONDS, shield=True):
                    await self._directory.leave()

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI application of the MCP endpoints. A handshake-era POST of a session open here,
        from the endpoint and the caller that opened it, goes straight to the session's transport:
        the SDK's body limit (the envelope check read the body under the same limit), its era
        routing and its session look-up would only find that transport again. Every other request
        takes the SDK's way, which answers each refusal."""
        transport = self._known(scope)
        if transport is None:
            await self.asgi_app(scope, receive, send)
            return
        session_id = transport.mcp_session_id
        assert session_id is not None
        with self._in_flight(session_id):
            await transport.handle_request(scope, receive, send)
        if transport.is_terminated:
            await self.end_session(session_id)

    def _known(self, scope: Scope) -> StreamableHTTPServerTransport | None:
        """The transport of the session a POST names, when the SDK's way would hand the request to it."""
        if scope["type"] != "http" or scope["method"] != "POST" or MESSAGE_STATE not in scope.get("state", {}):
            return None
        session_id = version = None
        for key, value in scope["headers"]:
            if key == _SESSION_KEY and session_id is None:
                session_id = value.decode("latin-1")
            elif key == _VERSION_KEY and version is None:
                version = value.decode("latin-1")
        if session_id is None or (version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS):
            return None
        if session_id not in self._endpoints or self._endpoints[session_id] != endpoint_of(scope):
            return None
        if self._owners.get(session_id) != caller_of(scope):
            return None
        return self.transport_for(session_id, scope)

    def new_transport(self, session_id: str) -> StreamableHTTPServerTransport:
        """A transport that streams only the responses that need a stream."""
        return ResponseModeTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
            hot=self._hot,
        )

    async def handle_stateful(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A session's request, kept to its endpoint and counted busy while it runs; a request
        without a session opens one within the limits."""
        session_id = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            await self._open(scope, receive, send)
            return
        if session_id in self._endpoints and self._endpoints[session_id] != endpoint_of(scope):
            await _refusal("Session not found", 404)(scope, receive, send)
            return
        # Only the owner's requests keep a session busy: a stranger presenting its id gets a 404.
        mine = self._owners.get(session_id) == caller_of(scope)
        with self._in_flight(session_id if mine else None):
            await self.sdk_stateful(scope, receive, send)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = caller_of(scope)
        async with self.creation_lock:
            session_id = uuid4().hex
            try:
                admission = await self._directory.admit(caller, session_id, self._owners, self._busy, self._limits)
            except StateUnavailableError as error:
                admission = Admission(refusal=f"{error.message}; retry in a moment.", status=503)
            if admission.evict is not None and not admission.elsewhere:
                # Ended as a DELETE would end it: its id answers 404 from now on, its transport stops,
                # and the connection's teardown releases its gateway state.
                await self.end_session(admission.evict)
            transport = None if admission.refusal else self.open_session(session_id, scope)
            if transport is not None:
                self._owners[session_id] = caller
                self._endpoints[session_id] = endpoint_of(scope)
        if admission.evict is not None:
            log.info("session %s of %s ended to make room for a new one", admission.evict, caller)
            await self._on_event(caller, admission.evict, "evicted:sessions", "its least recently used idle session")
        if transport is None:
            log.warning("refused a new session of %s: %s", caller, admission.refusal)
            await self._on_event(caller, "", "refused:sessions", admission.refusal)
            await _refusal(admission.refusal, admission.status)(scope, receive, send)
            return
        with self._in_flight(session_id):
            await self.serve_opening(transport, scope, receive, send)

    async def _end_idle(self, session_id: str) -> None:
        """End a session another replica evicted, unless a request of it runs now: then it stays,
        and the next heartbeat counts it again."""
        if not self.is_open(session_id) or session_id in self._busy:
            return
        log.info("session %s ended to make room for a new one of its caller on another replica", session_id)
        await self.end_session(session_id)

    def _held(self) -> list[HeldSession]:
        return [
            HeldSession(session, owner, self._active.get(session, 0.0), session in self._busy)
            for session, owner in self._owners.items()
        ]

    async def session_ending(self, session_id: str) -> None:
        """Forget the session's owner, endpoint and use, here and in the directory."""
        if self._owners.pop(session_id, None) is not None:
            await self._directory.ended(session_id)
        self._endpoints.pop(session_id, None)
        self._active.pop(session_id, None)

    @contextmanager
    def _in_flight(self, session_id: str | None) -> Iterator[None]:
        """Mark a session busy while one of its requests is served, and most recently used after it."""
        if session_id is None:
            yield
            return
        self._busy[session_id] += 1
        try:
            yield
        finally:
            self._busy[session_id] -= 1
            if self._busy[session_id] <= 0:
                del self._busy[session_id]
            owner = self._owners.pop(session_id, None)
            if owner is not None:
                self._owners[session_id] = owner
                self._active[session_id] = time.time()


def _refusal(message: str, status: int) -> Response:
    """A JSON-RPC error without a request id (the body is not read), with the HTTP status of the refusal."""
    code = types.INTERNAL_ERROR if status == 503 else types.INVALID_REQUEST
    body = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))
    return Response(body.model_dump_json(by_alias=True, exclude_unset=True), status, media_type="application/json")
