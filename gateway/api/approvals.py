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
from gateway.auth.identity import Identity
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


async def visible_pending(gateway: Gateway, identity: Identity) -> list[Approval]:
    """The pending approvals `identity` may see: its own, or every one for an admin."""
    pending = await anyio.to_thread.run_sync(gateway.approvals.pending)
    return [shown(gateway, a) for a in pending if may_see(gateway.policy, identity.key, identity.role, a)]


async def decide(gateway: Gateway, identity: Identity, approval_id: str, *, approve: bool, channel: str) -> Approval:
    """Approve or decline an approval as `identity` (through `channel`: `api`, `web`), and audit it."""
    approval = await anyio.to_thread.run_sync(gateway.approvals.get, approval_id)
    if approval is None or not may_see(gateway.policy, identity.key, identity.role, approval):
        raise NotFoundError(NOT_FOUND)
    if not may_decide(gateway.policy, identity.key, identity.role, approval):
        raise ForbiddenError(f"Only an admin may decide approval {approval_id}")
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
        identity = api.caller(request).identity
        visible = await visible_pending(gateway, identity)
        return JSONResponse({"approvals": [approval.as_dict() for approval in visible]})

    async def approve(request: Request) -> Response:
        return await answer(request, approve=True)

    async def decline(request: Request) -> Response:
        return await answer(request, approve=False)

    async def answer(request: Request, *, approve: bool) -> Response:
        identity = api.caller(request).identity
        approval_id: str = request.path_params["approval_id"]
        decided = await decide(gateway, identity, approval_id, approve=approve, channel="api")
        return JSONResponse({"approval": decided.as_dict()})

    item = API_PATH + "/{approval_id}"
    return [
        Route(API_PATH, api.route(listing), methods=["GET"]),
        Route(item + "/approve", api.route(approve, bodyless=True), methods=["POST"]),
        Route(item + "/decline", api.route(decline, bodyless=True), methods=["POST"]),
    ]
