"""Find_Tools and List_Skills through a real gateway: other languages, task queries, answer sizes."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway.config.loading import parse_config
from gateway.pipeline.rollup import Rollup
from gateway.service import Gateway
from gateway.skills import host
from gateway.skills.search import SearchItem, SemanticRanker, ToolIndex
from tests.support.described import described_server
from tests.support.harness import gateway_client, in_memory, make_config, placeholder
from tests.support.skills import structured, text, write_skill

pytestmark = pytest.mark.anyio

TOOLS = {
    "trains": {
        "get_tickets": "查询12306余票信息。",
        "get_route": "查询特定列车车次的途径车站和到站时间。",
    },
    "docs": {
        "create_document": "Create a new Word document with an optional title.",
        "add_paragraph": "Add a paragraph of text to a Word document.",
        "add_picture": "Add a picture to a Word document.",
    },
    "pdf": {"convert_to_pdf": "Convert a document file to PDF."},
    "weather": {"forecast": "Weather forecast for a city."},
}


@asynccontextmanager
async def catalog_gateway(tmp_path: Path, skills: int = 0) -> AsyncIterator[tuple[Gateway, Client]]:
    """A gateway over the servers of `TOOLS`, all extended, one skill per server plus `skills` more."""
    root = tmp_path / "skills"
    for name in TOOLS:
        write_skill(root, f"{name}-work", f"{name}__*")
    for number in range(skills):
        folder = root / f"extra-service-{number:02d}"
        folder.mkdir(parents=True)
        description = f"Everything service {number} offers - " + "reports, forecasts and lookups. " * 8
        (folder / "SKILL.md").write_text(
            f"---\nname: {folder.name}\ndescription: {description.strip()}\n"
            "allowed-tools: weather__forecast\n---\n# x\n",
            encoding="utf-8",
        )
    servers = {name: {**entry, "layer": "extended"} for name, entry in placeholder(list(TOOLS)).items()}
    config = make_config(tmp_path, servers, skill_dirs=[str(root)])
    transports = in_memory({name: described_server(name, tools) for name, tools in TOOLS.items()})
    async with gateway_client(config, transports=transports) as pair:
        yield pair


async def test_a_chinese_query_finds_a_tool_with_a_chinese_description(tmp_path: Path) -> None:
    async with catalog_gateway(tmp_path) as (_, client):
        rows = structured(await client.call_tool("Find_Tools", {"query": "帮我查一下明天去上海的余票"}))["tools"]
        assert rows[0]["name"] == "trains__get_tickets"
        assert rows[0]["skills"] == ["trains-work"]
        stations = structured(await client.call_tool("Find_Tools", {"query": "这趟车经过哪些车站"}))["tools"]
        assert stations[0]["name"] == "trains__get_route"


async def test_a_multi_step_query_returns_tools_from_more_than_one_server(tmp_path: Path) -> None:
    query = "Create a Word document with a paragraph and a picture, then convert it to PDF"
    async with catalog_gateway(tmp_path) as (_, client):
        rows = structured(await client.call_tool("Find_Tools", {"query": query, "limit": 3}))["tools"]
    names = [row["name"] for row in rows]
    assert "pdf__convert_to_pdf" in names and "docs__create_document" in names
    assert len({name.split("__")[0] for name in names}) > 1


async def test_find_tools_gives_argument_schemas_for_the_first_hits_or_for_all_on_request(tmp_path: Path) -> None:
    async with catalog_gateway(tmp_path) as (_, client):
        brief = structured(await client.call_tool("Find_Tools", {"query": "document picture paragraph pdf"}))
        full = structured(
            await client.call_tool("Find_Tools", {"query": "document picture paragraph pdf", "schemas": True})
        )
    assert len(brief["tools"]) == 4
    assert ["input_schema" in row for row in brief["tools"]] == [True, True, True, False]
    assert all("input_schema" in row for row in full["tools"])
    assert [row["name"] for row in full["tools"]] == [row["name"] for row in brief["tools"]]


async def test_the_meta_tool_listing_is_the_same_whatever_the_number_of_skills(tmp_path: Path) -> None:
    async with catalog_gateway(tmp_path / "few") as (_, client):
        few = (await client.list_tools()).tools
    async with catalog_gateway(tmp_path / "many", skills=70) as (_, client):
        many = (await client.list_tools()).tools
        unknown = await client.call_tool("Load_Skill", {"name": "no-such-skill"})
    assert [tool.model_dump() for tool in few] == [tool.model_dump() for tool in many]
    load = next(tool for tool in many if tool.name == "Load_Skill")
    assert "enum" not in load.input_schema["properties"]["name"]
    assert unknown.is_error and "List_Skills" in text(unknown)


async def test_list_skills_costs_at_most_80_bytes_per_skill_and_a_query_shows_whole_descriptions(
    tmp_path: Path,
) -> None:
    async with catalog_gateway(tmp_path, skills=70) as (gateway, client):
        count = len(gateway.skills.names)
        result = await client.call_tool("List_Skills", {})
        filtered = await client.call_tool("List_Skills", {"query": "trains"})
    assert count == 74 and _size(result) <= 80 * count
    assert len(structured(result)["skills"]) == count
    assert structured(filtered)["skills"] == ["trains-work"]
    assert "trains-work: Helps with trains-work work." in text(filtered)


def _size(result: types.CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def test_the_words_of_a_skill_a_role_may_not_see_do_not_find_tools_for_that_role(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = write_skill(root, "secret-ops", "weather__forecast", roles="ops")
    (folder / "SKILL.md").write_text(
        (folder / "SKILL.md").read_text(encoding="utf-8").replace("Helps with secret-ops work.", "Zebracorn drills."),
        encoding="utf-8",
    )
    servers = {name: {**entry, "layer": "extended"} for name, entry in placeholder(list(TOOLS)).items()}
    document = {
        "gateway": {"data_dir": str(tmp_path / "data"), "skill_dirs": [str(root)], "stdio_role": "dev"},
        "servers": servers,
        "roles": {"dev": {"allow": ["*"]}, "ops": {"allow": ["*"]}},
    }
    config = parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    transports = in_memory({name: described_server(name, tools) for name, tools in TOOLS.items()})
    async with gateway_client(config, transports=transports) as (_, client):
        found = await client.call_tool("Find_Tools", {"query": "zebracorn drills"})

    assert "weather__forecast" not in text(found)


async def test_the_search_index_is_built_once_off_the_event_loop_while_other_calls_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    builders: list[threading.Thread] = []

    class HeldIndex(ToolIndex):
        """The real index, its build held until the test lets it finish."""

        def __init__(self, items: Iterable[SearchItem], semantic: SemanticRanker | None = None) -> None:
            builders.append(threading.current_thread())
            started.set()
            release.wait(30)
            super().__init__(items, semantic)

    monkeypatch.setattr(host, "ToolIndex", HeldIndex)
    found: list[types.CallToolResult] = []
    async with catalog_gateway(tmp_path) as (_, client):

        async def find() -> None:
            found.append(await client.call_tool("Find_Tools", {"query": "weather forecast"}))

        async with anyio.create_task_group() as group:
            group.start_soon(find)
            group.start_soon(find)
            assert await anyio.to_thread.run_sync(started.wait, 30)
            # The index is being built: the event loop still serves every other request.
            listed = await client.call_tool("List_Skills", {})
            # One build for both searches (and the background loop that started it, if it did).
            building = len(builders)
            release.set()
    assert not listed.is_error and "weather-work" in text(listed)
    assert building == 1
    assert threading.main_thread() not in builders
    assert [structured(result)["tools"][0]["name"] for result in found] == ["weather__forecast"] * 2


async def test_a_search_that_finds_nothing_is_audited_as_ok_with_no_match_and_counted_in_the_rollup(
    tmp_path: Path,
) -> None:
    async with catalog_gateway(tmp_path) as (gateway, client):
        await client.call_tool("Find_Tools", {"query": "zzqx wqpt"})
        await client.call_tool("Find_Tools", {"query": "weather forecast"})
        rows = await gateway.audit.recent(2, tool="Find_Tools")
        totals = Rollup(gateway.audit.database).per_tool(3600, 0, 2**40, {"Find_Tools"})
    assert [(row.outcome, row.detail) for row in rows] == [("ok", ""), ("ok", "no match")]
    assert [(item.calls, item.no_match) for item in totals] == [(2, 1)]
