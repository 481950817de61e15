"""The HTTP edge: streamable HTTP MCP at `/mcp` and each tool group's `/mcp/g/<group>`, the admin API
under `/api/v1`, the registry read API at `/v0.1`, `/healthz`, `/readyz`, `/metrics`, the web page at
`/`, and Host and Origin checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api.common import API_PREFIX
from gateway.api.routes import api_routes, unmatched_route
from gateway.auth.identity import AuthenticationError
from gateway.auth.middleware import AuthMiddleware, metadata_route
from gateway.config.model import GatewayConfig
from gateway.errors import NotFoundError
from gateway.frontdoors.envelope import GROUP_PATH, MCP_PATH, EnvelopeGuard
from gateway.frontdoors.httpsessions import LimitedSessionManager
from gateway.frontdoors.mcpserver import build_server, group_endpoint, session_connection
from gateway.frontdoors.registryapi import REGISTRY_PATH, registry_routes
from gateway.frontdoors.sdkserver import route_path
from gateway.live.groups import LiveGroups
from gateway.runtime.metrics import CONTENT_TYPE
from gateway.service import Gateway
from gateway.shared.sessions import SessionLimits
from gateway.upstreams.connection import State

METRICS_PATH = "/metrics"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
LOOPBACK_ORIGINS = ("http://127.0.0.1", "http://localhost", "http://[::1]", "https://127.0.0.1", "https://localhost")


def _with_port(value: str, base: str) -> bool:
    """Whether `value` is `base`, or `base` followed by `:<port>`."""
    rest = value[len(base) :] if value.startswith(base) else None
    return rest is not None and (rest == "" or (rest[:1] == ":" and rest[1:].isdigit()))


def origin_allowed(origin: str, extra: tuple[str, ...]) -> bool:
    """Whether a browser `Origin` may reach the gateway: loopback on any port, or configured."""
    return origin in extra or any(_with_port(origin, base) for base in LOOPBACK_ORIGINS)


def host_allowed(host: str) -> bool:
    """Whether a `Host` header names the loopback interface (on any port)."""
    return any(_with_port(host, name) for name in LOOPBACK_NAMES)


class HostOriginGuard:
    """DNS-rebinding defence for every route: a foreign `Host` (when serving on loopback) gets 421,
    a foreign `Origin` 403, the answers the MCP SDK gives on its own endpoint."""

    def __init__(self, app: ASGIApp, *, check_host: bool, allowed_origins: tuple[str, ...]) -> None:
        self._app = app
        self._check_host = check_host
        self._allowed = allowed_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            if self._check_host and not host_allowed(headers.get("host", "")):
                await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
                return
            origin = headers.get("origin")
            if origin is not None and not origin_allowed(origin, self._allowed):
                await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
                return
        await self._app(scope, receive, send)


class GroupEndpoint:
    """`/mcp/g/<group>`: one tool group's MCP endpoint, served by the session manager of `/mcp`
    (the group travels in the request's state to the session); a group not among `groups` is a 404."""

    def __init__(self, groups: LiveGroups, app: ASGIApp) -> None:
        self._groups = groups
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name: str = scope["path_params"]["group"]
        try:
            self._groups.require(name)
        except NotFoundError as error:
            await JSONResponse({"error": error.message}, status_code=404)(scope, receive, send)
            return
        with group_endpoint(scope, name):
            await self._app(scope, receive, send)


class WebPage:
    """The web page, built at its first request: a gateway nobody browses does not hold its
    templates, Markdown renderer and page modules (about 3 MB)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            from gateway.web.app import web_app

            self._app = web_app(self._gateway)
        await self._app(scope, receive, send)


def mcp_route(path: str) -> str | None:
    """Which MCP endpoint `path` is, as the routes `/mcp` and `/mcp/g/{group}` match it: "" for
    `/mcp`, the group's name for `/mcp/g/<group>`, None for any other path (`/mcp/g/` included)."""
    if path == MCP_PATH:
        return ""
    if path.startswith(GROUP_PATH):
        name = path[len(GROUP_PATH) :]
        if name and "/" not in name:
            return name
    return None


class McpFront:
    """The gateway's ASGI application: a request to an MCP endpoint goes to it past Starlette's
    router and its exception middleware, through the same Host and Origin check, authentication
    and envelope checks, in the same order, and the same answer to an unhandled error (a plain
    500); everything else, lifespan included, goes to the Starlette application.

    Nearly every request is an MCP call, and Starlette's exception middleware, router and route
    matching did nothing for it but cost every call (docs/decisions/0042-mcp-past-starlettes-router.md).
    The path is read as Starlette's router reads it (`sdkserver.route_path`).
    """

    def __init__(self, app: Starlette, mcp: ASGIApp, group: ASGIApp) -> None:
        self._app = app
        self._mcp = mcp
        self._group = group

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            name = mcp_route(route_path(scope))
            if name is not None:
                if name == "":
                    await self._mcp(scope, receive, send)
                    return
                scope["path_params"] = {"group": name}
                await self._group(scope, receive, send)
                return
        await self._app(scope, receive, send)


def create_app(config: GatewayConfig, *, host: str = "127.0.0.1", gateway: Gateway | None = None) -> McpFront:
    """The ASGI application serving `config` (a lifespan starts and stops everything)."""
    service = gateway or Gateway(config)
    server = build_server(service)
    loopback = host in LOOPBACK_HOSTS
    # HostOriginGuard checks every route, `/mcp` included; the SDK's own check would be a second one.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    settings = config.settings
    limits = SessionLimits(per_caller=settings.max_sessions_per_caller, total=settings.max_sessions)
    # A request gets an event stream only when one can carry something to its client (progress,
    # log messages, requests put to the client): see `responsemode`. `http_json_responses` answers
    # every request with a JSON body, giving those up.
    sessions = LimitedSessionManager(
        server,
        limits,
        service.sessions.record_event,
        service.shared.sessions,
        service.background,
        connection_of=partial(session_connection, service),
        json_response=settings.http_json_responses,
        security_settings=security,
        session_idle_timeout=settings.session_idle_timeout,
    )

    async def healthz(request: Request) -> Response:
        # The process still answers, but the service it ran has ended: only a restart brings it back.
        if service.failure is not None:
            return PlainTextResponse(f"the gateway's service ended: {service.failure}", status_code=503)
        return PlainTextResponse("ok")

    authenticator = service.authenticator

    async def sees_detail(request: Request) -> bool:
        """Whether `/readyz` may name servers and their errors: to admins, or to anyone on loopback without auth."""
        if not authenticator.settings.enabled:
            return loopback
        values = request.headers.getlist("authorization")
        try:
            identity = await authenticator.identify(values[0] if len(values) == 1 else None)
        except AuthenticationError:
            return False
        return service.policy.is_admin(identity.role)

    async def readyz(request: Request) -> Response:
        statuses = service.servers.statuses()
        # Still connecting its servers, a replica would answer many calls "not connected yet".
        ready = service.settled.is_set()
        ready = ready and all(status.state == State.READY for status in statuses if status.required and status.enabled)
        # A gateway that cannot audit refuses every call: no load balancer should send it any.
        audit_problem = service.audit.writable()
        ready = ready and audit_problem is None and service.failure is None
        body: dict[str, object] = {"ready": ready}
        if await sees_detail(request):
            if audit_problem is not None:
                body["audit"] = audit_problem
            if service.reloader.pending_restart:
                body["restart_needed"] = list(service.reloader.pending_restart)
            body["servers"] = {status.name: status.as_dict() for status in statuses}
            # A degraded loop does not make the replica unready: its peers share the same Redis and
            # PostgreSQL, and taking every replica out of service would turn an outage of one
            # feature into an outage of all.
            conditions = service.background.conditions().items()
            body["background"] = {name: condition.as_dict() for name, condition in conditions}
            if (keys := authenticator.keys) is not None:
                body["identity_provider"] = {"issuer": keys.issuer, "keys": keys.kids(), "error": keys.error}
            if service.sandboxes.docker is not None:
                available, reason = service.sandboxes.availability()
                body["sandbox"] = {"available": available, "reason": reason}
        return JSONResponse(body, status_code=200 if ready else 503)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with service.running(), sessions.run():
            yield

    async def metrics(request: Request) -> Response:
        # With auth on, the middleware has already answered a missing or bad credential with a 401 challenge.
        if not await sees_detail(request):
            return JSONResponse({"error": "Metrics are shown to admins only"}, status_code=403)
        return Response(await service.metrics.exposition(), media_type=CONTENT_TYPE)

    mcp = sessions.serve
    # `/mcp` and `/mcp/g/<group>` never reach Starlette's router: McpFront sends them past it.
    routes: list[BaseRoute] = [Route("/healthz", healthz), Route("/readyz", readyz), Route(METRICS_PATH, metrics)]
    routes.append(metadata_route(authenticator))
    api = api_routes(service, security, sessions.end_session)
    routes += [*api, unmatched_route(api)]
    routes += registry_routes(service.groups, authenticator, settings.registry_namespace)
    # Last: the web page answers every path no other route does.
    routes.append(Mount("", app=WebPage(service)))
    app = Starlette(routes=routes, lifespan=lifespan)

    def guarded(inner: ASGIApp) -> ASGIApp:
        # Innermost: only an authenticated request gets its body read.
        inner = EnvelopeGuard(inner)
        protected = ("/mcp", API_PREFIX, REGISTRY_PATH, METRICS_PATH)
        inner = AuthMiddleware(inner, authenticator=authenticator, protected_prefixes=protected)
        # Outermost: a page reached through DNS rebinding learns nothing, not even whether it needs a key.
        return HostOriginGuard(inner, check_host=loopback, allowed_origins=tuple(settings.allowed_origins))

    # Every other path meets the same checks, in the same order, inside Starlette's error middleware.
    app.add_middleware(guarded)
    group = GroupEndpoint(service.groups, mcp)
    return McpFront(app, ServerErrorMiddleware(guarded(mcp)), ServerErrorMiddleware(guarded(group)))
