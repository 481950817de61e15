"""`/api/v1/changes`: tool definitions a server changed after they were pinned, for admins to accept or reject.

Every route needs an admin: a change shows the definition of a tool that may be held from every
client, and deciding one chooses what every client is served.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import Api, Caller
from gateway.errors import ConflictError, NotFoundError
from gateway.live.pins import LivePins
from gateway.stores.pins import Change, ChangeClosedError, ChangeNotFoundError

API_PATH = "/api/v1/changes"


async def decide(pins: LivePins, caller: Caller, change_id: str, *, accept: bool, channel: str) -> Change:
    """Accept or reject a pending change as `caller` (an admin), through `channel` (`api`, `web`)."""
    caller.require_admin()
    try:
        return await pins.decide(change_id, accept, f"{channel}:{caller.identity.key}")
    except ChangeNotFoundError as error:
        raise NotFoundError(error.message) from error
    except ChangeClosedError as error:
        raise ConflictError(error.message) from error


def change_routes(api: Api, pins: LivePins) -> list[Route]:
    """The routes of `/api/v1/changes`, over the live `pins`."""

    async def listing(request: Request) -> Response:
        api.caller(request).require_admin("reading the changed tool definitions")
        changes = await pins.changes()
        return JSONResponse({"changes": [change.as_dict() for change in changes]})

    async def accept(request: Request) -> Response:
        return await answer(request, accept=True)

    async def reject(request: Request) -> Response:
        return await answer(request, accept=False)

    async def answer(request: Request, *, accept: bool) -> Response:
        change_id: str = request.path_params["change_id"]
        decided = await decide(pins, api.caller(request), change_id, accept=accept, channel="api")
        return JSONResponse({"change": decided.as_dict()})

    item = API_PATH + "/{change_id}"
    return [
        Route(API_PATH, api.route(listing), methods=["GET"]),
        Route(item + "/accept", api.route(accept, bodyless=True), methods=["POST"]),
        Route(item + "/reject", api.route(reject, bodyless=True), methods=["POST"]),
    ]
