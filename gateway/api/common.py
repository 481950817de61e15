"""What every API route shares: who calls, reading a JSON body, and turning errors into JSON answers.

Every error is `{"error": "<message>", "problems": [{"path": ..., "problem": ...}]}` with the status
of the `OperationError`; a `ConfigError` (a body that is no valid entry) is 422 with its path and
problem; a store that cannot be read or written (a locked SQLite file, PostgreSQL down) is 503.
Nothing the client sends can make a route answer 500 with a traceback: an unexpected failure is
logged and answered as a JSON 500 without details.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.auth.identity import Identity
from gateway.clients.session import SessionContext
from gateway.config.reader import DuplicateKeyError, unique_pairs
from gateway.errors import ConfigError, ForbiddenError, OperationError, ProtocolError, StateUnavailableError
from gateway.problems import ConfigProblems, JsonPath, Problem, nesting_problem, raise_if_any
from gateway.service import Gateway
from gateway.stores import DatabaseError

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"
BODY_SOURCE = "request body"
# Far above any registration or group; a bigger body is refused before it is read whole.
MAX_BODY_BYTES = 1 << 20
Endpoint = Callable[[Request], Awaitable[Response]]


class BadRequestError(OperationError):
    """The request itself is unusable: not JSON, the wrong content type, a bad parameter."""

    status = 400


class TooLargeError(OperationError):
    """The body is larger than the API reads."""

    status = 413


def error_response(status: int, message: str, problems: Sequence[tuple[str, str]] = ()) -> JSONResponse:
    """The JSON answer of every API error."""
    listed = [{"path": path, "problem": problem} for path, problem in problems]
    return JSONResponse({"error": message, "problems": listed}, status_code=status)


def answer_error(error: Exception) -> JSONResponse:
    """The JSON answer for an error a route raised."""
    if isinstance(error, ConfigProblems):
        return error_response(422, "invalid entry", error.problems)
    if isinstance(error, ConfigError):
        return error_response(422, "invalid entry", [(error.path, error.problem)])
    if isinstance(error, OperationError):
        return error_response(error.status, error.message)
    if isinstance(error, ProtocolError):
        return error_response(400, error.message)
    if isinstance(error, StateUnavailableError):
        return error_response(503, f"{error.message}; retry in a moment")
    if isinstance(error, DatabaseError):
        log.warning("the store failed an API request: %s", error.message)
        return error_response(
            503, "the gateway's store cannot be read or written now; nothing was changed (its log says why)"
        )
    log.exception("API request failed")
    return error_response(500, "internal error; the gateway's log has the details")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking, and whether they operate the gateway."""

    identity: Identity
    admin: bool

    def session(self) -> SessionContext:
        """A session context carrying the caller's role, for the visibility rules MCP applies."""
        return SessionContext(
            id="api", caller=self.identity.key, transport="http", created_at=0.0, last_seen=0.0, role=self.identity.role
        )

    def require_admin(self, doing: str = "changing the gateway") -> None:
        """Raise `ForbiddenError` unless the caller may operate the gateway; the message says that
        `doing` (what was asked: a change, or a read only admins may make) needs an admin role."""
        if not self.admin:
            raise ForbiddenError(
                f"{doing} needs an admin role (roles: {{<role>: {{admin: true}}}}); with "
                "authentication off, gateway.admin_without_auth: true"
            )


def caller_of(gateway: Gateway, identity: Identity) -> Caller:
    """`identity` as a caller of `gateway`, with whether it may operate the gateway."""
    if identity.method == "host":
        # The person at the host holds the host token (gateway.runtime.hostaccess).
        admin = True
    elif gateway.authenticator.settings.enabled:
        admin = gateway.policy.is_admin(identity.role)
    else:
        # Without authentication anyone who reaches the port would operate the gateway, and
        # registering a stdio server runs a command on the host: only by explicit opt-in.
        admin = gateway.config.settings.admin_without_auth
    return Caller(identity, admin)


class Api:
    """The gateway and the edge checks every route runs before its own work."""

    def __init__(self, gateway: Gateway, checks: TransportSecurityMiddleware) -> None:
        self.gateway = gateway
        self._checks = checks

    def caller(self, request: Request) -> Caller:
        """The caller of `request` (the AuthMiddleware protects the API and always leaves one)."""
        identity = request.state.identity
        assert isinstance(identity, Identity)
        return caller_of(self.gateway, identity)

    def route(self, endpoint: Endpoint, *, bodyless: bool = False) -> Endpoint:
        """`endpoint` behind the Host/Origin checks (and, for a body, `Content-Type: application/json`),
        with every error answered as JSON. A `bodyless` action (restart, approve, accept, ...) reads no
        body and may also be posted without one, by a client that is no browser (`not_from_a_browser`)."""

        async def guarded(request: Request) -> Response:
            # A body must say it is JSON: a browser cannot send that cross-site without a preflight.
            typed = request.method in ("POST", "PATCH") and not (bodyless and not_from_a_browser(request))
            refused = await self._checks.validate_request(request, is_post=typed)
            if refused is not None:
                return error_response(refused.status_code, bytes(refused.body).decode("utf-8", "replace"))
            try:
                return await endpoint(request)
            except Exception as error:  # every failure is answered as JSON, never as a traceback
                return answer_error(error)

        return guarded


def not_from_a_browser(request: Request) -> bool:
    """Whether `request` carries no body and comes from no page: it has an `Authorization` header,
    which no form and no cross-site `fetch` without a preflight can set, or no `Origin`, which every
    browser sends with a POST. Such a request needs no JSON content type to prove it was not forged."""
    headers = request.headers
    empty = headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers
    return empty and ("authorization" in headers or "origin" not in headers)


async def read_json(request: Request) -> Any:
    """The request's JSON body; 400 when it is not JSON, 413 past `MAX_BODY_BYTES`."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise TooLargeError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise TooLargeError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body, object_pairs_hook=unique_pairs)
    except DuplicateKeyError as error:
        raise ConfigError(BODY_SOURCE, "", str(error)) from None
    except (ValueError, RecursionError) as error:
        # RecursionError: arrays nested deeper than the decoder recurses.
        raise BadRequestError("the body is not valid JSON") from error
    raise_if_any(BODY_SOURCE, nesting_problem(data))
    raise_if_any(BODY_SOURCE, text_problems(data))
    return data


def text_problems(data: Any) -> list[Problem]:
    """Where `data` holds a string that is not Unicode text (a lone surrogate escape such as
    `"\\udfff"`): no file, process argument or environment can carry it, so an entry holding one
    could be stored but never start."""
    pending: list[tuple[Any, JsonPath]] = [(data, ())]
    while pending:
        value, path = pending.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not _is_text(key):
                    return [(path, "a key holds a lone surrogate escape, which is not Unicode text")]
                pending.append((item, (*path, key)))
        elif isinstance(value, list):
            pending.extend((item, (*path, index)) for index, item in enumerate(value))
        elif isinstance(value, str) and not _is_text(value):
            return [(path, "holds a lone surrogate escape, which is not Unicode text")]
    return []


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_object(data: Any) -> dict[str, Any]:
    """`data` when it is a JSON object; 422 otherwise."""
    if not isinstance(data, dict):
        raise ConfigError(BODY_SOURCE, "", f"expected a JSON object, got {_kind(data)}")
    return data


def _kind(data: Any) -> str:
    names = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return names.get(type(data), "a number")


def query_int(request: Request, name: str, default: int, maximum: int) -> int:
    """A whole-number query parameter between 1 and `maximum`; 400 naming it otherwise."""
    text = request.query_params.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 9) or not 1 <= int(text) <= maximum:
        raise BadRequestError(f"{name} must be a whole number from 1 to {maximum}")
    return int(text)
