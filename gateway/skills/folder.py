"""Skill folders: load SKILL.md leniently, validate it strictly, and read bundled files inside the folder."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal, get_args

import yaml

from gateway.errors import ConfigError, ToolError, clip

Lifecycle = Literal["turn", "task", "session"]
LIFECYCLES: tuple[str, ...] = get_args(Lifecycle)

SKILL_FILE = "SKILL.md"
MAX_SKILL_FILE_BYTES = 256 * 1024
MAX_BUNDLED_FILE_BYTES = 1024 * 1024
MAX_LISTED_FILES = 200

ALLOWED_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_ROLE_SEPARATORS = re.compile(r"[,\s]+")
_GLOB_CHARS = frozenset("*?[")


class SkillFileError(ToolError):
    """A bundled file of a skill cannot be read: outside the folder, missing, or too large."""

    hint = "Call Read_Skill_File with one of the paths the skill lists, relative to its folder."


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """Why one skill folder (or SKILL.md) was not loaded."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Skill:
    """One validated skill: its frontmatter, its instructions and the folder it lives in."""

    name: str
    description: str
    body: str
    folder: Path
    allowed_tools: tuple[str, ...] = ()
    lifecycle: Lifecycle = "session"
    roles: tuple[str, ...] = ()
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)

    def tool_names(self, catalog_names: Iterable[str]) -> list[str]:
        """The catalog names that `allowed-tools` selects (exact names or globs), in catalog order."""
        exact = {pattern for pattern in self.allowed_tools if not _GLOB_CHARS & set(pattern)}
        globs = [pattern for pattern in self.allowed_tools if pattern not in exact]
        selected: dict[str, None] = {}
        for name in catalog_names:
            if name in exact or any(fnmatchcase(name, pattern) for pattern in globs):
                selected[name] = None
        return list(selected)

    def files(self) -> list[str]:
        """Bundled files as POSIX paths relative to the folder, without SKILL.md or hidden entries."""
        root = self.folder.resolve()
        found: list[str] = []
        for directory, subdirectories, filenames in os.walk(root):
            subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
            for filename in sorted(filenames):
                path = Path(directory, filename)
                relative = path.relative_to(root).as_posix()
                if filename.startswith(".") or relative == SKILL_FILE or not _inside(path, root):
                    continue
                found.append(relative)
                if len(found) == MAX_LISTED_FILES:
                    return found
        return found

    def read_file(self, relative: str) -> str | bytes:
        """A bundled file's content (text when it is UTF-8), refusing anything outside the folder."""
        path = self._confined(relative)
        try:
            with path.open("rb") as stream:
                data = stream.read(MAX_BUNDLED_FILE_BYTES + 1)
        except OSError as error:
            raise SkillFileError(f"Skill {self.name!r}: {clip(relative)!r} cannot be read: {error.strerror}") from None
        if len(data) > MAX_BUNDLED_FILE_BYTES:
            raise SkillFileError(
                f"Skill {self.name!r}: {relative} is larger than {MAX_BUNDLED_FILE_BYTES} bytes",
                hint="The file is too large to return; read another file of the skill.",
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data

    def _confined(self, relative: str) -> Path:
        """The resolved path of `relative`, or a SkillFileError saying why it is refused."""
        where = f"Skill {self.name!r}: {clip(relative)!r}"
        if not relative.strip():
            raise SkillFileError(f"Skill {self.name!r}: the file path is empty")
        if "\x00" in relative:
            raise SkillFileError(f"{where} holds a NUL character, which no file name can")
        if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).is_absolute():
            raise SkillFileError(f"{where} is an absolute path; paths are relative to the skill folder")
        parts = PurePosixPath(relative.replace("\\", "/")).parts
        if ".." in parts:
            raise SkillFileError(f"{where} climbs out of the skill folder with '..'")
        # Hidden entries are never listed, so they are not offered for reading either (.env, .git).
        if any(part.startswith(".") for part in parts if part != "."):
            raise SkillFileError(f"{where} names a hidden file, which skills do not expose")
        root = self.folder.resolve()
        path = root.joinpath(*parts)
        if not _inside(path, root):
            raise SkillFileError(f"{where} is a link that leads outside the skill folder")
        try:
            exists = path.is_file()
        except OSError:
            # is_file() passes on errors other than "no such file", such as a name too long.
            exists = False
        if not exists:
            raise SkillFileError(f"{where} does not exist in the skill folder")
        return path


@dataclass(slots=True)
class SkillSet:
    """Every skill that loaded, by name, and every folder that did not, with the reason."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[SkillProblem] = field(default_factory=list)


def load_skills(directories: Sequence[Path]) -> SkillSet:
    """Load every skill folder under `directories`; a broken folder is reported, the others still load.

    When two directories hold a skill of the same name, the first directory wins.
    """
    result = SkillSet()
    for directory in directories:
        if not directory.is_dir():
            result.problems.append(SkillProblem(directory, "skills directory does not exist"))
            continue
        for folder in sorted(directory.iterdir()):
            # Loose files (a README, a licence) sit beside skill folders in real collections.
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            try:
                skill = load_skill(folder)
            except ConfigError as error:
                reason = f"{error.path}: {error.problem}" if error.path else error.problem
                result.problems.append(SkillProblem(Path(error.file), reason))
                continue
            first = result.skills.get(skill.name)
            if first is not None:
                reason = f"duplicate skill name {skill.name!r}; {first.folder} is used, this one is ignored"
                result.problems.append(SkillProblem(folder / SKILL_FILE, reason))
                continue
            result.skills[skill.name] = skill
    return result


def load_skill(folder: Path) -> Skill:
    """Read and validate `folder`/SKILL.md; raises ConfigError naming the file and the fault."""
    source = folder / SKILL_FILE
    if not source.is_file():
        raise ConfigError(str(folder), "", f"no {SKILL_FILE} in the skill folder")
    try:
        size = source.stat().st_size
        if size > MAX_SKILL_FILE_BYTES:
            raise ConfigError(str(source), "", f"{size} bytes; the limit is {MAX_SKILL_FILE_BYTES}")
        with source.open("rb") as stream:
            data = stream.read(MAX_SKILL_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(str(source), "", f"cannot be read: {error.strerror or error}") from error
    if len(data) > MAX_SKILL_FILE_BYTES:
        raise ConfigError(str(source), "", f"grew past the limit of {MAX_SKILL_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(str(source), "", f"not UTF-8 (byte {error.start})") from error
    return parse_skill(text, folder, source)


def parse_skill(text: str, folder: Path, source: Path) -> Skill:
    """Validate the text of a SKILL.md that lives in `folder`; errors name `source`."""
    frontmatter, body = _split_frontmatter(text, source)
    try:
        fields = yaml.safe_load(frontmatter)
    except yaml.YAMLError as error:
        raise ConfigError(str(source), "frontmatter", f"invalid YAML: {error}") from error
    except RecursionError:
        raise ConfigError(str(source), "frontmatter", "lists and maps are nested too deeply") from None
    except ValueError as error:
        # Python refuses to read integers of thousands of digits.
        raise ConfigError(str(source), "frontmatter", f"a value cannot be read: {error}") from None
    if not isinstance(fields, dict):
        raise ConfigError(str(source), "frontmatter", "must be a YAML mapping of keys to values")
    return _build(fields, body, folder, source)


def _split_frontmatter(text: str, source: Path) -> tuple[str, str]:
    """The YAML between the opening and closing `---` lines, and the Markdown after it."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise ConfigError(str(source), "", "must start with YAML frontmatter: a first line of '---'")
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :]).strip()
    raise ConfigError(str(source), "", "the frontmatter has no closing '---' line")


def _build(fields: dict[Any, Any], body: str, folder: Path, source: Path) -> Skill:
    """A Skill from parsed frontmatter, checking every key against the specification."""
    file = str(source)
    unknown = [repr(key) for key in fields if key not in ALLOWED_KEYS]
    if unknown:
        raise ConfigError(
            file,
            "frontmatter",
            f"unknown key {', '.join(unknown)}; allowed keys are {', '.join(ALLOWED_KEYS)}"
            " (gateway settings belong under metadata)",
        )
    name = _text(fields, "name", file, required=True, limit=64)
    if not _NAME.fullmatch(name):
        raise ConfigError(file, "name", f"{name!r} must be lowercase a-z, 0-9 and single '-' between them")
    if name != folder.name:
        raise ConfigError(file, "name", f"{name!r} must equal the folder name {folder.name!r}")
    description = _text(fields, "description", file, required=True, limit=1024)
    if "<" in description or ">" in description:
        raise ConfigError(file, "description", "must not contain '<' or '>'")
    metadata = _metadata(fields.get("metadata"), file)
    lifecycle = metadata.get("lifecycle", "session")
    if lifecycle not in LIFECYCLES:
        raise ConfigError(file, "metadata.lifecycle", f"{lifecycle!r} is not one of {', '.join(LIFECYCLES)}")
    return Skill(
        name=name,
        description=description,
        body=body,
        folder=folder,
        allowed_tools=_allowed_tools(fields.get("allowed-tools"), file),
        lifecycle=lifecycle,  # type: ignore[arg-type]  # checked against LIFECYCLES just above
        roles=tuple(role for role in _ROLE_SEPARATORS.split(metadata.get("roles", "")) if role),
        license=_text(fields, "license", file) or None,
        compatibility=_text(fields, "compatibility", file, limit=500) or None,
        metadata=metadata,
    )


def _text(fields: dict[Any, Any], key: str, file: str, *, required: bool = False, limit: int = 0) -> str:
    """The string value of `key` ("" when absent and optional), checked for type and length."""
    value = fields.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            file, key, "is required and must be a non-empty string" if required else "must be a non-empty string"
        )
    if limit and len(value) > limit:
        raise ConfigError(file, key, f"is {len(value)} characters; the limit is {limit}")
    return value


def _metadata(value: object, file: str) -> dict[str, str]:
    """The metadata map, which the specification restricts to string keys and string values."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(file, "metadata", "must be a map of string keys to string values")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ConfigError(file, f"metadata.{key}", f"must be a string (got {type(item).__name__}); quote the value")
    return dict(value)


def _allowed_tools(value: object, file: str) -> tuple[str, ...]:
    """Tool names or globs: a space-separated string per the specification, or a YAML list as seen in use."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(item, str) and item.strip() for item in value):
        return tuple(token for item in value for token in item.split())
    raise ConfigError(file, "allowed-tools", "must be a space-separated string of tool names")


def _inside(path: Path, root: Path) -> bool:
    """True when `path`, with every link followed, stays within `root` (already resolved)."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError, ValueError):
        # A link loop (RuntimeError before Python 3.13) or a name the OS cannot take (a lone surrogate)
        # leads nowhere that can be read.
        return False
