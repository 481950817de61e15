"""The approvals page: pending high-risk calls with tool, caller and arguments, and the approve and
decline buttons of those who may decide them: the human channel a model cannot reach."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.api.approvals import decide, visible_pending
from gateway.pipeline.approvals import may_decide
from gateway.web.pages import PageError, Person, Web

SUMMARY_CHARS = 300


def routes(web: Web) -> list[Route]:
    """`/approvals` and its decisions."""
    gateway = web.gateway

    async def page(request: Request, person: Person) -> Response:
        caller = person.caller
        pending = await visible_pending(gateway, caller)
        policy = gateway.policy
        rows = [
            (
                approval,
                approval.arguments[:SUMMARY_CHARS],
                may_decide(policy, caller.identity.key, caller.admin, approval),
            )
            for approval in pending
        ]
        return web.render(request, person, "approvals.html", rows=rows, decided=request.query_params.get("decided"))

    async def answer(request: Request, person: Person) -> Response:
        action: str = request.path_params["action"]
        if action not in ("approve", "decline"):
            raise PageError(404, f"No such action: {action!r}")
        approval_id: str = request.path_params["approval_id"]
        decided = await decide(gateway, person.caller, approval_id, approve=action == "approve", channel="web")
        return RedirectResponse(f"/approvals?decided={decided.status.value}", status_code=303)

    return [
        Route("/approvals", web.page(page), methods=["GET"]),
        Route("/approvals/{approval_id}/{action}", web.page(answer), methods=["POST"]),
    ]
