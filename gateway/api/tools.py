"""`/api/v1/tools`: searching and filtering the catalog as the caller's role sees it, and one tool in full.

A tool the role may not see is answered exactly like one that does not exist (404). The search is
pure (`search`): a case-insensitive substring over name, title and description, and exact filters
on server, tag, risk, layer and group, paged with the catalog's cursors.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import API_PREFIX, Api, BadRequestError, Caller, query_int
from gateway.auth.policy import derive_risk
from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog, page
from gateway.catalog.poisoning import Finding
from gateway.catalog.tools import Risk, ToolRecord
from gateway.errors import NotFoundError, ProtocolError
from gateway.live.groups import LiveGroups
from gateway.service import Gateway

PATH = f"{API_PREFIX}/tools"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
RISKS = tuple(risk.value for risk in Risk)
LAYERS = ("core", "extended")


@dataclass(frozen=True, slots=True)
class ToolQuery:
    """What `GET /api/v1/tools` asks for; None means no condition."""

    q: str | None = None
    server: str | None = None
    tag: str | None = None
    risk: str | None = None
    layer: str | None = None
    members: Collection[str] | None = None
    """The names the `group` filter admits."""
    sandboxed: bool | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """A tool with what the search compares, worked out once: its risk and its folded text."""

    tool: ToolRecord
    risk: str
    text: str

    @classmethod
    def of(cls, tool: ToolRecord) -> Entry:
        """The entry of `tool`."""
        return cls(tool, derive_risk(tool).value, f"{tool.name}\n{tool.title or ''}\n{tool.description}".casefold())


def search(entries: Iterable[Entry], query: ToolQuery) -> list[ToolRecord]:
    """The tools meeting every condition of `query`, in catalog order."""
    needle = query.q.casefold() if query.q else None
    found = []
    for entry in entries:
        tool = entry.tool
        if query.server is not None and tool.source != query.server:
            continue
        if query.layer is not None and tool.layer != query.layer:
            continue
        if query.tag is not None and query.tag not in tool.tags:
            continue
        if query.members is not None and tool.name not in query.members:
            continue
        if query.risk is not None and entry.risk != query.risk:
            continue
        if query.sandboxed is not None and (tool.sandbox is not None) != query.sandboxed:
            continue
        if needle is not None and needle not in entry.text:
            continue
        found.append(tool)
    return found


class VisibleTools:
    """The entries each role may see, worked out again only when the catalog or the policy changed:
    a search then costs one pass of plain comparisons, whatever the role's rules."""

    def __init__(self, catalog: Catalog, visibility: Visibility) -> None:
        self._catalog = catalog
        self._visibility = visibility
        self._cached: dict[str | None, tuple[object, object, list[Entry]]] = {}

    def entries(self, caller: Caller) -> list[Entry]:
        """What `caller`'s role may see of the catalog, in catalog order."""
        # The catalog replaces its list on every change, and a reload replaces the policy.
        tools, policy = self._catalog.tools, self._visibility.policy
        role = caller.identity.role
        cached = self._cached.get(role)
        if cached is not None and cached[0] is tools and cached[1] is policy:
            return cached[2]
        entries = [Entry.of(tool) for tool in self._visibility.tools(caller.session())]
        self._cached[role] = (tools, policy, entries)
        return entries


def summary(tool: ToolRecord, flags: Iterable[Finding]) -> dict[str, Any]:
    """A tool as a search lists it, with what its text was flagged for (`gateway.catalog.poisoning`)."""
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "server": tool.source,
        "original_name": tool.original_name,
        "risk": derive_risk(tool).value,
        "layer": tool.layer,
        "tags": sorted(tool.tags),
        "sandbox": tool.sandbox,
        "flags": [finding.as_json() for finding in flags],
    }


def tool_query(groups: LiveGroups, caller: Caller, params: Mapping[str, str]) -> ToolQuery:
    """The search `params` ask for (q, server, tag, risk, layer, group); 400 naming a bad value."""
    for key, allowed in (("risk", RISKS), ("layer", LAYERS)):
        if params.get(key, allowed[0]) not in allowed:
            raise BadRequestError(f"{key} must be one of {', '.join(allowed)}")
    group = params.get("group")
    members = None
    if group is not None:
        members = {tool.name for tool in groups.tools(group, caller.identity.role)}
    return ToolQuery(
        q=params.get("q") or None,
        server=params.get("server"),
        tag=params.get("tag"),
        risk=params.get("risk"),
        layer=params.get("layer"),
        members=members,
    )


@dataclass(frozen=True, slots=True)
class ToolDetail:
    """One tool as `caller` may see it, with the skills and groups that carry it for that caller."""

    tool: ToolRecord
    skills: list[str]
    groups: list[str]


def tool_detail(gateway: Gateway, caller: Caller, name: str) -> ToolDetail:
    """The tool `name`; `NotFoundError` for a tool `caller` may not see, as for one that does not exist."""
    session = caller.session()
    tool = gateway.catalog.tool(name)
    if tool is None or not gateway.visibility.may_see(session, tool):
        raise NotFoundError(f"No such tool: {name!r}")
    skills = {skill.name for skill in gateway.skills.visible_skills(session)}
    groups = [
        group.name
        for group in gateway.groups.all()
        if any(member.name == name for member in gateway.groups.tools(group.name, caller.identity.role))
    ]
    return ToolDetail(tool, [skill for skill in gateway.skills.carriers(name) if skill in skills], groups)


def tool_routes(api: Api) -> list[Route]:
    """The routes of `/api/v1/tools`."""
    gateway = api.gateway
    visible = VisibleTools(gateway.catalog, gateway.visibility)

    async def listing(request: Request) -> Response:
        caller = api.caller(request)
        params = request.query_params
        limit = query_int(request, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        found = search(visible.entries(caller), tool_query(gateway.groups, caller, params))
        try:
            chunk, next_cursor = page(found, params.get("cursor"), limit, lambda tool: tool.name)
        except ProtocolError as error:
            raise BadRequestError(f"cursor: {error.message}") from error
        return JSONResponse(
            {
                "tools": [summary(tool, gateway.flags.of(tool)) for tool in chunk],
                "next_cursor": next_cursor,
                "total": len(found),
            }
        )

    async def detail(request: Request) -> Response:
        found = tool_detail(gateway, api.caller(request), request.path_params["name"])
        tool = found.tool
        annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
        body = {
            **summary(tool, gateway.flags.of(tool)),
            "input_schema": dict(tool.input_schema),
            "output_schema": dict(tool.output_schema) if tool.output_schema is not None else None,
            "annotations": annotations,
            "icons": [icon.model_dump(mode="json", by_alias=True, exclude_none=True) for icon in tool.icons or ()],
            "_meta": dict(tool.meta) if tool.meta is not None else None,
            "skills": found.skills,
            "groups": found.groups,
        }
        return JSONResponse({"tool": body})

    return [
        Route(PATH, api.route(listing), methods=["GET"]),
        Route(PATH + "/{name}", api.route(detail), methods=["GET"]),
    ]
