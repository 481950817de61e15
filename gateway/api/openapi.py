"""The OpenAPI 3.1 document of the admin API, served at `/api/openapi.json`.

Written out by hand, route by route, so it says what each answer holds; a test checks that every
route mounted under `/api/v1` is described here and nothing else.
"""

from __future__ import annotations

from typing import Any

from gateway.catalog.poisoning import REASONS

OPENAPI_PATH = "/api/openapi.json"

_ERROR = {
    "type": "object",
    "required": ["error", "problems"],
    "properties": {
        "error": {"type": "string"},
        "problems": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "problem"],
                "properties": {"path": {"type": "string"}, "problem": {"type": "string"}},
            },
        },
    },
}
_SERVER = {
    "type": "object",
    "description": (
        "A server's status: name, state, transport, tools, restarts, required and more; for admins "
        "its error, and its headers and env with their values masked"
    ),
    "required": ["name", "state"],
    "properties": {"name": {"type": "string"}, "state": {"type": "string"}, "error": {"type": ["string", "null"]}},
    "additionalProperties": True,
}
_TOOL = {
    "type": "object",
    "required": ["name", "server", "original_name", "risk", "layer", "tags", "flags"],
    "properties": {
        "name": {"type": "string"},
        "title": {"type": ["string", "null"]},
        "description": {"type": "string"},
        "server": {"type": "string"},
        "original_name": {"type": "string"},
        "risk": {"enum": ["low", "medium", "high"]},
        "layer": {"enum": ["core", "extended"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "sandbox": {"type": ["string", "null"]},
        "flags": {
            "description": "What in the tool's model-visible text looks aimed at the model (flagged, not blocked)",
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kind", "reason", "where", "excerpt"],
                "properties": {
                    "kind": {"enum": list(REASONS)},
                    "reason": {"type": "string"},
                    "where": {"type": "string"},
                    "excerpt": {"type": "string"},
                },
            },
        },
    },
}
_SKILL = {
    "type": "object",
    "required": ["name", "description", "tools", "problems"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "tools": {"type": "array", "items": {"type": "string"}},
        "problems": {"type": "array", "items": {"type": "string"}},
        "instructions": {"type": "string"},
    },
}
_GROUP = {
    "type": "object",
    "required": ["name", "source", "tools", "endpoint"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "source": {"enum": ["file", "api"]},
        "tools": {"type": "integer"},
        "endpoint": {"type": "string"},
        "tool_names": {"type": "array", "items": {"type": "string"}},
    },
}
_SESSION = {
    "type": "object",
    "required": ["id", "caller", "transport", "last_seen"],
    "properties": {
        "id": {"type": "string"},
        "caller": {"type": "string"},
        "role": {"type": ["string", "null"]},
        "transport": {"type": "string"},
        "group": {"type": ["string", "null"]},
        "created_at": {"type": "number", "description": "epoch seconds; only for this replica's sessions"},
        "last_seen": {"type": "number", "description": "epoch seconds"},
        "replica": {"type": "string", "description": "the other replica holding this HTTP session (store.redis)"},
    },
}
_APPROVAL = {"type": "object", "description": "id, status, caller, role, tool, arguments, created, expires, decided_by"}
_CHANGE = {
    "type": "object",
    "description": "id, server, tool, status, fields, detected, decided_by, decided, "
    "old and new {fingerprint, definition}, diff",
}
_REGISTRATION = {
    "description": "a gateway server entry with a name, an mcpServers fragment, or a registry server.json",
    "oneOf": [
        {"type": "object", "required": ["name"], "description": "{name, command, args, ...} or {name, url, ...}"},
        {"type": "object", "required": ["mcpServers"]},
        {"type": "object", "required": ["name"], "description": "server.json with packages or remotes"},
    ],
}
_GROUP_ENTRY = {
    "type": "object",
    "required": ["name"],
    "description": "{name, description, allow: [rules], deny: [rules]}",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _wrapped(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": [key], "properties": {key: schema}}


def _listing(key: str, item: str) -> dict[str, Any]:
    return _wrapped(key, {"type": "array", "items": _ref(item)})


def _operation(
    summary: str,
    status: int,
    answer: dict[str, Any] | None,
    *,
    body: dict[str, Any] | None = None,
    query: tuple[str, ...] = (),
    path: tuple[str, ...] = (),
    errors: tuple[int, ...] = (),
) -> dict[str, Any]:
    responses: dict[str, Any] = {str(status): {"description": summary}}
    if answer is not None:
        responses[str(status)]["content"] = {"application/json": {"schema": answer}}
    for code in (401, *errors):
        responses[str(code)] = {"description": "an error", "content": {"application/json": {"schema": _ref("Error")}}}
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in path]
    parameters += [{"name": name, "in": "query", "schema": {"type": "string"}} for name in query]
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return operation


_CHANGE_ERRORS = (400, 403, 404, 409, 413, 422)


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every `/api/v1` route."""
    server = _wrapped("server", _ref("Server"))
    group = _wrapped("group", _ref("Group"))
    approval = _wrapped("approval", _ref("Approval"))
    change = _wrapped("change", _ref("Change"))
    servers = {**_listing("servers", "Server")}
    servers["properties"]["reload_errors"] = {"type": "array", "items": {"type": "string"}}
    servers["properties"]["restart_needed"] = {"type": "array", "items": {"type": "string"}}
    tools = _listing("tools", "Tool")
    tools["properties"] |= {"next_cursor": {"type": ["string", "null"]}, "total": {"type": "integer"}}
    tool = _wrapped(
        "tool",
        {
            "allOf": [_ref("Tool")],
            "description": "plus input_schema, output_schema, annotations, icons, _meta, skills, groups",
        },
    )
    name = ("name",)
    paths: dict[str, Any] = {
        "/api/v1/servers": {
            "get": _operation("every server the caller may see, with its state", 200, servers),
            "post": _operation(
                "register servers", 201, _listing("servers", "Server"), body=_ref("Registration"), errors=_CHANGE_ERRORS
            ),
        },
        "/api/v1/servers/{name}": {
            "get": _operation("one server", 200, server, path=name, errors=(404,)),
            "patch": _operation(
                "change a server, or enable or disable it",
                200,
                server,
                body={"type": "object"},
                path=name,
                errors=_CHANGE_ERRORS,
            ),
            "delete": _operation("remove an API-registered server", 204, None, path=name, errors=(403, 404, 409)),
        },
        "/api/v1/servers/{name}/restart": {
            "post": _operation("restart a server", 202, server, path=name, errors=(403, 404, 409)),
        },
        "/api/v1/tools": {
            "get": _operation(
                "search the catalog",
                200,
                tools,
                query=("q", "server", "tag", "risk", "layer", "group", "cursor", "limit"),
                errors=(400, 404),
            ),
        },
        "/api/v1/tools/{name}": {"get": _operation("one tool in full", 200, tool, path=name, errors=(404,))},
        "/api/v1/skills": {"get": _operation("the skills the caller may see", 200, _listing("skills", "Skill"))},
        "/api/v1/skills/{name}": {
            "get": _operation(
                "one skill with its instructions", 200, _wrapped("skill", _ref("Skill")), path=name, errors=(404,)
            )
        },
        "/api/v1/groups": {
            "get": _operation("tool groups", 200, _listing("groups", "Group")),
            "post": _operation("add a group", 201, group, body=_ref("GroupEntry"), errors=_CHANGE_ERRORS),
        },
        "/api/v1/groups/{name}": {
            "get": _operation("one group with its tools", 200, group, path=name, errors=(404,)),
            "delete": _operation("remove an API-added group", 204, None, path=name, errors=(403, 404, 409)),
        },
        "/api/v1/approvals": {"get": _operation("pending approvals", 200, _listing("approvals", "Approval"))},
        "/api/v1/approvals/{approval_id}/approve": {
            "post": _operation(
                "approve a parked call", 200, approval, path=("approval_id",), errors=(400, 403, 404, 409)
            )
        },
        "/api/v1/approvals/{approval_id}/decline": {
            "post": _operation(
                "decline a parked call", 200, approval, path=("approval_id",), errors=(400, 403, 404, 409)
            )
        },
        "/api/v1/changes": {
            "get": _operation("changed tool definitions (admins)", 200, _listing("changes", "Change"), errors=(403,))
        },
        "/api/v1/changes/{change_id}/accept": {
            "post": _operation(
                "pin a changed definition and serve it", 200, change, path=("change_id",), errors=(400, 403, 404, 409)
            )
        },
        "/api/v1/changes/{change_id}/reject": {
            "post": _operation(
                "keep a changed definition hidden", 200, change, path=("change_id",), errors=(400, 403, 404, 409)
            )
        },
        "/api/v1/sessions": {
            "get": _operation("live sessions (admins)", 200, _listing("sessions", "Session"), errors=(403,))
        },
        "/api/v1/sessions/{session_id}": {
            "delete": _operation("end a session", 204, None, path=("session_id",), errors=(403, 404))
        },
    }
    schemas = {
        "Error": _ERROR,
        "Server": _SERVER,
        "Tool": _TOOL,
        "Skill": _SKILL,
        "Group": _GROUP,
        "Session": _SESSION,
        "Approval": _APPROVAL,
        "Change": _CHANGE,
        "Registration": _REGISTRATION,
        "GroupEntry": _GROUP_ENTRY,
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "MCP gateway admin API",
            "version": "1",
            "description": "Reading is filtered by the caller's role; changing needs an admin role. See docs/api.md.",
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
