"""Every route of the admin API, mounted by the HTTP app, and the OpenAPI document describing them."""

from __future__ import annotations

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from gateway.api.approvals import approval_routes
from gateway.api.changes import change_routes
from gateway.api.common import API_PREFIX, Api
from gateway.api.groups import group_routes
from gateway.api.openapi import OPENAPI_PATH, document
from gateway.api.servers import server_routes
from gateway.api.sessions import EndTransport, session_routes
from gateway.api.skills import skill_routes
from gateway.api.tools import tool_routes
from gateway.service import Gateway


def api_routes(
    gateway: Gateway, security: TransportSecuritySettings | None, end_transport: EndTransport
) -> list[Route]:
    """The `/api/v1` routes and `/api/openapi.json`; `security` is the Host/Origin policy of `/mcp`."""
    api = Api(gateway, TransportSecurityMiddleware(security))
    spec = document()

    async def openapi(request: Request) -> Response:
        return JSONResponse(spec)

    return [
        *server_routes(api, gateway.servers, gateway.reloader, gateway.visibility),
        *tool_routes(api),
        *skill_routes(api),
        *group_routes(api, gateway.groups),
        *approval_routes(api),
        *change_routes(api, gateway.pins),
        *session_routes(api, gateway.sessions, gateway.shared.sessions, end_transport),
        Route(OPENAPI_PATH, openapi, methods=["GET"]),
    ]


def unmatched_route(routes: list[Route]) -> Route:
    """Every other path under `/api/v1`, after `routes`: a JSON 405 naming the methods a route
    takes, or a JSON 404; without it the web page, mounted last, would answer with its HTML page."""

    async def unmatched(request: Request) -> Response:
        path = request.url.path
        allowed = ", ".join(
            sorted({method for route in routes if _path_matches(route, request) for method in route.methods or ()})
        )
        if allowed:
            message = f"{request.method} is not allowed on {path}; use {allowed}"
            return JSONResponse({"error": message, "problems": []}, status_code=405, headers={"Allow": allowed})
        return JSONResponse({"error": f"no API route {path}", "problems": []}, status_code=404)

    return Route(f"{API_PREFIX}/{{rest:path}}", unmatched, methods=list(_EVERY_METHOD))


_EVERY_METHOD = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _path_matches(route: Route, request: Request) -> bool:
    match, _ = route.matches(request.scope)
    return match is not Match.NONE
