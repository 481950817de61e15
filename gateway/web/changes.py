"""The changes page (admins): tool definitions a server changed after they were pinned, each as a
diff against its pin, with the accept and reject buttons of `/api/v1/changes`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.api.changes import decide
from gateway.catalog.pinning import ChangeStatus
from gateway.web.pages import PageError, Person, Web

DECIDED_SHOWN = 50


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """Each line of a unified diff with the class that marks it: added, removed, or context."""
    kinds = {"+": "added", "-": "removed", "@": "hunk"}
    lines = diff.splitlines()[2:]  # the two file headers name nothing a person needs
    return [(kinds.get(line[:1], "same"), line) for line in lines]


def routes(web: Web) -> list[Route]:
    """`/changes` and its decisions."""
    pins, servers = web.gateway.pins, web.gateway.servers

    async def page(request: Request, person: Person) -> Response:
        changes = await pins.changes()
        pending = [(change, diff_lines(change.diff())) for change in changes if change.status == ChangeStatus.PENDING]
        decided = [change for change in changes if change.status != ChangeStatus.PENDING][:DECIDED_SHOWN]
        policies = {change.server: servers.tool_change_policy(change.server) for change, _ in pending}
        done = request.query_params.get("done")
        return web.render(
            request, person, "changes.html", pending=pending, decided=decided, policies=policies, done=done
        )

    async def answer(request: Request, person: Person) -> Response:
        action: str = request.path_params["action"]
        if action not in ("accept", "reject"):
            raise PageError(404, f"No such action: {action!r}")
        change_id: str = request.path_params["change_id"]
        decided = await decide(pins, person.caller, change_id, accept=action == "accept", channel="web")
        return RedirectResponse(f"/changes?done={decided.status.value}", status_code=303)

    return [
        Route("/changes", web.page(page, admin=True), methods=["GET"]),
        Route("/changes/{change_id}/{action}", web.page(answer, admin=True), methods=["POST"]),
    ]
