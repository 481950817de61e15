"""Reading the admin API over real HTTP: servers, tools, skills and the OpenAPI document, filtered by role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from starlette.routing import Route

from gateway.api.routes import api_routes
from tests.api.conftest import ADMIN, ANALYST, INTERN, Served, api, api_config
from tests.support.skills import write_skill

pytestmark = pytest.mark.anyio


async def get(url: str, key: str | None, path: str) -> tuple[int, Any]:
    """GET `path` as `key`: the status and the JSON body."""
    async with api(url, key) as http:
        response = await http.get(path)
    return response.status_code, response.json()


async def test_admins_see_every_server_with_errors_and_others_only_servers_they_see_tools_of(served: Served) -> None:
    async with served() as (_, url):
        _, admin = await get(url, ADMIN, "/api/v1/servers")
        _, intern = await get(url, INTERN, "/api/v1/servers")
        _, analyst = await get(url, ANALYST, "/api/v1/servers")
        hidden = await get(url, INTERN, "/api/v1/servers/other")
        absent = await get(url, INTERN, "/api/v1/servers/nothing")
    assert [row["name"] for row in admin["servers"]] == ["toy", "other"]
    assert all("error" in row for row in admin["servers"]) and admin["reload_errors"] == []
    assert [row["name"] for row in intern["servers"]] == ["toy"]
    assert "error" not in intern["servers"][0] and intern["servers"][0]["state"] == "ready"
    assert [row["name"] for row in analyst["servers"]] == ["toy", "other"]
    assert hidden[0] == absent[0] == 404
    assert set(hidden[1]) == {"error", "problems"}


async def test_the_tool_search_filters_by_text_server_tag_risk_and_layer(served: Served) -> None:
    async def names(key: str, query: str) -> list[str]:
        status, body = await get(url, key, f"/api/v1/tools?{query}")
        assert status == 200, body
        return [tool["name"] for tool in body["tools"]]

    async with served() as (_, url):
        assert await names(INTERN, "") == ["toy__echo", "toy__add"]
        assert await names(ADMIN, "q=UNCHANGED") == ["toy__echo", "other__echo"]
        assert await names(ADMIN, "q=two%20integers&server=other") == ["other__add"]
        assert await names(ADMIN, "tag=weather&q=integers") == ["other__add"]
        assert await names(ADMIN, "layer=core&q=unchanged") == ["toy__echo"]
        assert set(await names(ADMIN, "risk=high")) == {
            "toy__increment",
            "toy__fail",
            "other__increment",
            "other__fail",
        }
        assert await names(ANALYST, "risk=high") == []
        _, body = await get(url, ADMIN, "/api/v1/tools?q=unchanged&limit=1")
    assert body["total"] == 2 and body["next_cursor"]
    assert body["tools"][0] == {
        "name": "toy__echo",
        "title": None,
        "description": "Return the text unchanged.",
        "server": "toy",
        "original_name": "echo",
        "risk": "low",
        "layer": "core",
        "tags": [],
        "sandbox": None,
        "flags": [],
    }


async def test_cursors_page_through_every_tool_once(served: Served) -> None:
    async with served() as (_, url):
        _, whole = await get(url, ADMIN, "/api/v1/tools?limit=500")
        seen: list[str] = []
        cursor = ""
        while True:
            _, body = await get(url, ADMIN, f"/api/v1/tools?limit=3&cursor={cursor}")
            seen += [tool["name"] for tool in body["tools"]]
            if body["next_cursor"] is None:
                break
            cursor = body["next_cursor"]
    assert seen == [tool["name"] for tool in whole["tools"]] and len(seen) == whole["total"]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=501", "limit=x", "limit=%C2%B2", "limit=" + "9" * 30, "cursor=bogus"]
)
async def test_bad_search_parameters_are_a_400_naming_the_parameter(served: Served, query: str) -> None:
    async with served() as (_, url):
        status, body = await get(url, ADMIN, f"/api/v1/tools?{query}")
    assert status == 400
    assert query.split("=")[0] in body["error"]


async def test_a_tool_the_role_may_not_see_is_answered_like_one_that_does_not_exist(served: Served) -> None:
    async with served() as (_, url):
        hidden_status, hidden = await get(url, INTERN, "/api/v1/tools/toy__increment")
        absent_status, absent = await get(url, INTERN, "/api/v1/tools/toy__nothing")
        status, shown = await get(url, INTERN, "/api/v1/tools/toy__add")
    assert hidden_status == absent_status == 404
    assert hidden["error"].replace("increment", "nothing") == absent["error"]
    assert status == 200
    tool = shown["tool"]
    assert tool["name"] == "toy__add" and tool["input_schema"]["required"] == ["a", "b"]
    assert tool["annotations"]["readOnlyHint"] is True
    assert tool["skills"] == [] and tool["groups"] == []


async def test_skills_are_listed_as_the_role_sees_them_with_problems_for_admins(served: Served, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "echoing", "toy__echo toy__nothing*")
    write_skill(skills, "private", "toy__increment", roles="admin")
    (skills / "broken").mkdir()
    config = api_config(tmp_path, skill_dirs=[str(skills)])
    async with served(config) as (_, url):
        _, admin = await get(url, ADMIN, "/api/v1/skills")
        _, intern = await get(url, INTERN, "/api/v1/skills")
        status, detail = await get(url, INTERN, "/api/v1/skills/echoing")
        hidden, _ = await get(url, INTERN, "/api/v1/skills/private")
    assert [skill["name"] for skill in admin["skills"]] == ["echoing", "private"]
    assert admin["skills"][0]["problems"] == ["allowed-tools entry 'toy__nothing*' selects no tool in the catalog"]
    assert any("broken" in problem for problem in admin["problems"])
    assert intern == {
        "skills": [
            {"name": "echoing", "description": "Helps with echoing work.", "tools": ["toy__echo"], "problems": []}
        ]
    }
    assert status == 200 and "Follow these steps" in detail["skill"]["instructions"]
    assert hidden == 404


OPENAPI_SHAPE: dict[str, Any] = {
    "type": "object",
    "required": ["openapi", "info", "paths"],
    "properties": {
        "openapi": {"type": "string", "pattern": r"^3\.1\.\d+$"},
        "info": {"type": "object", "required": ["title", "version"]},
        "paths": {
            "type": "object",
            "propertyNames": {"pattern": "^/"},
            "additionalProperties": {
                "type": "object",
                "propertyNames": {"enum": ["get", "post", "patch", "delete", "put"]},
                "additionalProperties": {
                    "type": "object",
                    "required": ["responses"],
                    "properties": {
                        "responses": {
                            "type": "object",
                            "minProperties": 1,
                            "propertyNames": {"pattern": "^[1-5][0-9][0-9]$"},
                        }
                    },
                },
            },
        },
    },
}


async def test_the_openapi_document_describes_every_mounted_route_and_only_those(served: Served) -> None:
    async with served() as (gateway, url):
        status, spec = await get(url, None, "/api/openapi.json")

        async def nothing(session_id: str) -> None:
            return None

        mounted = {
            (route.path, method.lower())
            for route in api_routes(gateway, None, nothing)
            if isinstance(route, Route) and route.path.startswith("/api/v1")
            for method in route.methods or ()
            if method != "HEAD"
        }
    assert status == 200
    jsonschema.validate(spec, OPENAPI_SHAPE)
    described = {(path, method) for path, operations in spec["paths"].items() for method in operations}
    assert described == mounted
    refs = {value for value in _walk(spec) if isinstance(value, str) and value.startswith("#/")}
    for ref in refs:
        assert ref.removeprefix("#/components/schemas/") in spec["components"]["schemas"], ref


def _walk(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [item for value in node.values() for item in _walk(value)]
    if isinstance(node, list):
        return [item for value in node for item in _walk(value)]
    return [node]
