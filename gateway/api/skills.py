"""`/api/v1/skills`: the skills the caller's role may see, the tools each brings, and what is wrong with them.

Problems are shown to admins: an `allowed-tools` entry that selects no tool of the catalog, and
(in the listing) the skill folders that did not load at all, with the reason.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.common import API_PREFIX, Api, Caller
from gateway.errors import NotFoundError
from gateway.service import Gateway
from gateway.skills.folder import Skill

PATH = f"{API_PREFIX}/skills"


def skill_problems(gateway: Gateway, skill: Skill) -> list[str]:
    """What is wrong with `skill` in today's catalog: `allowed-tools` entries that select no tool."""
    names = [tool.name for tool in gateway.catalog.tools]
    return [
        f"allowed-tools entry {pattern!r} selects no tool in the catalog"
        for pattern in skill.allowed_tools
        if not any(fnmatchcase(name, pattern) for name in names)
    ]


def visible_skill(gateway: Gateway, caller: Caller, name: str) -> Skill:
    """The skill `name` if `caller`'s role may see it; `NotFoundError` otherwise."""
    skill = next((s for s in gateway.skills.visible_skills(caller.session()) if s.name == name), None)
    if skill is None:
        raise NotFoundError(f"No such skill: {name!r}")
    return skill


def skill_routes(api: Api) -> list[Route]:
    """The routes of `/api/v1/skills`."""
    gateway = api.gateway

    def shown(skill: Skill, caller: Caller) -> dict[str, Any]:
        tools = gateway.skills.skill_tools(caller.session(), skill)
        return {
            "name": skill.name,
            "description": skill.description,
            "tools": [tool.name for tool in tools],
            "problems": skill_problems(gateway, skill) if caller.admin else [],
        }

    async def listing(request: Request) -> Response:
        caller = api.caller(request)
        skills = gateway.skills.visible_skills(caller.session())
        body: dict[str, Any] = {"skills": [shown(skill, caller) for skill in skills]}
        if caller.admin:
            body["problems"] = [str(problem) for problem in gateway.skills.skills.problems]
        return JSONResponse(body)

    async def detail(request: Request) -> Response:
        caller = api.caller(request)
        skill = visible_skill(gateway, caller, request.path_params["name"])
        return JSONResponse({"skill": {**shown(skill, caller), "instructions": skill.body}})

    return [
        Route(PATH, api.route(listing), methods=["GET"]),
        Route(PATH + "/{name}", api.route(detail), methods=["GET"]),
    ]
