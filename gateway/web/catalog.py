"""The catalog page: search as you type, filters, counts and paging, all on the server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.api.tools import LAYERS, RISKS, search, tool_query
from gateway.auth.policy import derive_risk
from gateway.catalog.merged import page
from gateway.errors import ProtocolError
from gateway.web.pages import PageError, Person, Web

PAGE_SIZE = 50
FILTERS = ("q", "server", "tag", "risk", "layer", "sandboxed", "group")


def routes(web: Web) -> list[Route]:
    """`/` (the page) and `/catalog/results` (the list alone, for the live search)."""
    gateway = web.gateway

    def results(request: Request, person: Person) -> dict[str, Any]:
        params = {key: value for key, value in request.query_params.items() if value != ""}
        entries = web.visible.entries(person.caller)
        query = tool_query(gateway.groups, person.caller, params)
        sandboxed = params.get("sandboxed")
        if sandboxed is not None:
            if sandboxed not in ("yes", "no"):
                raise PageError(400, "sandboxed must be yes or no")
            query = replace(query, sandboxed=sandboxed == "yes")
        found = search(entries, query)
        try:
            chunk, next_cursor = page(found, params.get("cursor"), PAGE_SIZE, lambda tool: tool.name)
        except ProtocolError as error:
            message = f"This page link is no longer valid ({error.message}); start from the first page."
            raise PageError(400, message) from None
        more = {key: params[key] for key in FILTERS if key in params}
        return {
            "tools": chunk,
            "total": len(found),
            "all": len(entries),
            "next_cursor": next_cursor,
            "paged": "cursor" in params,
            "params": more,
            "risk_of": {tool.name: derive_risk(tool).value for tool in chunk},
            "flags_of": {tool.name: gateway.flags.of(tool) for tool in chunk},
        }

    async def catalog(request: Request, person: Person) -> Response:
        entries = web.visible.entries(person.caller)
        options = {
            "servers": sorted({entry.tool.source for entry in entries}),
            "tags": sorted({tag for entry in entries for tag in entry.tool.tags}),
            "risks": RISKS,
            "layers": LAYERS,
            "groups": [group.name for group in gateway.groups.all()],
        }
        return web.render(request, person, "catalog.html", options=options, **results(request, person))

    async def fragment(request: Request, person: Person) -> Response:
        return web.render(request, person, "catalog_results.html", **results(request, person))

    return [
        Route("/", web.page(catalog), methods=["GET"]),
        Route("/catalog/results", web.page(fragment), methods=["GET"]),
    ]
