"""Loading skill folders: strict validation, lenient loading, confined reads of bundled files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.errors import ToolError
from gateway.skills.folder import MAX_SKILL_FILE_BYTES, SkillFileError, load_skills

from .conftest import WriteSkill


def test_valid_skill_loads_with_every_field(write_skill: WriteSkill, tmp_path: Path) -> None:
    folder = write_skill(
        "pdf-tools",
        "name: pdf-tools\n"
        "description: Fill and merge PDF forms.\n"
        "license: Apache-2.0\n"
        "compatibility: Needs the files server.\n"
        "metadata:\n  lifecycle: task\n  roles: analyst, admin ops\n  author: team\n"
        "allowed-tools: files__read_file files__write_*\n",
        body="\n# PDF\n\nSteps.\n",
    )
    result = load_skills([tmp_path / "skills"])
    assert result.problems == []
    skill = result.skills["pdf-tools"]
    assert skill.description == "Fill and merge PDF forms."
    assert skill.body == "# PDF\n\nSteps."
    assert skill.folder == folder
    assert skill.license == "Apache-2.0"
    assert skill.compatibility == "Needs the files server."
    assert skill.lifecycle == "task"
    assert skill.roles == ("analyst", "admin", "ops")
    assert skill.metadata == {"lifecycle": "task", "roles": "analyst, admin ops", "author": "team"}
    assert skill.allowed_tools == ("files__read_file", "files__write_*")


def test_defaults_are_session_lifecycle_and_every_role(write_skill: WriteSkill, tmp_path: Path) -> None:
    write_skill("plain")
    skill = load_skills([tmp_path / "skills"]).skills["plain"]
    assert skill.lifecycle == "session"
    assert skill.roles == ()


def test_metadata_roles_name_the_roles_that_see_the_skill(write_skill: WriteSkill, tmp_path: Path) -> None:
    write_skill("ops", "name: ops\ndescription: Ops.\nmetadata:\n  roles: admin, auditor\n")
    skill = load_skills([tmp_path / "skills"]).skills["ops"]
    assert skill.roles == ("admin", "auditor")


def test_allowed_tools_accepts_a_yaml_list(write_skill: WriteSkill, tmp_path: Path) -> None:
    write_skill("listed", "name: listed\ndescription: D.\nallowed-tools:\n  - calc__evaluate\n  - files__*\n")
    skill = load_skills([tmp_path / "skills"]).skills["listed"]
    assert skill.allowed_tools == ("calc__evaluate", "files__*")


@pytest.mark.parametrize(
    ("folder", "frontmatter", "reason"),
    [
        ("bad-yaml", "name: bad-yaml\ndescription: [unclosed\n", "frontmatter: invalid YAML"),
        ("not-a-map", "- just\n- a list\n", "frontmatter: must be a YAML mapping"),
        ("extra-key", "name: extra-key\ndescription: D.\nversion: '1'\n", "unknown key 'version'"),
        ("mismatch", "name: other-name\ndescription: D.\n", "must equal the folder name 'mismatch'"),
        ("angle", "name: angle\ndescription: Use <b>this</b>.\n", "description: must not contain '<'"),
        ("no-name", "description: D.\n", "name: is required"),
        ("no-description", "name: no-description\n", "description: is required"),
        ("Upper", "name: Upper\ndescription: D.\n", "name: 'Upper' must be lowercase"),
        ("double--dash", "name: double--dash\ndescription: D.\n", "single '-'"),
        ("-leading", "name: -leading\ndescription: D.\n", "single '-'"),
        ("long-desc", f"name: long-desc\ndescription: {'x' * 1025}\n", "description: is 1025 characters"),
        ("long-compat", f"name: long-compat\ndescription: D.\ncompatibility: {'x' * 501}\n", "limit is 500"),
        ("meta-number", "name: meta-number\ndescription: D.\nmetadata:\n  version: 1.5\n", "metadata.version"),
        ("meta-list", "name: meta-list\ndescription: D.\nmetadata: [a]\n", "metadata: must be a map"),
        ("bad-license", "name: bad-license\ndescription: D.\nlicense: 2\n", "license: must be a non-empty string"),
        ("tools-map", "name: tools-map\ndescription: D.\nallowed-tools: {a: b}\n", "allowed-tools"),
        ("bad-life", "name: bad-life\ndescription: D.\nmetadata:\n  lifecycle: forever\n", "'forever'"),
    ],
)
def test_broken_skill_is_reported_while_others_load(
    write_skill: WriteSkill, tmp_path: Path, folder: str, frontmatter: str, reason: str
) -> None:
    write_skill("good-one")
    broken = write_skill(folder, frontmatter)
    result = load_skills([tmp_path / "skills"])
    assert list(result.skills) == ["good-one"]
    [problem] = result.problems
    assert problem.path == broken / "SKILL.md"
    assert reason in problem.reason


def test_long_name_is_reported(write_skill: WriteSkill, tmp_path: Path) -> None:
    name = "a" * 65
    write_skill(name, f"name: {name}\ndescription: D.\n")
    [problem] = load_skills([tmp_path / "skills"]).problems
    assert "name: is 65 characters; the limit is 64" in problem.reason


def test_file_without_frontmatter_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "bare"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("# Just Markdown\n")
    [problem] = load_skills([tmp_path / "skills"]).problems
    assert problem.path == folder / "SKILL.md"
    assert "must start with YAML frontmatter" in problem.reason


def test_unclosed_frontmatter_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "open"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: open\ndescription: D.\n")
    [problem] = load_skills([tmp_path / "skills"]).problems
    assert "no closing '---'" in problem.reason


def test_yaml_tags_that_build_objects_are_refused(write_skill: WriteSkill, tmp_path: Path) -> None:
    write_skill("evil", "name: evil\ndescription: !!python/object/apply:os.system ['true']\n")
    [problem] = load_skills([tmp_path / "skills"]).problems
    assert "invalid YAML" in problem.reason


def test_oversized_skill_file_is_reported_without_being_read(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "huge"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(b"---\nname: huge\ndescription: D.\n---\n" + b"x" * MAX_SKILL_FILE_BYTES)
    [problem] = load_skills([tmp_path / "skills"]).problems
    assert problem.path == folder / "SKILL.md"
    assert f"the limit is {MAX_SKILL_FILE_BYTES}" in problem.reason


def test_non_utf8_skill_file_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "latin"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\n")
    [problem] = load_skills([tmp_path / "skills"]).problems
    assert "not UTF-8" in problem.reason


def test_folder_without_skill_file_is_reported_but_hidden_folders_and_loose_files_are_skipped(
    write_skill: WriteSkill, tmp_path: Path
) -> None:
    root = tmp_path / "skills"
    write_skill("fine")
    (root / "empty").mkdir()
    (root / ".git").mkdir()
    (root / "README.md").write_text("A collection of skills.\n")
    result = load_skills([root])
    assert list(result.skills) == ["fine"]
    [problem] = result.problems
    assert problem.path == root / "empty"
    assert "no SKILL.md" in problem.reason


def test_missing_directory_is_reported(tmp_path: Path) -> None:
    [problem] = load_skills([tmp_path / "nowhere"]).problems
    assert problem.path == tmp_path / "nowhere"


def test_first_directory_wins_a_duplicate_name(write_skill: WriteSkill, tmp_path: Path) -> None:
    first = write_skill("same", root=tmp_path / "operator")
    second = write_skill("same", root=tmp_path / "extra")
    result = load_skills([tmp_path / "operator", tmp_path / "extra"])
    assert result.skills["same"].folder == first
    [problem] = result.problems
    assert problem.path == second / "SKILL.md"
    assert "duplicate skill name 'same'" in problem.reason


def test_tool_names_match_exact_names_and_globs_in_catalog_order(write_skill: WriteSkill, tmp_path: Path) -> None:
    write_skill("mixed", "name: mixed\ndescription: D.\nallowed-tools: calc__evaluate sqlite__* nope\n")
    skill = load_skills([tmp_path / "skills"]).skills["mixed"]
    catalog = ["files__read_file", "sqlite__query", "calc__evaluate", "sqlite__list_tables", "Sqlite__x"]
    assert skill.tool_names(catalog) == ["sqlite__query", "calc__evaluate", "sqlite__list_tables"]


def test_files_lists_bundled_files_without_skill_file_or_hidden_entries(
    write_skill: WriteSkill, tmp_path: Path
) -> None:
    folder = write_skill("bundle")
    (folder / "references").mkdir()
    (folder / "references" / "guide.md").write_text("guide")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "run.py").write_text("print(1)")
    (folder / ".env").write_text("SECRET=1")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "x").write_text("x")
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (folder / "link.txt").symlink_to(outside)
    skill = load_skills([tmp_path / "skills"]).skills["bundle"]
    assert skill.files() == ["references/guide.md", "scripts/run.py"]


def test_read_file_returns_text_or_bytes(write_skill: WriteSkill, tmp_path: Path) -> None:
    folder = write_skill("reader")
    (folder / "references").mkdir()
    (folder / "references" / "guide.md").write_text("the guide", encoding="utf-8")
    (folder / "logo.png").write_bytes(b"\x89PNG\xff\x00")
    skill = load_skills([tmp_path / "skills"]).skills["reader"]
    assert skill.read_file("references/guide.md") == "the guide"
    assert skill.read_file("./references/guide.md") == "the guide"
    assert skill.read_file("logo.png") == b"\x89PNG\xff\x00"


@pytest.mark.parametrize(
    ("relative", "reason"),
    [
        ("../other/SKILL.md", "climbs out of the skill folder"),
        ("references/../../other/SKILL.md", "climbs out of the skill folder"),
        ("..\\other\\SKILL.md", "climbs out of the skill folder"),
        ("/etc/passwd", "is an absolute path"),
        ("C:\\Windows\\win.ini", "is an absolute path"),
        ("escape.txt", "leads outside the skill folder"),
        ("linked/secret.txt", "leads outside the skill folder"),
        (".env", "hidden file"),
        ("missing.md", "does not exist"),
        ("references", "does not exist"),
        ("", "is empty"),
    ],
)
def test_read_outside_the_folder_is_refused(
    write_skill: WriteSkill, tmp_path: Path, relative: str, reason: str
) -> None:
    folder = write_skill("confined")
    write_skill("other")
    (folder / "references").mkdir()
    (folder / ".env").write_text("SECRET=1")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (folder / "escape.txt").symlink_to(outside / "secret.txt")
    (folder / "linked").symlink_to(outside)
    skill = load_skills([tmp_path / "skills"]).skills["confined"]
    with pytest.raises(SkillFileError, match=reason) as caught:
        skill.read_file(relative)
    assert isinstance(caught.value, ToolError)
    assert "confined" in caught.value.message


def test_link_inside_the_folder_is_readable(write_skill: WriteSkill, tmp_path: Path) -> None:
    folder = write_skill("aliased")
    (folder / "real.md").write_text("real")
    os.symlink("real.md", folder / "alias.md")
    skill = load_skills([tmp_path / "skills"]).skills["aliased"]
    assert skill.read_file("alias.md") == "real"
    assert skill.files() == ["alias.md", "real.md"]


def test_oversized_bundled_file_is_refused(write_skill: WriteSkill, tmp_path: Path) -> None:
    folder = write_skill("big")
    (folder / "data.bin").write_bytes(b"\0" * (1024 * 1024 + 1))
    skill = load_skills([tmp_path / "skills"]).skills["big"]
    with pytest.raises(SkillFileError, match="larger than"):
        skill.read_file("data.bin")
