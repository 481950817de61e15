"""Each caller's own OAuth grant for an upstream server (`oauth:` in its entry): connected once on
the web page, kept sealed in the grant store, put on that caller's requests to the server,
refreshed ahead of its expiry, and forgotten when the user, an admin or the provider ends it.

The OAuth side itself is the SDK's client, run as `gateway.upstreams.oauthflow` says; this module
keeps the grants, the Connects under way, and what a caller without a grant is told.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from gateway.config.model import ServerConfig
from gateway.errors import ConnectionNeededError, OperationError, UpstreamUnavailableError
from gateway.stores.database import DatabaseError
from gateway.stores.grants import GrantStore

if TYPE_CHECKING:
    from gateway.upstreams.oauthflow import Connect, GrantAuth

log = logging.getLogger(__name__)

PAGE_PATH = "/connections"
"""The web page where a user connects (and disconnects) the servers that take their own grant."""
CALLBACK_PATH = f"{PAGE_PATH}/callback"
"""Where the provider sends the user back with the authorization code."""

CONNECT_NOTE = "connect_by_url"
"""The call note holding `ConnectByUrl` when the client can open a URL for its user (URL-mode elicitation)."""
ConnectByUrl = Callable[[str, str], Awaitable[bool]]
"""Asks the client's user to open the page at the URL (the second argument), saying why (the first);
whether they agreed to."""
Clock = Callable[[], float]
T = TypeVar("T")


def unanswered_challenge(challenge: str) -> str:
    """What a server's OAuth challenge (its `WWW-Authenticate: Bearer ...`) to the gateway's own
    credentials means for its entry: the metadata it named, and the entry that makes it work."""
    found = re.search(r'resource_metadata="([^"]+)"', challenge)
    where = f" (its protected-resource metadata: {found.group(1)})" if found else ""
    return (
        f"the server asks for an OAuth token{where}: give its entry `oauth: {{}}` so that each user "
        "connects their own account on the web page's Accounts, or headers with a token it accepts"
    )


class Grants:
    """Every caller's grants for the servers that take them, and the Connects under way.

    `store` is the grant store once the gateway has opened it; `public_url` the gateway's base URL
    as its users reach it (the not-connected answer names its page there).
    """

    def __init__(self, wall_clock: Clock = time.time) -> None:
        self.wall_clock = wall_clock
        self._store: GrantStore | None = None
        self.public_url: str | None = None
        self.lost: dict[tuple[str, str], str] = {}
        """Grants the provider refused on a call, by (server, caller): why, told until the user connects again."""
        self._connects: dict[str, Connect] = {}
        self._granted: dict[tuple[str, str], anyio.Event] = {}
        self.listed_with: dict[str, str] = {}
        """Whose grant each server's shared connection lists its tools with, by server."""

    @property
    def store(self) -> GrantStore:
        """The grant store; only used once the gateway runs."""
        assert self._store is not None, "the grant store is opened when the gateway starts"
        return self._store

    def open(self, store: GrantStore) -> None:
        """Keep grants in `store` from now on."""
        self._store = store

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """`function(*args)` on the store in a worker thread (PostgreSQL answers over the network);
        a failing database is the caller's server being unavailable, said as such."""
        try:
            return await anyio.to_thread.run_sync(function, *args)
        except DatabaseError as error:
            raise UpstreamUnavailableError(f"The grants of upstream servers cannot be read: {error}") from None

    def page_url(self) -> str:
        """The connections page as users reach it (its path alone until the gateway's URL is known)."""
        return f"{self.public_url.rstrip('/')}{PAGE_PATH}" if self.public_url else PAGE_PATH

    def needed(self, server: str, caller: str) -> ConnectionNeededError:
        """The answer to a call of `server` by `caller`, who has no grant for it (or lost it)."""
        why = self.lost.get((server, caller))
        if why is not None:
            text = (
                f"Your connection to server '{server}' no longer works ({why}): connect it again at {self.page_url()}"
            )
        else:
            text = (
                f"Server '{server}' acts with each user's own account, and you have not connected yours:"
                f" connect it at {self.page_url()}"
            )
        return ConnectionNeededError(text, self.page_url())

    async def connected(self, server: str, caller: str) -> bool:
        """Whether `caller` holds a grant for `server`."""
        return await self.run(self.store.grant, server, caller) is not None

    async def until_connected(self, server: str, caller: str) -> None:
        """Return once `caller` has connected `server` (at once when they have)."""
        event = self._granted.setdefault((server, caller), anyio.Event())
        if not await self.connected(server, caller):
            await event.wait()

    async def forget(self, server: str, caller: str, why: str | None = None) -> bool:
        """End `caller`'s grant for `server` (`why`: the provider ended it); whether there was one."""
        if why is not None:
            self.lost[(server, caller)] = why
        else:
            self.lost.pop((server, caller), None)
        return await self.run(self.store.forget, server, caller)

    async def revoke(self, server: ServerConfig, caller: str) -> bool:
        """End `caller`'s grant for `server` here and, where it offers revocation, at its
        authorization server too; whether there was one."""
        from gateway.upstreams.oauthflow import revoke

        stored = await self.run(self.store.grant, server.name, caller)
        if not await self.forget(server.name, caller) or stored is None:
            return False
        await revoke(self, server, caller, stored.tokens)
        return True

    def auth(self, server: ServerConfig, caller: str) -> GrantAuth:
        """What puts `caller`'s grant on each request of a connection to `server`."""
        from gateway.upstreams.oauthflow import caller_auth

        async def lost() -> None:
            log.warning(
                "upstream %s: the provider refused the grant of %s; they must connect again", server.name, caller
            )
            await self.forget(server.name, caller, "the provider refused its tokens")

        return caller_auth(self, server, caller, lost)

    async def any_auth(self, server: ServerConfig) -> GrantAuth:
        """The grant a server's shared connection lists its tools with: the first caller's who holds
        one. `UpstreamUnavailableError` until someone connects it."""
        held = await self.run(self.store.grants, server.name)
        if not held:
            raise UpstreamUnavailableError(
                f"no user has connected server '{server.name}' yet: each connects it at {self.page_url()}"
            )
        self.listed_with[server.name] = held[0].caller
        return self.auth(server, held[0].caller)

    async def start(self, server: ServerConfig, caller: str, base_url: str, group: TaskGroup) -> str:
        """Start connecting `caller`'s account to `server`: the provider's URL to send the user to.

        Discovery and client registration run now; the flow then waits in `group` for the user to
        come back (`finish`). `OperationError` when it cannot start.
        """
        from gateway.upstreams.oauthflow import start

        connect = await start(self, server, caller, base_url.rstrip("/") + CALLBACK_PATH, group)
        if connect.url is None or connect.state is None:
            raise OperationError(f"Connecting server '{server.name}' did not start: {connect.error or 'it timed out'}")
        self._connects[connect.state] = connect

        async def tidy() -> None:
            await connect.done.wait()
            self._connects.pop(connect.state or "", None)

        group.start_soon(tidy)
        return connect.url

    async def finish(self, caller: str, params: dict[str, str]) -> str:
        """Take the provider's answer (the callback's query) to a Connect `caller` started: the
        server now connected. `OperationError` for an answer to no such Connect, or a refusal."""
        connect = self._connects.get(params.get("state", ""))
        if connect is None or connect.caller != caller:
            raise OperationError("This answer from a provider matches no Connect you started: press Connect again.")
        connect.take(params)
        await connect.done.wait()
        if connect.error is not None or not await self.connected(connect.server, caller):
            raise OperationError(f"Connecting server '{connect.server}' failed: {connect.error or 'no grant was kept'}")
        granted = self._granted.pop((connect.server, caller), None)
        if granted is not None:
            granted.set()
        return connect.server
