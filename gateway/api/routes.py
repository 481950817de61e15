"""Every route of the admin API, mounted by the HTTP app, and the OpenAPI document describing them."""

from __future__ import annotations

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.approvals import approval_routes
from gateway.api.common import Api
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
        *server_routes(api),
        *tool_routes(api),
        *skill_routes(api),
        *group_routes(api),
        *approval_routes(api),
        *session_routes(api, end_transport),
        Route(OPENAPI_PATH, openapi, methods=["GET"]),
    ]
