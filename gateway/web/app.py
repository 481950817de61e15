"""The web page's routes, mounted by the HTTP app at `/` after every other route, behind the security headers.

The HTTP app builds them at the page's first request (`httpapp.WebPage`): a gateway nobody browses
loads neither Jinja2, markdown-it nor the page modules."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.routing import BaseRoute, Mount, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.service import Gateway
from gateway.web import (
    account,
    approvals,
    apps,
    audit,
    catalog,
    changes,
    connect,
    connections,
    dashboard,
    servers,
    skills,
    tool,
)
from gateway.web.headers import SecurityHeaders
from gateway.web.pages import Web

STATIC = Path(__file__).parent / "static"


def web_app(gateway: Gateway, web: Web | None = None) -> ASGIApp:
    """Every page, its fragments and its static files; an unknown path is a 404 page."""
    web = web or Web(gateway)
    routes: list[BaseRoute] = [
        *account.routes(web),
        *catalog.routes(web),
        *tool.routes(web),
        *apps.routes(web),
        *servers.routes(web),
        *skills.routes(web),
        *connect.routes(web),
        *connections.routes(web),
        *approvals.routes(web),
        *changes.routes(web),
        *audit.routes(web),
        *dashboard.routes(web),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]

    async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        person, _ = web.person(request)
        await web.error_page(request, person, 404, "There is no such page.")(scope, receive, send)

    return SecurityHeaders(Router(routes=routes, default=not_found))
