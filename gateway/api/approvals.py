"""`/api/v1/approvals`: pending approvals, a person's channel the model does not hold.

A caller sees its own pending approvals, an admin all of them; who may decide one is
`approvals.may_decide`. An approval the caller may not see is answered exactly like one that
does not exist.
"""

from __future__ import annotations

from dataclasses import replace

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import Api
from gateway.errors import ConflictError, ForbiddenError, NotFoundError
from gateway.pipeline.approvals import (
    API_PATH,
    Approval,
    ApprovalClosedError,
    ApprovalNotFoundError,
    decision_entry,
    may_decide,
    may_see,
)

# The same words for an unknown id and one the caller may not see, so the answer tells nothing.
NOT_FOUND = "No such approval"


def approval_routes(api: Api) -> list[Route]:
    """The routes of `/api/v1/approvals`."""
    gateway = api.gateway

    def shown(approval: Approval) -> dict[str, object]:
        # The arguments are the model's text: a configured secret it repeated is not echoed back.
        return replace(approval, arguments=gateway.redact(approval.arguments)).as_dict()

    async def listing(request: Request) -> Response:
        identity = api.caller(request).identity
        pending = await anyio.to_thread.run_sync(gateway.approvals.pending)
        visible = [a for a in pending if may_see(gateway.policy, identity.key, identity.role, a)]
        return JSONResponse({"approvals": [shown(approval) for approval in visible]})

    async def approve(request: Request) -> Response:
        return await decide(request, approve=True)

    async def decline(request: Request) -> Response:
        return await decide(request, approve=False)

    async def decide(request: Request, *, approve: bool) -> Response:
        identity = api.caller(request).identity
        approval_id: str = request.path_params["approval_id"]
        approval = await anyio.to_thread.run_sync(gateway.approvals.get, approval_id)
        if approval is None or not may_see(gateway.policy, identity.key, identity.role, approval):
            raise NotFoundError(NOT_FOUND)
        if not may_decide(gateway.policy, identity.key, identity.role, approval):
            raise ForbiddenError(f"Only an admin may decide approval {approval_id}")
        try:
            decided = await anyio.to_thread.run_sync(
                gateway.approvals.decide, approval_id, approve, f"api:{identity.key}"
            )
        except ApprovalNotFoundError as error:
            raise NotFoundError(NOT_FOUND) from error
        except ApprovalClosedError as error:
            raise ConflictError(error.message) from error
        await gateway.audit.record(decision_entry(decided))
        return JSONResponse({"approval": shown(decided)})

    item = API_PATH + "/{approval_id}"
    return [
        Route(API_PATH, api.route(listing), methods=["GET"]),
        Route(item + "/approve", api.route(approve), methods=["POST"]),
        Route(item + "/decline", api.route(decline), methods=["POST"]),
    ]
