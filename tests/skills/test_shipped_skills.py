"""The skills shipped in skills/ load cleanly and fit the bundled servers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gateway.skills.folder import Skill, load_skills

SHIPPED = Path(__file__).resolve().parents[2] / "skills"
BUNDLED_TOOLS = [
    "files__list_directory",
    "files__read_file",
    "files__search_files",
    "files__write_file",
    "files__move_file",
    "files__delete_file",
    "sqlite__list_tables",
    "sqlite__describe_table",
    "sqlite__query",
    "sqlite__execute",
    "calc__evaluate",
    "python__run_python",
]


@pytest.fixture(scope="module")
def shipped() -> dict[str, Skill]:
    result = load_skills([SHIPPED])
    assert result.problems == []
    return result.skills


def test_shipped_skills_load_without_problems(shipped: dict[str, Skill]) -> None:
    assert {"data-analysis", "file-organisation", "quick-math"} <= set(shipped)


@pytest.mark.parametrize(
    ("name", "lifecycle", "tools"),
    [
        (
            "data-analysis",
            "task",
            [
                "sqlite__list_tables",
                "sqlite__describe_table",
                "sqlite__query",
                "calc__evaluate",
                "python__run_python",
            ],
        ),
        (
            "file-organisation",
            "session",
            [
                "files__list_directory",
                "files__read_file",
                "files__search_files",
                "files__write_file",
                "files__move_file",
                "files__delete_file",
            ],
        ),
        ("quick-math", "turn", ["calc__evaluate"]),
    ],
)
def test_shipped_skill_brings_the_bundled_tools_it_needs(
    shipped: dict[str, Skill], name: str, lifecycle: str, tools: list[str]
) -> None:
    skill = shipped[name]
    assert skill.lifecycle == lifecycle
    assert skill.tool_names(BUNDLED_TOOLS) == tools


def test_every_allowed_tool_names_a_bundled_tool(shipped: dict[str, Skill]) -> None:
    for skill in shipped.values():
        for pattern in skill.allowed_tools:
            single = replace(skill, allowed_tools=(pattern,))
            assert single.tool_names(BUNDLED_TOOLS), f"{skill.name}: {pattern} matches no bundled tool"


def test_shipped_instructions_are_substantial_and_every_tool_they_mention_exists(
    shipped: dict[str, Skill],
) -> None:
    for skill in shipped.values():
        assert 250 <= len(skill.body.split()) <= 3500, skill.name
        mentioned = {word.strip("`.,:;()") for word in skill.body.split() if "__" in word}
        assert mentioned <= set(BUNDLED_TOOLS), f"{skill.name}: {mentioned - set(BUNDLED_TOOLS)}"


def test_every_bundled_file_is_listed_and_readable(shipped: dict[str, Skill]) -> None:
    checked = []
    for skill in shipped.values():
        for relative in skill.files():
            content = skill.read_file(relative)
            assert isinstance(content, str) and content.strip(), f"{skill.name}: {relative}"
            assert relative in skill.body, f"{skill.name} never mentions {relative}"
            checked.append(f"{skill.name}/{relative}")
    # The shipped skills bundle files: a listing that found none would check nothing.
    assert checked
