"""Tool groups through the admin API over real HTTP: listed as each role sees them, added and removed
by admins, the file's left alone, and the catalog filtered by group."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.service import Gateway
from tests.api.conftest import ADMIN, INTERN, Served, api, api_config
from tests.support.waiting import catalog_until

pytestmark = pytest.mark.anyio

FILE_GROUPS = {"weather": {"description": "What the sky does", "allow": [{"tag": "weather"}]}}


async def until_listed(gateway: Gateway) -> None:
    """Wait until both toy servers have joined the catalog."""
    await catalog_until(gateway, lambda: {"toy", "other"} <= set(gateway.catalog.sources()), "both toy servers")


async def test_an_admin_adds_a_group_that_is_listed_with_its_endpoint_and_then_removes_it(
    served: Served, tmp_path: Path
) -> None:
    async with served(api_config(tmp_path, groups=FILE_GROUPS)) as (gateway, url), api(url, ADMIN) as http:
        await until_listed(gateway)
        added = await http.post("/api/v1/groups", json={"name": "maths", "allow": ["toy__add", "other__add"]})
        listed = (await http.get("/api/v1/groups")).json()["groups"]
        detail = (await http.get("/api/v1/groups/maths")).json()["group"]
        removed = await http.delete("/api/v1/groups/maths")
        after = (await http.get("/api/v1/groups")).json()["groups"]
        gone = await http.get("/api/v1/groups/maths")

    assert added.status_code == 201, added.text
    assert [(row["name"], row["source"], row["endpoint"]) for row in listed] == [
        ("weather", "file", "/mcp/g/weather"),
        ("maths", "api", "/mcp/g/maths"),
    ]
    assert detail["tool_names"] == ["toy__add", "other__add"]
    assert detail["tools"] == 2
    assert removed.status_code == 204
    assert [row["name"] for row in after] == ["weather"]
    assert gone.status_code == 404


async def test_a_group_of_the_config_file_cannot_be_removed_through_the_api(served: Served, tmp_path: Path) -> None:
    async with served(api_config(tmp_path, groups=FILE_GROUPS)) as (_, url), api(url, ADMIN) as http:
        refused = await http.delete("/api/v1/groups/weather")
        still = await http.get("/api/v1/groups/weather")

    assert refused.status_code == 409
    assert "configuration file" in refused.json()["error"]
    assert still.status_code == 200


async def test_an_invalid_group_is_a_422_naming_the_rule_and_a_taken_name_a_409(served: Served, tmp_path: Path) -> None:
    async with served(api_config(tmp_path, groups=FILE_GROUPS)) as (_, url), api(url, ADMIN) as http:
        invalid = await http.post("/api/v1/groups", json={"name": "bad", "allow": [{"risk": "extreme"}]})
        taken = await http.post("/api/v1/groups", json={"name": "weather", "allow": ["*"]})

    assert invalid.status_code == 422, invalid.text
    assert any("allow[0]" in problem["path"] for problem in invalid.json()["problems"])
    assert taken.status_code == 409


async def test_a_group_shows_each_role_only_the_tools_that_role_may_see(served: Served, tmp_path: Path) -> None:
    groups = {"toys": {"allow": ["toy__*"]}}
    async with served(api_config(tmp_path, groups=groups)) as (gateway, url):
        await until_listed(gateway)
        async with api(url, INTERN) as http:
            intern = (await http.get("/api/v1/groups/toys")).json()["group"]
        async with api(url, ADMIN) as http:
            admin = (await http.get("/api/v1/groups/toys")).json()["group"]

    assert sorted(intern["tool_names"]) == ["toy__add", "toy__echo"]
    assert set(intern["tool_names"]) < set(admin["tool_names"])


async def test_the_catalog_filtered_by_group_holds_only_that_group_s_tools_and_a_tool_names_its_groups(
    served: Served, tmp_path: Path
) -> None:
    async with served(api_config(tmp_path, groups=FILE_GROUPS)) as (gateway, url), api(url, ADMIN) as http:
        await until_listed(gateway)
        filtered = (await http.get("/api/v1/tools", params={"group": "weather"})).json()
        tool = (await http.get("/api/v1/tools/other__echo")).json()["tool"]
        unknown = await http.get("/api/v1/tools", params={"group": "nowhere"})

    assert filtered["tools"] and {row["server"] for row in filtered["tools"]} == {"other"}
    assert filtered["total"] == len(filtered["tools"])
    assert tool["groups"] == ["weather"]
    assert unknown.status_code == 404
