"""A tool's page: its icon, description, parameter table, output schema, annotations, risk, where it
comes from, who carries and sees it, its recent calls (with a sparkline of the last 24 hours), and
the try-it form that calls it as the signed-in person, beside the result its MCP Apps view if it
names one (`gateway.web.apps`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.api.tools import tool_detail
from gateway.auth.policy import derive_risk
from gateway.catalog.apps import view_of
from gateway.errors import NotFoundError, UnknownToolError
from gateway.web.apps import host_data
from gateway.web.pages import Person, Web, form_of
from gateway.web.results import shown
from gateway.web.schema import RAW_FIELD, FormProblems, arguments_from_form, as_json, form_fields, parameters
from gateway.web.sparks import drawn, empty, sparks
from gateway.web.stats import SAMPLE, call_stats


def extra_arguments(schema: Mapping[str, Any]) -> str:
    """Whether a call may pass arguments the schema does not name: `refused` (`additionalProperties:
    false`), `checked` (they must match the `additionalProperties` schema) or `accepted`."""
    rule = schema.get("additionalProperties", True)
    if rule is False:
        return "refused"
    return "checked" if isinstance(rule, Mapping) and rule else "accepted"


def routes(web: Web) -> list[Route]:
    """`/tools/{name}` and its try-it form's `/tools/{name}/try`."""
    gateway = web.gateway

    async def view(request: Request, person: Person, **extra: Any) -> Response:
        found = tool_detail(gateway, person.caller, request.path_params["name"])
        tool = found.tool
        roles = None
        if person.admin and gateway.policy.roles is not None:
            roles = [role for role in gateway.policy.roles if gateway.visibility.allows(role, None, tool)]
        entries = await gateway.audit.recent(SAMPLE, tool=tool.name)
        declared = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
        annotations = {key: as_json(value) for key, value in declared.items()}
        values: dict[str, Any] = {
            "tool": tool,
            "view": view_of(tool.meta),
            "risk": derive_risk(tool).value,
            "flags": gateway.flags.of(tool),
            "params": parameters(tool.input_schema),
            "extra_arguments": extra_arguments(tool.input_schema),
            "input_json": json.dumps(tool.input_schema, indent=2, ensure_ascii=False),
            "output_params": parameters(tool.output_schema) if tool.output_schema else [],
            "output_json": json.dumps(tool.output_schema, indent=2, ensure_ascii=False) if tool.output_schema else None,
            "annotations": annotations,
            "skills": found.skills,
            "groups": found.groups,
            "roles": roles,
            "stats": call_stats(entries, gateway.wall_now()),
            "spark": drawn(tool.name, (await sparks(gateway, [tool.name], lambda name: name)).get(tool.name, empty())),
            "fields": form_fields(tool.input_schema),
            "raw_field": RAW_FIELD,
            "values": {},
            "problems": {},
            "result": None,
            "app": None,
        }
        values.update(extra)
        return web.render(request, person, "tool.html", **values)

    async def page(request: Request, person: Person) -> Response:
        return await view(request, person)

    async def try_it(request: Request, person: Person) -> Response:
        name: str = request.path_params["name"]
        tool = tool_detail(gateway, person.caller, name).tool
        values = form_of(request)
        try:
            arguments = arguments_from_form(form_fields(tool.input_schema), values)
        except FormProblems as problems:
            return await view(request, person, values=values, problems=problems.problems)
        try:
            result = await gateway.calls.call_tool(web.context(person), name, arguments)
        except UnknownToolError as error:
            raise NotFoundError(f"No such tool: {name!r}") from error
        app = host_data(tool, arguments, result) if view_of(tool.meta) is not None else None
        return await view(request, person, values=values, result=shown(result), app=app)

    return [
        Route("/tools/{name}", web.page(page), methods=["GET"]),
        Route("/tools/{name}/try", web.page(try_it), methods=["POST"]),
    ]
