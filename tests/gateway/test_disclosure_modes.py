"""Call-through versus list_changed disclosure, and how broken skill folders are reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from benchmarks.disclosure_tokens import TARGET_SHARE, compare, generated
from gateway.cli.main import main
from gateway.frontdoors.mcpserver import build_server
from tests.support.harness import make_config
from tests.support.skills import (
    ToolListChanges,
    listed_names,
    skill_config,
    skill_gateway,
    structured,
    text,
    toy_skills,
    write_skill,
)

META = ["List_Skills", "Load_Skill", "Unload_Skill", "Read_Skill_File", "Find_Tools", "Use_Tool"]


@pytest.mark.anyio
async def test_list_changed_mode_notifies_on_load_and_lists_the_skill_tools(tmp_path: Path) -> None:
    changes = ToolListChanges()
    config = skill_config(tmp_path, disclosure="list_changed")
    async with skill_gateway(config, message_handler=changes) as (gateway, client):
        assert await listed_names(client) == META
        await client.call_tool("Load_Skill", {"name": "counting"})
        await changes.wait()
        assert await listed_names(client) == [*META, "toy__calls", "toy__increment"]
        assert text(await client.call_tool("toy__increment", {})) == "1"
        async with Client(build_server(gateway), mode="legacy") as other:
            assert await listed_names(other) == META
        await client.call_tool("Unload_Skill", {"name": "counting"})
        await changes.wait()
        assert await listed_names(client) == META


@pytest.mark.anyio
async def test_list_changed_mode_notifies_when_a_skill_is_evicted(tmp_path: Path) -> None:
    changes = ToolListChanges()
    config = skill_config(tmp_path, disclosure="list_changed", skill_capacity=1)
    async with skill_gateway(config, message_handler=changes) as (_, client):
        await client.call_tool("Load_Skill", {"name": "adding"})
        await changes.wait()
        outcome = structured(await client.call_tool("Load_Skill", {"name": "echoing"}))
        assert outcome["evicted"] == ["adding"]
        await changes.wait()
        assert await listed_names(client) == [*META, "toy__echo"]


@pytest.mark.anyio
async def test_list_changed_mode_notifies_when_a_turn_skill_leaves(tmp_path: Path) -> None:
    changes = ToolListChanges()
    async with skill_gateway(skill_config(tmp_path, disclosure="list_changed"), message_handler=changes) as (_, client):
        await client.call_tool("Load_Skill", {"name": "forecast"})
        await changes.wait()
        assert "toy__weather" in await listed_names(client)
        assert not (await client.call_tool("toy__weather", {"city": "Rome"})).is_error
        await changes.wait()
        assert await listed_names(client) == META


@pytest.mark.anyio
async def test_reloading_an_active_skill_sends_no_notification(tmp_path: Path) -> None:
    changes = ToolListChanges()
    async with skill_gateway(skill_config(tmp_path, disclosure="list_changed"), message_handler=changes) as (_, client):
        await client.call_tool("Load_Skill", {"name": "adding"})
        await changes.wait()
        await client.call_tool("Load_Skill", {"name": "adding"})
        # A notification sent during the call would reach the client before this round trip ends.
        await listed_names(client)
        assert changes.count == 1


@pytest.mark.anyio
async def test_call_through_mode_never_changes_tools_list_nor_notifies(tmp_path: Path) -> None:
    changes = ToolListChanges()
    async with skill_gateway(skill_config(tmp_path), message_handler=changes) as (_, client):
        before = await listed_names(client)
        assert before == META
        await client.call_tool("Load_Skill", {"name": "adding"})
        assert await listed_names(client) == before
        await client.call_tool("Use_Tool", {"name": "toy__add", "arguments": {"a": 1, "b": 2}})
        await client.call_tool("Unload_Skill", {"name": "adding"})
        assert await listed_names(client) == before
        assert changes.count == 0


@pytest.mark.anyio
async def test_stateless_era_tools_list_does_not_vary_even_in_list_changed_mode(tmp_path: Path) -> None:
    config = skill_config(tmp_path, disclosure="list_changed")
    async with skill_gateway(config, mode="2026-07-28") as (_, client):
        before = await listed_names(client)
        await client.call_tool("Load_Skill", {"name": "adding"})
        assert await listed_names(client) == before == META


@pytest.mark.anyio
async def test_core_tools_are_listed_beside_the_meta_tools(tmp_path: Path) -> None:
    skills = toy_skills(tmp_path / "skills")
    servers = {"toy": {"command": "unused", "layer": "extended", "tools": {"echo": {"layer": "core"}}}}
    config = make_config(tmp_path, servers, skill_dirs=[str(skills)])
    async with skill_gateway(config) as (_, client):
        assert await listed_names(client) == [*META, "toy__echo"]
        assert text(await client.call_tool("toy__echo", {"text": "hi"})) == "hi"


def broken_skills(root: Path) -> list[str]:
    """Write three broken skill folders beside the good ones; the folder names."""
    write_skill(root, "Loud", "toy__add")
    (root / "empty").mkdir()
    folder = root / "extra-key"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: extra-key\ndescription: x\nversion: 2\n---\n", encoding="utf-8")
    return ["Loud", "empty", "extra-key"]


@pytest.mark.anyio
async def test_broken_skill_folders_are_reported_while_good_ones_work(tmp_path: Path) -> None:
    config = skill_config(tmp_path)
    broken = broken_skills(tmp_path / "skills")
    async with skill_gateway(config) as (gateway, client):
        reported = [str(problem) for problem in gateway.skills.skills.problems]
        assert len(reported) == 3
        for name, line in zip(sorted(broken), sorted(reported), strict=True):
            assert f"/{name}" in line
        assert "unknown key 'version'" in " ".join(reported)
        await client.call_tool("Load_Skill", {"name": "adding"})
        ok = await client.call_tool("Use_Tool", {"name": "toy__add", "arguments": {"a": 1, "b": 1}})
        assert structured(ok) == {"result": 2}


def write_config(tmp_path: Path) -> Path:
    """A configuration file with no servers and a skills directory holding good and broken skills."""
    write_skill(tmp_path / "skills", "adding", "toy__add")
    broken_skills(tmp_path / "skills")
    path = tmp_path / "gateway.yaml"
    path.write_text("gateway:\n  data_dir: ./data\n  skill_dirs: [./skills]\nservers: {}\n", encoding="utf-8")
    return path


def test_check_lists_skills_and_fails_on_broken_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "--config", str(write_config(tmp_path))])
    out = capsys.readouterr().out
    assert exit_info.value.code == 1
    assert "[ok] skill adding (session): 0 tools" in out
    assert out.count("[FAIL] skill") == 3 and "skills/Loud/SKILL.md: name: 'Loud' must be lowercase" in out


def test_catalog_json_includes_skills_and_their_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["catalog", "--json", "--config", str(write_config(tmp_path))])
    assert exit_info.value.code == 0
    catalog = json.loads(capsys.readouterr().out)
    assert [skill["name"] for skill in catalog["skills"]] == ["adding"]
    paths = " ".join(problem["path"] for problem in catalog["skill_problems"])
    assert all(f"/{name}" in paths for name in ("Loud", "empty", "extra-key"))


@pytest.mark.slow
@pytest.mark.anyio
async def test_disclosure_costs_at_most_a_tenth_of_the_flat_listing_for_500_tools(tmp_path: Path) -> None:
    config, transports = generated(tmp_path)
    without, with_ = await compare(config, transports)
    assert without.tools == 500 and with_.tools == len(META)
    assert with_.start <= TARGET_SHARE * without.start
