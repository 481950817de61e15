"""The HTTP API for pending approvals: `/api/v1/approvals`, a person's channel the model does not hold.

Behind the gateway's `AuthMiddleware` (the credentials of `/mcp`) and the same Host/Origin checks
as `/mcp`. A caller sees its own pending approvals, an admin all of them; who may decide one is
`approvals.may_decide`. An approval the caller may not see is answered exactly like one that does
not exist.
"""

from __future__ import annotations

from dataclasses import replace

import anyio
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.auth.identity import Identity
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


def approval_routes(gateway: Gateway, security: TransportSecuritySettings | None) -> list[Route]:
    """The routes of `/api/v1/approvals`; `security` is the Host/Origin policy of `/mcp` (None: off)."""
    checks = TransportSecurityMiddleware(security)

    def shown(approval: Approval) -> dict[str, object]:
        # The arguments are the model's text: a configured secret it repeated is not echoed back.
        return replace(approval, arguments=gateway.redact(approval.arguments)).as_dict()

    async def listing(request: Request) -> Response:
        refused = await checks.validate_request(request)
        if refused is not None:
            return refused
        identity = _identity(request)
        pending = await anyio.to_thread.run_sync(gateway.approvals.pending)
        visible = [a for a in pending if may_see(gateway.policy, identity.key, identity.role, a)]
        return JSONResponse({"approvals": [shown(approval) for approval in visible]})

    async def approve(request: Request) -> Response:
        return await _decide(request, approve=True)

    async def decline(request: Request) -> Response:
        return await _decide(request, approve=False)

    async def _decide(request: Request, *, approve: bool) -> Response:
        # A POST must say its body is JSON: a browser cannot send that cross-site without a preflight.
        refused = await checks.validate_request(request, is_post=True)
        if refused is not None:
            return refused
        identity = _identity(request)
        approval_id: str = request.path_params["approval_id"]
        approval = await anyio.to_thread.run_sync(gateway.approvals.get, approval_id)
        if approval is None or not may_see(gateway.policy, identity.key, identity.role, approval):
            return _error(404, "not_found", NOT_FOUND)
        if not may_decide(gateway.policy, identity.key, identity.role, approval):
            return _error(403, "forbidden", f"Only an admin may decide approval {approval_id}")
        try:
            decided = await anyio.to_thread.run_sync(
                gateway.approvals.decide, approval_id, approve, f"api:{identity.key}"
            )
        except ApprovalNotFoundError:
            return _error(404, "not_found", NOT_FOUND)
        except ApprovalClosedError as error:
            return _error(409, "conflict", error.message)
        await gateway.audit.record(decision_entry(decided))
        return JSONResponse({"approval": shown(decided)})

    item = API_PATH + "/{approval_id}"
    return [
        Route(API_PATH, listing, methods=["GET"]),
        Route(item + "/approve", approve, methods=["POST"]),
        Route(item + "/decline", decline, methods=["POST"]),
    ]


def _identity(request: Request) -> Identity:
    # The AuthMiddleware protects this path and always leaves an identity (or answers 401 itself).
    identity = request.state.identity
    assert isinstance(identity, Identity)
    return identity


def _error(status: int, error: str, description: str) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)
