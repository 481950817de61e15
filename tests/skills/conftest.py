"""Fixtures for the skill tests: real skill folders written to a temporary directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

WriteSkill = Callable[..., Path]


@pytest.fixture
def write_skill(tmp_path: Path) -> WriteSkill:
    """A function that writes `<root>/<folder>/SKILL.md` and returns the folder."""

    def write(
        folder: str,
        frontmatter: str | None = None,
        body: str = "# Instructions\n\nDo the thing.\n",
        root: Path = tmp_path / "skills",
    ) -> Path:
        path = root / folder
        path.mkdir(parents=True, exist_ok=True)
        if frontmatter is None:
            frontmatter = f"name: {folder}\ndescription: Does {folder} things when asked.\n"
        (path / "SKILL.md").write_text(f"---\n{frontmatter}---\n{body}", encoding="utf-8")
        return path

    return write
