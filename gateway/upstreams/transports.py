"""How the gateway reaches an upstream server: a stdio child, streamable HTTP or legacy SSE, and a
read stream that tells when the peer has gone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio

from gateway.config.model import ServerConfig
from gateway.runtime import tracing
from gateway.upstreams.addresses import Resolver, checked_address, system_resolver
from gateway.upstreams.children import server_parameters
from gateway.upstreams.directcalls import DirectCalls
from gateway.upstreams.faults import FaultLog
from gateway.upstreams.stdio import stdio_transport

Streams = tuple[Any, Any]
# Each HTTP request to an upstream carries the trace context of the call that sends it, when traced.
_HOOKS = {"request": [tracing.inject_headers]}
TransportFactory = Callable[[], AbstractAsyncContextManager[Streams]]
AuthSource = Callable[[], Awaitable[Any]]
"""What authenticates a connection's HTTP requests (an `httpx2.Auth`), found as it opens: a caller's
OAuth grant (`gateway.upstreams.grants`). It may raise `GatewayError` when there is none."""
LoggedTransportFactory = Callable[[TextIO], TransportFactory]
"""A transport made for one connection whose server's stderr goes to the log it is given (a sandboxed server's)."""


class WatchedStream:
    """A read stream that reports when the peer has gone (EOF or closed)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.closed = anyio.Event()

    @property
    def last_context(self) -> Any:
        """The context of the task that sent the last message, where the transport carries it
        (the SDK runs the handler of a server's request in it: see `gateway.clients.downstream`)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.closed.set()
            raise

    async def aclose(self) -> None:
        self.closed.set()
        await self._inner.aclose()

    def __aiter__(self) -> WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WatchedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def transport_for(
    config: ServerConfig,
    data_dir: Path,
    errlog: TextIO,
    max_message_bytes: int,
    fault_log: FaultLog,
    direct: DirectCalls | None = None,
    resolver: Resolver = system_resolver,
    auth: AuthSource | None = None,
    challenged: Callable[[str], None] | None = None,
) -> TransportFactory:
    """The client transport that reaches `config`'s server, reading no message over `max_message_bytes`.

    A stdio server is a child of `data_dir`'s gateway (it dies with it), and the gateway frames its
    messages itself, refusing an oversized result by name; over streamable HTTP the SDK's limit on
    one event of a response stream applies, and a call whose event is too large fails as a broken
    stream. Legacy SSE and JSON bodies are read whole. A stdio server's unreadable lines go to
    `fault_log`, and its pipe takes `direct` calls; the other transports leave `direct` closed.
    A server registered through the API is connected to the address its registration policy
    checked, its host resolved by `resolver` once for each connection (`gateway.upstreams.addresses`).
    """
    if config.transport == "stdio":
        params = server_parameters(config, data_dir)
        return lambda: stdio_transport(params, errlog, max_message_bytes, fault_log, direct)
    assert config.url is not None
    url, headers = config.url, dict(config.headers)
    # The HTTP client (httpx2 and the SDK's HTTP transports, about 1.4 MB) loads with the first HTTP server.
    import httpx2
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    from gateway.upstreams.pinnedhttp import PinnedTransport

    async def pinned() -> PinnedTransport | None:
        """The transport of a registered server's connection; None for the file's, which connect as named.
        With a transport of its own a client uses no proxy from the environment: one would resolve the name again."""
        if config.registration is None:
            return None
        address = await checked_address(config, resolver)
        return PinnedTransport(httpx2.URL(url).host, address)

    hooks: dict[str, list[Callable[..., Any]]] = dict(_HOOKS)
    if auth is None and challenged is not None:

        async def watch(response: httpx2.Response) -> None:
            if response.status_code == 401:
                challenge = response.headers.get("www-authenticate", "")
                if challenge.lower().startswith("bearer"):
                    challenged(challenge)

        hooks["response"] = [watch]

    # The SDK's defaults: a response stream may stay quiet for minutes.
    default_timeout = httpx2.Timeout(30.0, read=300.0)

    @asynccontextmanager
    async def sse() -> AsyncIterator[Streams]:
        transport = await pinned()
        granted = await auth() if auth is not None else None

        def client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            timeout = default_timeout if timeout is None else timeout
            return httpx2.AsyncClient(
                headers=headers, timeout=timeout, auth=granted or auth, transport=transport, event_hooks=hooks
            )

        async with sse_client(url, headers=headers, httpx_client_factory=client) as streams:
            yield streams

    @asynccontextmanager
    async def http() -> AsyncIterator[Streams]:
        granted = await auth() if auth is not None else None
        async with (
            httpx2.AsyncClient(
                headers=headers, timeout=default_timeout, auth=granted, transport=await pinned(), event_hooks=hooks
            ) as client,
            streamable_http_client(url, http_client=client, max_sse_event_size=max_message_bytes) as streams,
        ):
            yield streams

    return sse if config.transport == "sse" else http
