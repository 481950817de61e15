"""The HTTP edge: streamable HTTP MCP at `/mcp`, `/healthz`, `/readyz`, and Origin checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.approvals import API_PATH
from gateway.approvalsapi import approval_routes
from gateway.authhttp import AuthMiddleware, metadata_route
from gateway.config import GatewayConfig
from gateway.frontdoor import build_server
from gateway.service import Gateway
from gateway.upstream import State

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_ORIGINS = ("http://127.0.0.1", "http://localhost", "http://[::1]", "https://127.0.0.1", "https://localhost")


def origin_allowed(origin: str, extra: tuple[str, ...]) -> bool:
    """Whether a browser `Origin` may reach the gateway: loopback on any port, or configured."""
    if origin in extra:
        return True
    return any(origin == base or origin.startswith(base + ":") for base in LOOPBACK_ORIGINS)


class OriginGuard:
    """Answers 403 to requests whose `Origin` header is not allowed (DNS-rebinding defence)."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self._app = app
        self._allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None)
            if origin is not None and not origin_allowed(origin, self._allowed):
                await PlainTextResponse(f"Origin not allowed: {origin}", status_code=403)(scope, receive, send)
                return
        await self._app(scope, receive, send)


def create_app(config: GatewayConfig, *, host: str = "127.0.0.1", gateway: Gateway | None = None) -> Starlette:
    """The ASGI application serving `config` (a lifespan starts and stops everything)."""
    service = gateway or Gateway(config)
    server = build_server(service)
    security = None
    if host in LOOPBACK_HOSTS:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
            allowed_origins=[f"{base}:*" for base in LOOPBACK_ORIGINS]
            + list(LOOPBACK_ORIGINS)
            + list(config.settings.allowed_origins),
        )
    # By default SSE responses, not single JSON bodies: only a stream carries a call's progress
    # notifications and elicitation requests back, and lets the SDK notice a 2026-era client
    # abandoning a call (so the cancel reaches the upstream). Calls that emit nothing are still
    # answered with plain JSON in the 2026 era. `http_json_responses` trades those for speed.
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=config.settings.http_json_responses,
        transport_security=security,
        host=host,
        session_idle_timeout=config.settings.session_idle_timeout,
    )

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        statuses = service.statuses()
        ready = all(status.state == State.READY for status in statuses if status.required)
        body: dict[str, object] = {"ready": ready, "servers": {status.name: status.as_dict() for status in statuses}}
        if service.sandboxes.docker is not None:
            available, reason = service.sandbox_availability()
            body["sandbox"] = {"available": available, "reason": reason}
        return JSONResponse(body, status_code=200 if ready else 503)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with service, server.session_manager.run():
            yield

    authenticator = service.authenticator
    routes = [Route("/healthz", healthz), Route("/readyz", readyz), metadata_route(authenticator.settings)]
    routes += approval_routes(service, security)
    app = Starlette(routes=[*routes, *mcp_app.routes], lifespan=lifespan)
    app.add_middleware(AuthMiddleware, authenticator=authenticator, protected_prefixes=("/mcp", API_PATH))
    app.add_middleware(OriginGuard, allowed=tuple(config.settings.allowed_origins))
    return app
