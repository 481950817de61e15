"""`/api/v1/sessions`: the live client sessions, for admins; ending one.

With replicas (`store.redis`), the listing adds the HTTP sessions the other replicas hold, as their
latest heartbeat told (id, caller, replica, last activity), and ending one of those has its replica
end it, busy or not.

Ending a session releases its state (active skills, workspace instances, per-session servers)
and, for an HTTP session, its transport: the client's next request with that id is answered 404,
as after its own DELETE, and it starts a new session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import API_PREFIX, Api
from gateway.clients.session import SessionContext
from gateway.errors import NotFoundError
from gateway.serving.sessions import Sessions
from gateway.shared.sessions import RemoteSession, SessionDirectory

PATH = f"{API_PREFIX}/sessions"
EndTransport = Callable[[str], Awaitable[None]]


def session_routes(
    api: Api, sessions: Sessions, directory: SessionDirectory, end_transport: EndTransport
) -> list[Route]:
    """The routes of `/api/v1/sessions`: this process's `sessions`, the other replicas' in `directory`;
    `end_transport` ends an HTTP session's transport by id."""

    def shown(context: SessionContext) -> dict[str, object]:
        return {
            "id": context.id,
            "caller": context.caller,
            "role": context.role,
            "transport": context.transport,
            "group": context.group,
            "created_at": sessions.wall_time(context.created_at),
            "last_seen": sessions.wall_time(context.last_seen),
        }

    def shown_elsewhere(held: RemoteSession) -> dict[str, object]:
        return {
            "id": held.id,
            "caller": held.caller,
            "transport": "http",
            "replica": held.replica,
            "last_seen": held.last_active,
        }

    async def listing(request: Request) -> Response:
        api.caller(request).require_admin("reading the sessions (who is connected, from where)")
        live = sorted(sessions.live(), key=lambda context: context.created_at)
        elsewhere = await directory.elsewhere()
        listed = [shown(context) for context in live] + [shown_elsewhere(held) for held in elsewhere]
        return JSONResponse({"sessions": listed})

    async def end(request: Request) -> Response:
        api.caller(request).require_admin()
        session_id: str = request.path_params["session_id"]
        if sessions.get(session_id) is not None:
            await end_transport(session_id)
            await sessions.close(session_id)
        elif not await directory.end_elsewhere(session_id):
            raise NotFoundError(f"No such session: {session_id!r}")
        return Response(status_code=204)

    return [
        Route(PATH, api.route(listing), methods=["GET"]),
        Route(PATH + "/{session_id}", api.route(end), methods=["DELETE"]),
    ]
