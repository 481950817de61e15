"""Broken skill folders are reported, never raised; bundled files are read only from inside their folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import GatewayError
from gateway.skills.folder import Skill, load_skills

from . import RUNS, TEXT

SECRET = "the sibling secret"
FRONTMATTER_LINES = st.sampled_from(
    [
        "name: demo", "description: Does demo work.", "metadata: {lifecycle: turn}", "metadata: [1]",
        "allowed-tools: a b*", "allowed-tools: [1, 2]", "license: 5", "a: &a [*a]", "name: &n [*n]",
        "metadata: {roles: !!binary aGk=}", "? [x]\n: y", "x: " + "[" * 3000, "n: " + "9" * 5000, "name: Demo",
        "description: <b>", "compatibility: " + "x" * 600, "!!python/object:os.system {}", "\t- bad",
    ]
)  # fmt: skip
SKILL_TEXT = st.one_of(
    st.binary(max_size=400),
    st.builds(
        lambda lines, body: ("---\n" + "\n".join(lines) + "\n---\n" + body).encode("utf-8", "surrogatepass"),
        st.lists(st.one_of(FRONTMATTER_LINES, TEXT), max_size=6),
        TEXT,
    ),
)


@RUNS
def test_any_skill_file_is_loaded_or_reported(runs: settings, tmp_path: Path) -> None:
    @runs
    @given(st.lists(SKILL_TEXT, min_size=1, max_size=3))
    def check(contents: list[bytes]) -> None:
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        for index, content in enumerate(contents):
            folder = root / ("demo" if index == 0 else f"demo{index}")
            folder.mkdir()
            (folder / "SKILL.md").write_bytes(content)
        result = load_skills([root])
        assert len(result.skills) + len(result.problems) == len(contents)

    check()


def skill_with_neighbours(root: Path) -> Skill:
    """A skill folder with a file, a hidden file and links out of it, beside a secret it must not reveal."""
    (root / "secret.txt").write_text(SECRET)
    folder = root / "demo"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "guide.md").write_text("guide")
    (folder / ".env").write_text(SECRET)
    (folder / "escape").symlink_to(root / "secret.txt")
    (folder / "up").symlink_to(root)
    (folder / "docs" / "loop").symlink_to(folder / "docs" / "loop")
    return Skill(name="demo", description="d", body="", folder=folder)


RELATIVE_PATHS = st.one_of(
    TEXT,
    st.lists(st.sampled_from(["..", ".", "", "docs", "guide.md", "escape", "up", "secret.txt", ".env", "loop",
                              "\x00", "~", "C:", "\\", "/", "a" * 300]), max_size=5).map("/".join),
)  # fmt: skip


@RUNS
def test_a_bundled_file_is_read_from_inside_the_folder_or_refused(runs: settings, tmp_path: Path) -> None:
    skill = skill_with_neighbours(tmp_path)
    root = skill.folder.resolve()

    @runs
    @given(RELATIVE_PATHS)
    def check(relative: str) -> None:
        try:
            content = skill.read_file(relative)
        except GatewayError:
            return
        assert content != SECRET and content != SECRET.encode()
        assert (root / relative).resolve().is_relative_to(root)

    check()


def test_listed_files_stay_inside_the_folder(tmp_path: Path) -> None:
    skill = skill_with_neighbours(tmp_path)
    assert skill.files() == ["docs/guide.md"]
    assert all(not os.path.isabs(name) for name in skill.files())
