"""The SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`) as the gateway runs it for one
caller and one server: its token storage in the grant store, its flow on a connection's requests,
and a Connect from the user's press of the button to the provider's answer.

The SDK does discovery from the server's 401 and its protected-resource metadata, the
authorization server's metadata, dynamic client registration (or takes the configured client),
PKCE, the code exchange and the refresh. The gateway adds where tokens live (per server and
caller, sealed), when a token counts as expired (`REFRESH_AHEAD` early, on the gateway's wall
clock), and one rule on the connections calls use: a 401 there ends the grant instead of starting
a consent nobody is present to give. Loaded with the first such server: a gateway without one
loads no HTTP client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from anyio.abc import TaskGroup
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    validate_metadata_issuer,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata, OAuthToken
from pydantic import AnyUrl, ValidationError

from gateway.config.model import ServerConfig
from gateway.errors import UpstreamUnavailableError, describe_error
from gateway.stores.grants import GrantStore

log = logging.getLogger(__name__)

REFRESH_AHEAD = 60.0
"""How long before its expiry an access token is refreshed: a call never starts on one about to lapse."""
CONNECT_TIMEOUT = 600.0
"""How long a started Connect waits for the user to come back from the provider's consent."""
START_TIMEOUT = 30.0
"""How long starting a Connect may take: discovery and registration at the authorization server."""
CLIENT_NAME = "mcp-gateway"
# What a Connect sends the server to meet its 401: any request does, and a ping changes nothing.
_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
T = TypeVar("T")


class Keeper(Protocol):
    """What the storage needs of `gateway.upstreams.grants.Grants`."""

    lost: dict[tuple[str, str], str]

    @property
    def store(self) -> GrantStore:
        """The grant store."""

    def wall_clock(self) -> float:
        """Now, in epoch seconds."""

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """`function(*args)` on the store, off the event loop."""


class CallerTokens:
    """The SDK's token storage (`mcp.client.auth.TokenStorage`) for one caller's grant of one server,
    in the grant store; the server's OAuth client is the configured one or the one registered there."""

    def __init__(self, keeper: Keeper, server: ServerConfig, caller: str, redirect_uri: str | None = None) -> None:
        self._keeper = keeper
        self._server = server
        self._caller = caller
        self._redirect_uri = redirect_uri
        self.expires_at: float | None = None
        """When the access token last read or written expires (wall-clock epoch seconds), if it does."""
        self.loaded = False

    async def get_tokens(self) -> OAuthToken | None:
        """The caller's stored tokens, None when they have no grant."""
        stored = await self._keeper.run(self._keeper.store.grant, self._server.name, self._caller)
        self.loaded = True
        if stored is None:
            return None
        self.expires_at = stored.expires_at
        return OAuthToken.model_validate_json(stored.tokens)

    def lifetime(self) -> float | None:
        """Seconds the access token has left by the gateway's wall clock; None when it does not expire."""
        return None if self.expires_at is None else self.expires_at - self._keeper.wall_clock()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep new tokens (a grant, or a refresh of one)."""
        now = self._keeper.wall_clock()
        self.expires_at = None if tokens.expires_in is None else now + int(tokens.expires_in)
        store = self._keeper.store
        await self._keeper.run(
            store.save, self._server.name, self._caller, tokens.model_dump_json(), self.expires_at, now
        )
        self._keeper.lost.pop((self._server.name, self._caller), None)

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
        stored = await self._keeper.run(self._keeper.store.client, self._server.name)
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
            await self._keeper.run(self._keeper.store.save_client, self._server.name, client_info.model_dump_json())


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


def caller_auth(keeper: Keeper, server: ServerConfig, caller: str, lost: Callable[[], Awaitable[None]]) -> GrantAuth:
    """What puts `caller`'s grant on each request of a connection to `server`; `lost` when the provider refuses it."""
    assert server.url is not None
    tokens = CallerTokens(keeper, server, caller)
    return GrantAuth(OAuthClientProvider(server.url, _metadata(server, None), tokens), tokens, lost)


@dataclass(eq=False)
class Connect:
    """A Connect under way: the provider's URL for the user, then the code the user came back with."""

    server: str
    caller: str
    url: str | None = None
    state: str | None = None
    error: str | None = None
    started: anyio.Event = field(default_factory=anyio.Event)
    answered: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: AuthorizationCodeResult | None = None

    def take(self, params: dict[str, str]) -> None:
        """The provider's answer, the query of the callback: a code, or why there is none."""
        if "code" in params:
            self.answer = AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))
        else:
            self.error = f"the provider answered {params.get('error', 'without a code')}"
        self.answered.set()


async def start(keeper: Keeper, server: ServerConfig, caller: str, redirect_uri: str, group: TaskGroup) -> Connect:
    """Start connecting `caller`'s account to `server` in `group`: once discovery and client
    registration ran, the Connect holds the provider's URL (or why there is none) and waits for
    the user to come back (`Connect.take`), for up to `CONNECT_TIMEOUT`."""
    assert server.url is not None
    connect = Connect(server.name, caller)
    tokens = ConnectingTokens(keeper, server, caller, redirect_uri)

    async def redirect(url: str) -> None:
        connect.state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        connect.url = url
        connect.started.set()

    async def callback() -> AuthorizationCodeResult:
        await connect.answered.wait()
        if connect.answer is None:
            raise OAuthFlowError(connect.error or "no answer")
        return connect.answer

    provider = OAuthClientProvider(server.url, _metadata(server, redirect_uri), tokens, redirect, callback)
    group.start_soon(_run, provider, server.url, connect)
    with anyio.move_on_after(START_TIMEOUT):
        await connect.started.wait()
    return connect


async def _run(provider: OAuthClientProvider, url: str, connect: Connect) -> None:
    try:
        with anyio.move_on_after(CONNECT_TIMEOUT):
            async with httpx2.AsyncClient(auth=provider, timeout=30.0) as http:
                await http.post(url, json=_PING, headers=_HEADERS)
    except (httpx2.HTTPError, OAuthFlowError, ValidationError, UpstreamUnavailableError) as error:
        connect.error = str(error) or describe_error(error)
        log.warning("connecting %s for %s failed: %s", connect.server, connect.caller, connect.error)
    finally:
        connect.started.set()
        connect.done.set()


async def revoke(keeper: Keeper, server: ServerConfig, caller: str, tokens: str) -> None:
    """Ask `server`'s authorization server to revoke the grant `tokens` (its refresh token, else its
    access token; RFC 7009) when its metadata names a revocation endpoint. Best effort: the gateway
    has forgotten the grant already, and a failure is logged."""
    assert server.url is not None
    token = OAuthToken.model_validate_json(tokens)
    value, hint = (
        (token.refresh_token, "refresh_token") if token.refresh_token else (token.access_token, "access_token")
    )
    client = await CallerTokens(keeper, server, caller).get_client_info()
    try:
        async with httpx2.AsyncClient(timeout=10.0) as http:
            metadata = await _authorization_server(http, server.url)
            endpoint = metadata.revocation_endpoint if metadata is not None else None
            if client is None or endpoint is None:
                log.info(
                    "upstream %s: no revocation endpoint; the grant of %s is forgotten here only", server.name, caller
                )
                return
            form = {"token": value, "token_type_hint": hint, "client_id": client.client_id}
            if client.client_secret is not None:
                form["client_secret"] = client.client_secret
            response = await http.post(str(endpoint), data=form)
    except (httpx2.HTTPError, OAuthFlowError, ValidationError) as error:
        log.warning("upstream %s: revoking the grant of %s failed: %s", server.name, caller, describe_error(error))
        return
    if response.status_code != 200:
        log.warning("upstream %s: revoking the grant of %s: HTTP %d", server.name, caller, response.status_code)


async def _authorization_server(http: httpx2.AsyncClient, server_url: str) -> OAuthMetadata | None:
    """The metadata of the authorization server `server_url`'s protected-resource metadata names,
    found as the SDK's client finds it, its issuer checked."""
    prm = None
    for url in build_protected_resource_metadata_discovery_urls(None, server_url):
        prm = await handle_protected_resource_response(await http.send(create_oauth_metadata_request(url)))
        if prm is not None:
            break
    issuer = str(prm.authorization_servers[0]) if prm is not None else None
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
        found, metadata = await handle_auth_metadata_response(await http.send(create_oauth_metadata_request(url)))
        if not found:
            return None
        if metadata is not None:
            if issuer is not None:
                validate_metadata_issuer(metadata, issuer)
            return metadata
    return None


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
