"""Each caller's own OAuth grant for an upstream server (`oauth:` in its entry): connected once on
the web page, kept sealed in the grant store, put on that caller's requests to the server,
refreshed ahead of its expiry, and forgotten when the user, an admin or the provider ends it.

The OAuth client is the SDK's (`mcp.client.auth.OAuthClientProvider`): discovery from the
server's 401 and its protected-resource metadata, the authorization server's metadata, dynamic
client registration (or the configured client), PKCE, the code exchange and the refresh. The
gateway adds where tokens live (per server and caller, sealed), when a token counts as expired
(`REFRESH_AHEAD` early, on the gateway's wall clock), and one rule on the connections a call
uses: a 401 there ends the grant instead of starting a consent nobody is present to give.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.to_thread
import httpx2
from anyio.abc import TaskGroup
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl, ValidationError

from gateway.config.model import ServerConfig
from gateway.errors import ConnectionNeededError, OperationError, UpstreamUnavailableError, describe_error
from gateway.stores.database import DatabaseError
from gateway.stores.grants import GrantStore

log = logging.getLogger(__name__)

PAGE_PATH = "/connections"
"""The web page where a user connects (and disconnects) the servers that take their own grant."""
CALLBACK_PATH = f"{PAGE_PATH}/callback"
"""Where the provider sends the user back with the authorization code."""
REFRESH_AHEAD = 60.0
"""How long before its expiry an access token is refreshed: a call never starts on one about to lapse."""
CONNECT_TIMEOUT = 600.0
"""How long a started Connect waits for the user to come back from the provider's consent."""
START_TIMEOUT = 30.0
"""How long starting a Connect may take: discovery and registration at the authorization server."""
CLIENT_NAME = "mcp-gateway"
# What the Connect flow sends the server to meet its 401: any request does, and a ping changes nothing.
_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

Clock = Callable[[], float]
T = TypeVar("T")


class CallerTokens:
    """The SDK's token storage (`mcp.client.auth.TokenStorage`) for one caller's grant of one server,
    in the grant store; the server's OAuth client is the configured one or the one registered there."""

    def __init__(self, grants: Grants, server: ServerConfig, caller: str, redirect_uri: str | None = None) -> None:
        self._grants = grants
        self._server = server
        self._caller = caller
        self._redirect_uri = redirect_uri
        self.expires_at: float | None = None
        """When the access token last read or written expires (wall-clock epoch seconds), if it does."""
        self.loaded = False

    async def get_tokens(self) -> OAuthToken | None:
        """The caller's stored tokens, None when they have no grant."""
        stored = await self._grants.run(self._grants.store.grant, self._server.name, self._caller)
        self.loaded = True
        if stored is None:
            return None
        self.expires_at = stored.expires_at
        return OAuthToken.model_validate_json(stored.tokens)

    def lifetime(self) -> float | None:
        """Seconds the access token has left by the gateway's wall clock; None when it does not expire."""
        return None if self.expires_at is None else self.expires_at - self._grants.wall_clock()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep new tokens (a grant, or a refresh of one)."""
        now = self._grants.wall_clock()
        self.expires_at = None if tokens.expires_in is None else now + int(tokens.expires_in)
        await self._grants.run(
            self._grants.store.save, self._server.name, self._caller, tokens.model_dump_json(), self.expires_at, now
        )
        self._grants.lost.pop((self._server.name, self._caller), None)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The configured client, else the one registered for this redirect URI (None: register one)."""
        oauth = self._server.oauth
        if oauth is not None and oauth.client_id is not None:
            uris = [AnyUrl(self._redirect_uri)] if self._redirect_uri is not None else None
            return OAuthClientInformationFull(
                client_id=oauth.client_id,
                client_secret=oauth.client_secret,
                redirect_uris=uris,
                token_endpoint_auth_method="client_secret_post" if oauth.client_secret else "none",
            )
        stored = await self._grants.run(self._grants.store.client, self._server.name)
        if stored is None:
            return None
        client = OAuthClientInformationFull.model_validate_json(stored)
        if self._redirect_uri is not None and self._redirect_uri not in {
            str(uri) for uri in client.redirect_uris or ()
        }:
            return None  # registered for another address of the gateway: register again
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Keep the client registered at the server's authorization server."""
        oauth = self._server.oauth
        if oauth is None or oauth.client_id is None:
            await self._grants.run(self._grants.store.save_client, self._server.name, client_info.model_dump_json())


class ConnectingTokens(CallerTokens):
    """The storage of a Connect: it starts without tokens, so the flow always asks for a new grant."""

    async def get_tokens(self) -> OAuthToken | None:
        """None: a Connect replaces whatever grant there was."""
        self.loaded = True
        return None


class GrantAuth(httpx2.Auth):
    """The caller's grant on each request of a connection: the SDK provider's flow (tokens loaded,
    refreshed when expired), the expiry moved `REFRESH_AHEAD` early on the gateway's wall clock, and
    a 401 on the request itself ending the grant (`lost`) instead of starting a consent."""

    requires_response_body = True

    def __init__(
        self, provider: OAuthClientProvider, tokens: CallerTokens, lost: Callable[[], Awaitable[None]]
    ) -> None:
        self._provider = provider
        self._tokens = tokens
        self._lost = lost

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """`request` with the caller's access token, refreshed first when it is about to expire."""
        if not self._tokens.loaded:
            await self._tokens.get_tokens()
        remaining = self._tokens.lifetime()
        if remaining is not None:
            # The provider compares with the system clock; the gateway's wall clock decides.
            self._provider.context.token_expiry_time = time.time() + remaining - REFRESH_AHEAD
        flow = self._provider.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and response.status_code == 401:
                    await self._lost()
                    return
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


@dataclass(eq=False)
class _Connect:
    """A Connect under way: the provider's URL for the user, then the code the user came back with."""

    server: str
    caller: str
    url: str | None = None
    error: str | None = None
    started: anyio.Event = field(default_factory=anyio.Event)
    answered: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: AuthorizationCodeResult | None = None


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
        self._connects: dict[str, _Connect] = {}

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

    async def forget(self, server: str, caller: str, why: str | None = None) -> bool:
        """End `caller`'s grant for `server` (`why`: the provider ended it); whether there was one."""
        if why is not None:
            self.lost[(server, caller)] = why
        else:
            self.lost.pop((server, caller), None)
        return bool(await self.run(self.store.forget, server, caller))

    def auth(self, server: ServerConfig, caller: str) -> GrantAuth:
        """What puts `caller`'s grant on each request of a connection to `server`."""
        assert server.url is not None
        tokens = CallerTokens(self, server, caller)

        async def lost() -> None:
            log.warning(
                "upstream %s: the provider refused the grant of %s; they must connect it again", server.name, caller
            )
            await self.forget(server.name, caller, "the provider refused its tokens")

        provider = OAuthClientProvider(server.url, _metadata(server, None), tokens)
        return GrantAuth(provider, tokens, lost)

    async def any_auth(self, server: ServerConfig) -> GrantAuth:
        """The grant a server's shared connection lists its tools with: the first caller's who holds
        one. `UpstreamUnavailableError` until someone connects it."""
        held = await self.run(self.store.grants, server.name)
        if not held:
            raise UpstreamUnavailableError(
                f"no user has connected server '{server.name}' yet: each connects it at {self.page_url()}"
            )
        return self.auth(server, held[0].caller)

    async def start(self, server: ServerConfig, caller: str, base_url: str, group: TaskGroup) -> str:
        """Start connecting `caller`'s account to `server`: the provider's URL to send the user to.

        Discovery and client registration run now; the flow then waits in `group` for the user to
        come back (`finish`) for up to `CONNECT_TIMEOUT`. `OperationError` when it cannot start.
        """
        assert server.url is not None
        redirect_uri = base_url.rstrip("/") + CALLBACK_PATH
        connect = _Connect(server.name, caller)
        tokens = ConnectingTokens(self, server, caller, redirect_uri)

        async def redirect(url: str) -> None:
            state = parse_qs(urlsplit(url).query).get("state", [""])[0]
            self._connects[state] = connect
            connect.url = url
            connect.started.set()

        async def callback() -> AuthorizationCodeResult:
            await connect.answered.wait()
            if connect.answer is None:
                raise OAuthFlowError(connect.error or "no answer")
            return connect.answer

        provider = OAuthClientProvider(server.url, _metadata(server, redirect_uri), tokens, redirect, callback)
        group.start_soon(self._connect, provider, server.url, connect)
        with anyio.move_on_after(START_TIMEOUT):
            await connect.started.wait()
        if connect.url is None:
            raise OperationError(f"Connecting server '{server.name}' did not start: {connect.error or 'it timed out'}")
        return connect.url

    async def _connect(self, provider: OAuthClientProvider, url: str, connect: _Connect) -> None:
        try:
            with anyio.move_on_after(CONNECT_TIMEOUT):
                async with httpx2.AsyncClient(auth=provider, timeout=30.0) as http:
                    await http.post(url, json=_PING, headers=_HEADERS)
        except (httpx2.HTTPError, OAuthFlowError, ValidationError, UpstreamUnavailableError) as error:
            connect.error = str(error) or describe_error(error)
            log.warning("connecting %s for %s failed: %s", connect.server, connect.caller, connect.error)
        finally:
            self._connects = {state: each for state, each in self._connects.items() if each is not connect}
            connect.started.set()
            connect.done.set()

    async def finish(self, caller: str, params: dict[str, str]) -> str:
        """Take the provider's answer (the callback's query) to a Connect `caller` started: the
        server now connected. `OperationError` for an answer to no such Connect, or a refusal."""
        connect = self._connects.get(params.get("state", ""))
        if connect is None or connect.caller != caller:
            raise OperationError("This answer from a provider matches no Connect you started: press Connect again.")
        if "code" in params:
            connect.answer = AuthorizationCodeResult(code=params["code"], state=params["state"], iss=params.get("iss"))
        else:
            connect.error = f"the provider answered {params.get('error', 'without a code')}"
        connect.answered.set()
        await connect.done.wait()
        if connect.error is not None or not await self.connected(connect.server, caller):
            raise OperationError(f"Connecting server '{connect.server}' failed: {connect.error or 'no grant was kept'}")
        return connect.server


def _metadata(server: ServerConfig, redirect_uri: str | None) -> OAuthClientMetadata:
    """What the gateway registers as at the server's authorization server."""
    scopes = server.oauth.scopes if server.oauth is not None else ()
    return OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[AnyUrl(redirect_uri)] if redirect_uri is not None else None,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(scopes) or None,
    )
