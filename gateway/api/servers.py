"""`/api/v1/servers`: every configured server's state; registering, changing, restarting and removing them.

Reading is filtered like MCP: without roles every server is listed; with roles a caller sees a server
of which its role may see at least one tool, and only admins see errors and failed reloads.
Changing needs an admin; what may be registered is the `registration` policy's to say.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import API_PREFIX, Api, Caller, json_object, read_json
from gateway.api.formats import registrations
from gateway.auth.visibility import Visibility
from gateway.errors import ConflictError, NotFoundError
from gateway.live.reload import Reloader
from gateway.live.serveradmin import ServerAdmin
from gateway.upstreams.connection import Status

PATH = f"{API_PREFIX}/servers"


def shown(servers: ServerAdmin, status: Status, caller: Caller) -> dict[str, Any]:
    """A server's state as `caller` may read it: its last error, its tools left out (which name the
    servers holding their names), and its headers and env with their values masked
    (`${secret:NAME}` references as written), for admins only."""
    row = {"name": status.name, **status.as_dict()}
    if not caller.admin:
        row.pop("error", None)
        row.pop("withheld", None)
    elif status.name in servers.members:
        row.update(servers.credentials(status.name))
    return row


def visible_statuses(servers: ServerAdmin, visibility: Visibility, caller: Caller) -> list[Status]:
    """The servers `caller` may see: all without roles or for admins, else those with a tool its role sees."""
    statuses = servers.statuses()
    if caller.admin or visibility.policy.roles is None:
        return statuses
    sources = {tool.source for tool in visibility.tools(caller.session())}
    return [status for status in statuses if status.name in sources]


async def register(servers: ServerAdmin, caller: Caller, body: dict[str, Any]) -> list[Status]:
    """Add the servers of a registration body (any of the three forms), all or none; admins only."""
    caller.require_admin()
    wanted = registrations(body)
    taken = {status.name for status in servers.statuses()}
    names = [registration.name for registration in wanted]
    for registration in wanted:
        if registration.name in taken or names.count(registration.name) > 1:
            raise ConflictError(f"a server named {registration.name!r} exists already")
    # Every server is judged before any is added, so a refused one leaves nothing half-registered.
    policy = servers.registration
    admitted = [(registration.name, policy.admit(registration.name, registration.entry)) for registration in wanted]
    return [await servers.add({"name": name, **entry}) for name, entry in admitted]


async def change(servers: ServerAdmin, caller: Caller, name: str, changes: dict[str, Any]) -> Status:
    """Change a server's entry (`{"enabled": false}` disables it); admins only."""
    caller.require_admin()
    stored = servers.registered(name)
    if stored is not None:
        # The changed entry is judged as a new registration would be, its sandbox included.
        merged = servers.registration.admit(name, {**stored, **changes})
        changes = {key: value for key, value in merged.items() if key in changes or stored.get(key) != value}
    return await servers.change(name, changes)


def server_routes(api: Api, servers: ServerAdmin, reloader: Reloader, visibility: Visibility) -> list[Route]:
    """The routes of `/api/v1/servers`: `servers` administers the set, `reloader` says what the last
    reload left undone, `visibility` which servers a caller may see."""

    def one(caller: Caller, name: str) -> Status:
        found = next((status for status in visible_statuses(servers, visibility, caller) if status.name == name), None)
        if found is None:
            raise NotFoundError(f"No such server: {name!r}")
        return found

    async def listing(request: Request) -> Response:
        caller = api.caller(request)
        body: dict[str, Any] = {
            "servers": [shown(servers, status, caller) for status in visible_statuses(servers, visibility, caller)]
        }
        body["reload_errors"] = list(reloader.reload_errors) if caller.admin else []
        body["restart_needed"] = list(reloader.pending_restart) if caller.admin else []
        return JSONResponse(body)

    async def detail(request: Request) -> Response:
        caller = api.caller(request)
        return JSONResponse({"server": shown(servers, one(caller, request.path_params["name"]), caller)})

    async def add(request: Request) -> Response:
        caller = api.caller(request)
        caller.require_admin()
        added = await register(servers, caller, json_object(await read_json(request)))
        return JSONResponse({"servers": [shown(servers, status, caller) for status in added]}, status_code=201)

    async def patch(request: Request) -> Response:
        caller = api.caller(request)
        caller.require_admin()
        changes = json_object(await read_json(request))
        status = await change(servers, caller, request.path_params["name"], changes)
        return JSONResponse({"server": shown(servers, status, caller)})

    async def restart(request: Request) -> Response:
        caller = api.caller(request)
        caller.require_admin()
        status = await servers.restart(request.path_params["name"])
        return JSONResponse({"server": shown(servers, status, caller)}, status_code=202)

    async def remove(request: Request) -> Response:
        api.caller(request).require_admin()
        await servers.remove(request.path_params["name"])
        return Response(status_code=204)

    item = PATH + "/{name}"
    return [
        Route(PATH, api.route(listing), methods=["GET"]),
        Route(PATH, api.route(add), methods=["POST"]),
        Route(item, api.route(detail), methods=["GET"]),
        Route(item, api.route(patch), methods=["PATCH"]),
        Route(item, api.route(remove), methods=["DELETE"]),
        Route(item + "/restart", api.route(restart, bodyless=True), methods=["POST"]),
    ]
