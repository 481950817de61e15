"""`/api/v1/groups`: tool groups with their endpoints, the tools each gives the caller; adding and removing them."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import API_PREFIX, Api, Caller, json_object, read_json
from gateway.auth.groups import Group
from gateway.live.groups import LiveGroups

PATH = f"{API_PREFIX}/groups"


def group_routes(api: Api, groups: LiveGroups) -> list[Route]:
    """The routes of `/api/v1/groups`, over the live `groups`."""

    def shown(group: Group, caller: Caller, *, names: bool = False) -> dict[str, Any]:
        tools = groups.tools(group.name, caller.identity.role)
        row: dict[str, Any] = {
            "name": group.name,
            "description": group.description,
            "source": group.source,
            "tools": len(tools),
            "endpoint": f"/mcp/g/{group.name}",
        }
        if names:
            row["tool_names"] = [tool.name for tool in tools]
        return row

    async def listing(request: Request) -> Response:
        caller = api.caller(request)
        return JSONResponse({"groups": [shown(group, caller) for group in groups.all()]})

    async def detail(request: Request) -> Response:
        caller = api.caller(request)
        return JSONResponse({"group": shown(groups.require(request.path_params["name"]), caller, names=True)})

    async def add(request: Request) -> Response:
        caller = api.caller(request)
        caller.require_admin()
        group = await groups.add(json_object(await read_json(request)))
        return JSONResponse({"group": shown(group, caller, names=True)}, status_code=201)

    async def remove(request: Request) -> Response:
        api.caller(request).require_admin()
        await groups.remove(request.path_params["name"])
        return Response(status_code=204)

    item = PATH + "/{name}"
    return [
        Route(PATH, api.route(listing), methods=["GET"]),
        Route(PATH, api.route(add), methods=["POST"]),
        Route(item, api.route(detail), methods=["GET"]),
        Route(item, api.route(remove), methods=["DELETE"]),
    ]
