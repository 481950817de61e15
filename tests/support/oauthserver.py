"""An MCP server protected by OAuth through the SDK's own server-side auth (`mcp.server.auth`),
with its authorization server in the same app: dynamic client registration, a sign-in page where
a user picks who they are (the consent), codes with PKCE, refresh tokens, revocation.

Each user keeps notes of their own: `add_note` and `my_notes` answer for whoever the access
token belongs to, so two users behind one gateway see their own data or nothing.
"""

from __future__ import annotations

import html
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from tests.support.harness import loopback_listener, serving

USERS = ("alice", "bob")
ACCESS_LIFETIME = 3600


@dataclass
class Provider:
    """An authorization server kept in memory, built on the SDK's `OAuthAuthorizationServerProvider`."""

    issuer: str
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    pending: dict[str, tuple[str, AuthorizationParams]] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    refreshed: int = 0
    """How many refresh tokens were exchanged."""

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Send the user to the sign-in page, where they say who they are."""
        pending = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.pending[pending] = (client.client_id, params)
        return f"{self.issuer}/signin?pending={pending}"

    def grant(self, pending: str, user: str) -> str:
        """The user signed in and agreed: where their browser goes next, with the code."""
        client_id, params = self.pending.pop(pending)
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=user,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        code = authorization_code
        return self._issue(code.client_id, code.subject, code.scopes, code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token revoked")
        self.refreshed += 1
        held = refresh_token
        return self._issue(held.client_id, held.subject, scopes or held.scopes, held.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def revoke_refresh_tokens(self, user: str) -> None:
        """The provider ends `user`'s refresh tokens (an admin there revoked the grant): their
        access tokens run out on their own."""
        self.refresh = {token: held for token, held in self.refresh.items() if held.subject != user}

    def _issue(self, client_id: str, user: str | None, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires_at = int(time.time()) + ACCESS_LIFETIME
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires_at, subject=user, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, subject=user, resource=resource
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=ACCESS_LIFETIME,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


def build_server(provider: Provider, *, registration: bool = True) -> MCPServer:
    """The notes server, its resource and authorization server at `provider.issuer`; without
    `registration`, clients are registered by hand (`provider.clients`)."""
    server = MCPServer(
        "notes",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=provider.issuer,
            resource_server_url=f"{provider.issuer}/mcp",
            validate_token_resource=True,
            client_registration_options=ClientRegistrationOptions(enabled=registration),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )
    notes: dict[str, list[str]] = {}

    def user() -> str:
        token = get_access_token()
        assert token is not None and token.subject is not None
        return token.subject

    @server.tool()
    def add_note(text: str) -> str:
        """Keep a note for the signed-in user."""
        notes.setdefault(user(), []).append(text)
        return f"kept for {user()}"

    @server.tool()
    def my_notes() -> str:
        """The signed-in user's notes, one a line."""
        return f"{user()}: " + "; ".join(notes.get(user(), []))

    @server.custom_route("/signin", methods=["GET"])
    async def signin_page(request: Request) -> Response:
        pending = html.escape(request.query_params.get("pending", ""))
        buttons = "".join(
            f'<button type="submit" name="user" value="{name}">Sign in as {name} and allow</button>' for name in USERS
        )
        body = (
            "<!doctype html><title>Notes: sign in</title><h1>Notes wants to know who you are</h1>"
            f'<p>The MCP gateway asks to use your notes.</p><form method="post" action="/signin">'
            f'<input type="hidden" name="pending" value="{pending}">{buttons}</form>'
        )
        return HTMLResponse(body)

    @server.custom_route("/signin", methods=["POST"])
    async def signin(request: Request) -> Response:
        form = await request.form()
        return RedirectResponse(provider.grant(str(form["pending"]), str(form["user"])), status_code=302)

    return server


@asynccontextmanager
async def notes_server(*, registration: bool = True) -> AsyncIterator[tuple[Provider, str]]:
    """The notes server over HTTP on loopback: its provider and its MCP endpoint's URL."""
    with loopback_listener() as (listener, port):
        provider = Provider(f"http://127.0.0.1:{port}")
        app = build_server(provider, registration=registration).streamable_http_app()
        async with serving(app, listener):
            yield provider, f"{provider.issuer}/mcp"
