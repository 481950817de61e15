"""The HTTP edge of authentication: a middleware that answers 401 challenges, and RFC 9728 metadata.

The middleware leaves the `Authorization` header in place for the MCP SDK; the gateway never
forwards it: upstream connections are separate and carry their own configured credentials.
It also hands the caller's key to the SDK as the request's user, which binds every HTTP session
to the caller who opened it: any other caller presenting that session id, for any method (a call,
the event stream, or DELETE), is answered exactly as for a session that does not exist.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextvars import ContextVar
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError, Identity
from gateway.auth.settings import AuthSettings

WELL_KNOWN = "/.well-known/oauth-protected-resource"
DEFAULT_RESOURCE_PATH = "/mcp"

log = logging.getLogger(__name__)

# For code the SDK runs inside the request's own task but hands no request (its check of 2026-era
# `Mcp-Param-*` headers); handlers have the request, and read `request.state.identity` instead.
_CALLER: ContextVar[Identity | None] = ContextVar("gateway.caller", default=None)


def current_identity() -> Identity | None:
    """The caller of the HTTP request this task is handling, once the middleware has authenticated it."""
    return _CALLER.get()


def resource_url(settings: AuthSettings, request: Request) -> str:
    """This gateway's MCP URL: configured, or derived from the request for a local deployment."""
    if settings.resource_url is not None:
        return settings.resource_url
    return str(request.base_url).rstrip("/") + DEFAULT_RESOURCE_PATH


def metadata_url(resource: str) -> str:
    """Where a resource's metadata lives (RFC 9728 section 3.1: the well-known path goes before its path)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"


def _route_path(scope: Scope) -> str:
    """The request path inside this application, without the prefix it is mounted under."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _quoted(text: str) -> str:
    """`text` made safe inside a quoted auth-param (RFC 6750 allows printable ASCII except `"` and `\\`)."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else "'" for c in text)


def principal(identity: Identity) -> AuthenticatedUser:
    """The caller as the SDK's session manager sees it: the owner of the sessions it opens."""
    # The principal is the caller's key, which says how it signed in: an API key and a JWT naming
    # the same caller are different owners. The credential itself is not kept on the request.
    token = AccessToken(token="", client_id=identity.key, scopes=[], subject=identity.key)
    return AuthenticatedUser(token)


class AuthMiddleware:
    """Authenticates requests to the protected paths and puts the Identity in `request.state.identity`."""

    def __init__(
        self, app: ASGIApp, authenticator: Authenticator, *, protected_prefixes: Sequence[str] = ("/mcp",)
    ) -> None:
        self._app = app
        self._authenticator = authenticator
        self._prefixes = tuple(protected_prefixes)

    def _protects(self, path: str) -> bool:
        return any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in self._prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._protects(_route_path(scope)):
            await self._app(scope, receive, send)
            return
        values = [value.decode("latin-1") for key, value in scope["headers"] if key == b"authorization"]
        try:
            if len(values) > 1:
                raise AuthenticationError("send one Authorization header, not several", error="invalid_request")
            identity = await self._authenticator.identify(values[0] if values else None)
        except AuthenticationError as error:
            client = scope.get("client") or ("?", 0)
            log.info("refused %s %s from %s: %s", scope["method"], scope["path"], client[0], error.message)
            await self._challenge(Request(scope), error)(scope, receive, send)
            return
        scope.setdefault("state", {})["identity"] = identity
        scope["user"] = principal(identity)
        token = _CALLER.set(identity)
        try:
            await self._app(scope, receive, send)
        finally:
            _CALLER.reset(token)

    def _challenge(self, request: Request, error: AuthenticationError) -> Response:
        """The 401 answer: a Bearer challenge pointing at the metadata, and a short JSON body."""
        settings = self._authenticator.settings
        params = [f'resource_metadata="{_quoted(metadata_url(resource_url(settings, request)))}"']
        if error.error is not None:
            params += [f'error="{error.error}"', f'error_description="{_quoted(error.message)}"']
        if settings.scopes_supported:
            params.append(f'scope="{_quoted(" ".join(settings.scopes_supported))}"')
        body = {"error": error.error or "unauthorized", "error_description": error.message}
        return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer " + ", ".join(params)})


def metadata_route(authenticator: Authenticator) -> Route:
    """GET `/.well-known/oauth-protected-resource[/<resource path>]`: the RFC 9728 resource metadata,
    from the `auth` section in effect (a reload changes it)."""

    async def metadata(request: Request) -> Response:
        settings = authenticator.settings
        resource = resource_url(settings, request)
        suffix: str = request.path_params["suffix"]
        # The bare path and the RFC 9728 path-suffixed form (for example `/mcp`) both answer.
        if suffix and not (suffix.startswith("/") and urlsplit(resource).path.rstrip("/").endswith(suffix.rstrip("/"))):
            return JSONResponse({"error": "not_found"}, status_code=404)
        document: dict[str, object] = {"resource": resource, "bearer_methods_supported": ["header"]}
        if settings.authorization_servers:
            document["authorization_servers"] = list(settings.authorization_servers)
        if settings.scopes_supported:
            document["scopes_supported"] = list(settings.scopes_supported)
        return JSONResponse(document)

    return Route(WELL_KNOWN + "{suffix:path}", metadata, methods=["GET"])
