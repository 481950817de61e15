"""`subscriptions/listen` (2026-07-28): the stream a client opens for list changes and for updates
of the resources it names, that era's way to subscribe.

The SDK's `ListenHandler` serves the stream: the acknowledgment first, then the events the stream
asked for, each stamped with its subscription id. It hears events on a bus; the gateway's bus
carries the list changes every client is told of (`mcpserver`). What a resource's server says of
it is not for everyone: a stream honours (and acknowledges) only the resources its caller may see
and whose server offers subscriptions, at most `MAX_RESOURCES` of them. For each, the gateway
subscribes on the server for as long as the stream stays open (once a resource, however many
streams and handshake-era sessions follow it, `PassThrough`), and the server's updates reach that
stream alone, under the URI the stream named, on a bus of its own that the handler hears beside
the shared one (docs/decisions/0062-resource-updates-on-listen-streams.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    ServerEvent,
    SubscriptionBus,
)
from mcp.shared.exceptions import MCPError

from gateway.clients.session import SessionContext
from gateway.serving.resources import Resources, Unfollow

Context = ServerRequestContext[Any, Any]
Listen = Callable[[Context, types.SubscriptionsListenRequestParams], Awaitable[types.SubscriptionsListenResult]]

MAX_STREAMS = 1024
"""Listen streams open at once, as the SDK's handler allows by default."""
MAX_RESOURCES = 100
"""Resources one stream follows; the acknowledgment leaves out the URIs past them."""
UNFOLLOW_TIMEOUT = 10.0
"""How long a stream that ended waits for its servers to take its unsubscriptions."""


class _Joined:
    """The shared bus (list changes) and one stream's own (its resources' updates), heard as one."""

    def __init__(self, shared: SubscriptionBus, own: SubscriptionBus) -> None:
        self._shared = shared
        self._own = own

    async def publish(self, event: ServerEvent) -> None:
        """Tell the stream alone."""
        await self._own.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Hear both buses until the returned callable is called."""
        leave_shared = self._shared.subscribe(listener)
        leave_own = self._own.subscribe(listener)

        def leave() -> None:
            leave_shared()
            leave_own()

        return leave


def listen_handler(
    resources: Resources, bus: SubscriptionBus, session_of: Callable[[Context], SessionContext]
) -> Listen:
    """The `subscriptions/listen` handler: list changes from `bus`, resource updates per stream."""
    streams = [0]

    async def listen(ctx: Context, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        if streams[0] >= MAX_STREAMS:
            raise MCPError(code=types.INTERNAL_ERROR, message="Subscription limit reached")
        session = session_of(ctx)
        own = InMemorySubscriptionBus()

        async def send(session: SessionContext, notice: Any) -> None:
            await own.publish(ResourceUpdated(uri=notice.params.uri))

        wanted = params.notifications
        followed: list[tuple[str, Unfollow]] = []
        streams[0] += 1
        try:
            for uri in dict.fromkeys(wanted.resource_subscriptions or ()):
                if len(followed) == MAX_RESOURCES:
                    break
                unfollow = await resources.follow(session, uri, send)
                if unfollow is not None:
                    followed.append((uri, unfollow))
            honored = wanted.model_copy(update={"resource_subscriptions": [uri for uri, _ in followed] or None})
            handler = ListenHandler(_Joined(bus, own))
            return await handler(ctx, params.model_copy(update={"notifications": honored}))
        finally:
            streams[0] -= 1
            # The stream usually ends with its client gone, its task cancelled: still unsubscribe.
            with anyio.move_on_after(UNFOLLOW_TIMEOUT, shield=True):
                for _, unfollow in followed:
                    await unfollow()

    return listen
