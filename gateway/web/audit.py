"""The audit page (admins): recent calls, filterable by caller, tool and outcome."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.web.pages import Person, Web

LIMIT = 200


def routes(web: Web) -> list[Route]:
    """`/audit`."""

    async def page(request: Request, person: Person) -> Response:
        params = request.query_params
        filters = {key: params.get(key) or None for key in ("caller", "tool", "outcome")}
        entries = await web.gateway.audit.recent(LIMIT, **filters)
        return web.render(request, person, "audit.html", entries=entries, filters=filters, limit=LIMIT)

    return [Route("/audit", web.page(page, admin=True), methods=["GET"])]
