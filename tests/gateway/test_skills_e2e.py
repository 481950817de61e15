"""Skills end to end through a real gateway and the SDK client: capacity, LRU, lifecycles, access, files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from gateway.frontdoors.mcpserver import build_server
from tests.support.skills import listed_names, skill_config, skill_gateway, structured, text, write_skill

ERAS = ["legacy", "2026-07-28"]


async def load(client: Client, name: str) -> dict[str, Any]:
    """Load a skill and return Load_Skill's structured result."""
    return structured(await client.call_tool("Load_Skill", {"name": name}))


async def active(client: Client) -> list[str]:
    """The session's active skills, most recently used first."""
    listing = structured(await client.call_tool("List_Skills", {}))
    return list(listing["active"])


async def add(client: Client) -> None:
    """Call toy__add through Use_Tool and check it ran."""
    result = await client.call_tool("Use_Tool", {"name": "toy__add", "arguments": {"a": 2, "b": 3}})
    assert structured(result) == {"result": 5}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_loading_past_capacity_evicts_the_least_recently_used_skill(tmp_path: Path, mode: str) -> None:
    async with skill_gateway(skill_config(tmp_path, skill_capacity=2), mode=mode) as (_, client):
        assert (await load(client, "adding"))["evicted"] == []
        await load(client, "echoing")
        outcome = await load(client, "counting")
        assert outcome["evicted"] == ["adding"]
        assert await active(client) == ["counting", "echoing"]
        result = await client.call_tool("Load_Skill", {"name": "adding"})
        assert "Unloaded to make room: echoing." in text(result)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_calling_a_skill_tool_through_use_tool_refreshes_its_recency(tmp_path: Path, mode: str) -> None:
    async with skill_gateway(skill_config(tmp_path, skill_capacity=2), mode=mode) as (_, client):
        await load(client, "adding")
        await load(client, "echoing")
        await add(client)
        assert await active(client) == ["adding", "echoing"]
        assert (await load(client, "counting"))["evicted"] == ["echoing"]


@pytest.mark.anyio
async def test_loading_an_active_skill_only_refreshes_it(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path, skill_capacity=2)) as (_, client):
        await load(client, "adding")
        await load(client, "echoing")
        again = await load(client, "adding")
        assert again["already_active"] is True and again["evicted"] == []
        assert await active(client) == ["adding", "echoing"]
        assert (await load(client, "counting"))["evicted"] == ["echoing"]


@pytest.mark.anyio
async def test_a_skill_over_the_tool_cap_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path, max_extended_tools=1)) as (_, client):
        await load(client, "adding")
        result = await client.call_tool("Load_Skill", {"name": "counting"})
        assert result.is_error and "brings 2 tools" in text(result)
        assert await active(client) == ["adding"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_turn_skill_leaves_after_the_next_completed_tool_call(tmp_path: Path, mode: str) -> None:
    async with skill_gateway(skill_config(tmp_path), mode=mode) as (_, client):
        await load(client, "forecast")
        await load(client, "adding")
        await client.call_tool("List_Skills", {})
        await client.call_tool("Find_Tools", {"query": "weather"})
        assert await active(client) == ["adding", "forecast"]
        weather = await client.call_tool("Use_Tool", {"name": "toy__weather", "arguments": {"city": "Oslo"}})
        assert structured(weather)["city"] == "Oslo"
        assert await active(client) == ["adding"]
        refused = await client.call_tool("Use_Tool", {"name": "toy__weather", "arguments": {"city": "Oslo"}})
        assert refused.is_error and "Load_Skill with name='forecast'" in text(refused)


@pytest.mark.anyio
async def test_a_turn_skill_leaves_after_any_completed_call_even_a_failed_one(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        await load(client, "forecast")
        failed = await client.call_tool("Use_Tool", {"name": "toy__fail", "arguments": {"message": "no"}})
        assert failed.is_error
        assert await active(client) == []


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_task_skill_leaves_when_the_task_is_declared_done(tmp_path: Path, mode: str) -> None:
    async with skill_gateway(skill_config(tmp_path), mode=mode) as (_, client):
        await load(client, "report")
        await load(client, "adding")
        big = await client.call_tool("Use_Tool", {"name": "toy__big", "arguments": {"size": 10}})
        assert not big.is_error
        assert await active(client) == ["report", "adding"]
        done = structured(await client.call_tool("Unload_Skill", {"task_done": True}))
        assert done == {"unloaded": ["report"], "active": ["adding"]}


@pytest.mark.anyio
async def test_task_and_session_skills_end_with_the_session(tmp_path: Path) -> None:
    config = skill_config(tmp_path)
    async with skill_gateway(config) as (gateway, first):
        await load(first, "report")
        await load(first, "adding")
        assert len(gateway.sessions) == 1
        async with Client(build_server(gateway), mode="legacy") as second:
            assert await active(second) == []
        await add(first)
        assert await active(first) == ["adding", "report"]
    assert len(gateway.sessions) == 0


@pytest.mark.anyio
async def test_a_session_skill_stays_through_calls_and_task_ends(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        await load(client, "adding")
        for _ in range(3):
            await add(client)
        await client.call_tool("Unload_Skill", {"task_done": True})
        assert await active(client) == ["adding"]
        unloaded = structured(await client.call_tool("Unload_Skill", {"name": "adding"}))
        assert unloaded == {"unloaded": ["adding"], "active": []}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_use_tool_refuses_a_tool_of_an_inactive_skill_naming_the_skill(tmp_path: Path, mode: str) -> None:
    async with skill_gateway(skill_config(tmp_path), mode=mode) as (_, client):
        refused = await client.call_tool("Use_Tool", {"name": "toy__add", "arguments": {"a": 1, "b": 1}})
        assert refused.is_error
        assert "belongs to the skill adding" in text(refused)
        assert "Load_Skill with name='adding'" in text(refused)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_direct_call_of_an_inactive_skill_tool_is_refused_the_same_way(tmp_path: Path, mode: str) -> None:
    async with skill_gateway(skill_config(tmp_path), mode=mode) as (_, client):
        refused = await client.call_tool("toy__add", {"a": 1, "b": 1})
        assert refused.is_error and "Load_Skill with name='adding'" in text(refused)
        await load(client, "adding")
        assert structured(await client.call_tool("toy__add", {"a": 1, "b": 1})) == {"result": 2}


@pytest.mark.anyio
async def test_an_extended_tool_no_skill_carries_is_reached_through_use_tool(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        assert "toy__picture" not in await listed_names(client)
        result = await client.call_tool("Use_Tool", {"name": "toy__picture"})
        assert not result.is_error and text(result) == "a pixel"


@pytest.mark.anyio
async def test_use_tool_with_an_unknown_name_is_an_error_result_pointing_to_find_tools(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        result = await client.call_tool("Use_Tool", {"name": "toy__nothing"})
        assert result.is_error and "no tool named 'toy__nothing'" in text(result)
        assert "Find_Tools" in text(result)


@pytest.mark.anyio
async def test_find_tools_ranks_hits_and_names_the_skill_carrying_each(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        found = structured(await client.call_tool("Find_Tools", {"query": "add integers", "limit": 3}))
        rows = found["tools"]
        assert rows[0]["name"] == "toy__add" and rows[0]["skills"] == ["adding"]
        assert rows[0]["input_schema"]["required"] == ["a", "b"]
        assert len(rows) <= 3
        counts = structured(await client.call_tool("Find_Tools", {"query": "increment count"}))
        assert counts["tools"][0] == {**counts["tools"][0], "name": "toy__increment", "skills": ["counting"]}
        nothing = structured(await client.call_tool("Find_Tools", {"query": "zebra"}))
        assert nothing == {"tools": []}


@pytest.mark.anyio
async def test_a_skill_hidden_from_the_role_is_never_named(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "secret", "toy__crash", roles="admin")
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        names = structured(await client.call_tool("List_Skills", {}))["skills"]
        assert "secret" not in names
        found = structured(await client.call_tool("Find_Tools", {"query": "crash server process"}))
        assert found["tools"][0]["name"] == "toy__crash" and found["tools"][0]["skills"] == []
        refused = await client.call_tool("Use_Tool", {"name": "toy__crash"})
        assert refused.is_error and "secret" not in text(refused)


@pytest.mark.anyio
async def test_load_skill_returns_the_body_files_and_tool_schemas(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        result = await client.call_tool("Load_Skill", {"name": "adding"})
        assert '<skill name="adding">' in text(result) and "Follow these steps for adding." in text(result)
        assert structured(result)["files"] == ["references/tips.md"]
        assert structured(result)["tools"] == ["toy__add"]
        assert '"inputSchema"' in text(result)


@pytest.mark.anyio
async def test_read_skill_file_reads_a_bundled_file_of_an_active_skill(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        await load(client, "adding")
        result = await client.call_tool("Read_Skill_File", {"name": "adding", "path": "references/tips.md"})
        assert not result.is_error and "Add small numbers." in text(result)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["../echoing/SKILL.md", "/etc/passwd", "references/../../x", ".hidden"])
async def test_read_skill_file_refuses_a_path_outside_the_skill(tmp_path: Path, path: str) -> None:
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        await load(client, "adding")
        (tmp_path / "skills" / "adding" / "out").symlink_to(tmp_path / "secret.txt")
        for attempt in (path, "out"):
            result = await client.call_tool("Read_Skill_File", {"name": "adding", "path": attempt})
            assert result.is_error and "secret" not in text(result).replace("secret.txt", "")


@pytest.mark.anyio
async def test_read_skill_file_of_an_inactive_skill_is_refused(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        result = await client.call_tool("Read_Skill_File", {"name": "adding", "path": "references/tips.md"})
        assert result.is_error and "not active" in text(result) and "Load_Skill" in text(result)


@pytest.mark.anyio
async def test_two_sessions_keep_independent_skills(tmp_path: Path) -> None:
    async with (
        skill_gateway(skill_config(tmp_path, skill_capacity=1)) as (gateway, first),
        Client(build_server(gateway), mode="legacy") as second,
    ):
        await load(first, "adding")
        await load(second, "echoing")
        assert await active(first) == ["adding"]
        assert await active(second) == ["echoing"]
        await add(first)
        refused = await second.call_tool("Use_Tool", {"name": "toy__add", "arguments": {"a": 1, "b": 1}})
        assert refused.is_error


@pytest.mark.anyio
async def test_stateless_load_skill_returns_a_handle_that_reaches_its_state(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path), mode="2026-07-28") as (_, client):
        first = structured(await client.call_tool("Load_Skill", {"name": "adding", "handle": "alpha"}))
        assert first["handle"] == "alpha"
        second = structured(await client.call_tool("Load_Skill", {"name": "echoing", "handle": "beta"}))
        assert second["handle"] == "beta"
        ok = await client.call_tool("Use_Tool", {"name": "toy__add", "arguments": {"a": 1, "b": 1}, "handle": "alpha"})
        assert structured(ok) == {"result": 2}
        refused = await client.call_tool(
            "Use_Tool", {"name": "toy__add", "arguments": {"a": 1, "b": 1}, "handle": "beta"}
        )
        assert refused.is_error and "Load_Skill with name='adding'" in text(refused)
        listing = structured(await client.call_tool("List_Skills", {"handle": "beta"}))
        assert listing["active"] == ["echoing"]
        default = structured(await client.call_tool("Load_Skill", {"name": "counting"}))
        assert default["handle"] == "default"
        assert structured(await client.call_tool("List_Skills", {"handle": "alpha"}))["active"] == ["adding"]
        odd = structured(await client.call_tool("Load_Skill", {"name": "adding", "handle": "task:7"}))
        assert odd["handle"] == "task:7"


@pytest.mark.anyio
async def test_handshake_sessions_get_no_handle(tmp_path: Path) -> None:
    async with skill_gateway(skill_config(tmp_path)) as (_, client):
        assert "handle" not in await load(client, "adding")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_skill_resources_are_listed_and_read(tmp_path: Path, mode: str) -> None:
    async with skill_gateway(skill_config(tmp_path), mode=mode) as (_, client):
        uris = [resource.uri for resource in (await client.list_resources()).resources]
        assert "skill://adding/SKILL.md" in uris and "skill://adding/references/tips.md" in uris
        skill_md = await client.read_resource("skill://adding/SKILL.md")
        assert skill_md.contents[0].text.startswith("---\nname: adding")  # type: ignore[union-attr]
        tips = await client.read_resource("skill://adding/references/tips.md")
        assert tips.contents[0].text == "Add small numbers."  # type: ignore[union-attr]
