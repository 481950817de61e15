"""The skills pages: each skill the person's role sees, its problems (admins), its SKILL.md rendered
with raw HTML off, and its files."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.api.skills import skill_problems, visible_skill
from gateway.web.markup import render_markdown
from gateway.web.pages import Person, Web


def routes(web: Web) -> list[Route]:
    """`/skills` and `/skills/{name}`."""
    gateway = web.gateway

    async def listing(request: Request, person: Person) -> Response:
        session = person.caller.session()
        skills = [
            (skill, gateway.skills.skill_tools(session, skill), skill_problems(gateway, skill) if person.admin else [])
            for skill in gateway.skills.visible_skills(session)
        ]
        unloaded = [str(problem) for problem in gateway.skills.skills.problems] if person.admin else []
        return web.render(request, person, "skills.html", skills=skills, unloaded=unloaded)

    async def detail(request: Request, person: Person) -> Response:
        skill = visible_skill(gateway, person.caller, request.path_params["name"])
        return web.render(
            request,
            person,
            "skill.html",
            skill=skill,
            tools=gateway.skills.skill_tools(person.caller.session(), skill),
            problems=skill_problems(gateway, skill) if person.admin else [],
            instructions=render_markdown(skill.body),
            files=skill.files(),
        )

    return [
        Route("/skills", web.page(listing), methods=["GET"]),
        Route("/skills/{name}", web.page(detail), methods=["GET"]),
    ]
