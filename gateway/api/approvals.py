"""`/api/v1/approvals`: pending approvals, a person's channel the model does not hold.

A caller sees its own pending approvals, an admin (an admin role, the host token, or anyone with
`admin_without_auth`) all of them; who may decide one is `approvals.may_decide`. An approval the
caller may not see is answered exactly like one that does not exist.
"""

from __future__ import annotations

from dataclasses import replace

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import Api, Caller
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
from gateway.service import Gateway

# The same words for an unknown id and one the caller may not see, so the answer tells nothing.
NOT_FOUND = "No such approval"


def shown(gateway: Gateway, approval: Approval) -> Approval:
    """`approval` as a person is shown it: a configured secret the model repeated is not echoed back."""
    return replace(approval, arguments=gateway.redact(approval.arguments))


async def visible_pending(gateway: Gateway, caller: Caller) -> list[Approval]:
    """The pending approvals `caller` may see: its own, or every one for an admin."""
    pending = await anyio.to_thread.run_sync(gateway.approvals.pending)
    return [shown(gateway, a) for a in pending if may_see(caller.identity.key, caller.admin, a)]


async def decide(gateway: Gateway, caller: Caller, approval_id: str, *, approve: bool, channel: str) -> Approval:
    """Approve or decline an approval as `caller` (through `channel`: `api`, `web`), and audit it."""
    identity = caller.identity
    approval = await anyio.to_thread.run_sync(gateway.approvals.get, approval_id)
    if approval is None or not may_see(identity.key, caller.admin, approval):
        raise NotFoundError(NOT_FOUND)
    if not may_decide(gateway.policy, identity.key, caller.admin, approval):
        raise ForbiddenError(
            f"Only an admin may decide approval {approval_id}: on the gateway's host, "
            f"`python -m gateway approvals approve {approval_id}` does"
        )
    try:
        decided = await anyio.to_thread.run_sync(
            gateway.approvals.decide, approval_id, approve, f"{channel}:{identity.key}"
        )
    except ApprovalNotFoundError as error:
        raise NotFoundError(NOT_FOUND) from error
    except ApprovalClosedError as error:
        raise ConflictError(error.message) from error
    await gateway.audit.record(decision_entry(decided))
    return shown(gateway, decided)


def approval_routes(api: Api) -> list[Route]:
    """The routes of `/api/v1/approvals`."""
    gateway = api.gateway

    async def listing(request: Request) -> Response:
        visible = await visible_pending(gateway, api.caller(request))
        return JSONResponse({"approvals": [approval.as_dict() for approval in visible]})

    async def approve(request: Request) -> Response:
        return await answer(request, approve=True)

    async def decline(request: Request) -> Response:
        return await answer(request, approve=False)

    async def answer(request: Request, *, approve: bool) -> Response:
        approval_id: str = request.path_params["approval_id"]
        decided = await decide(gateway, api.caller(request), approval_id, approve=approve, channel="api")
        return JSONResponse({"approval": decided.as_dict()})

    item = API_PATH + "/{approval_id}"
    return [
        Route(API_PATH, api.route(listing), methods=["GET"]),
        Route(item + "/approve", api.route(approve, bodyless=True), methods=["POST"]),
        Route(item + "/decline", api.route(decline, bodyless=True), methods=["POST"]),
    ]
