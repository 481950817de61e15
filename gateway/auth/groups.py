"""Tool groups: named subsets of the catalog, each served at an endpoint of its own.

Pure: no I/O. A group chooses tools by the same rules as roles (`auth.policy.Rule`: a name glob, or
a map of name, server, tag and risk): a tool belongs to it when an allow rule matches and no deny
rule does. Meta-tools belong to every group. A caller connected to a group (`/mcp/g/<name>`,
`stdio --group NAME`) sees what its role may see AND what the group holds.

Groups come from the `groups` section of the configuration (source "file") and from the admin API
(source "api", kept in the registration store). The file wins a name clash, and a file group is
changed by editing the file, never through the API.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gateway.auth.policy import RULE_SCHEMA, Rule, selects
from gateway.catalog.tools import GATEWAY_SOURCE, ToolRecord
from gateway.errors import ConfigError, ConflictError, NotFoundError, clip
from gateway.problems import NAME_PATTERN, ConfigProblems, describe_value, render_path, validate_section

Source = Literal["file", "api"]

GROUP_NAME_RULE = "group names are 1-32 letters, digits, '_' or '-', because they are part of URLs (/mcp/g/<name>)"

GROUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["allow"],
    "properties": {
        "description": {"type": "string"},
        "allow": {"type": "array", "minItems": 1, "items": RULE_SCHEMA},
        "deny": {"type": "array", "items": RULE_SCHEMA},
    },
}
"""The JSON Schema of one group: `{description, allow: [rules], deny: [rules]}`."""

GROUPS_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": GROUP_SCHEMA}
"""The JSON Schema of the `groups` section."""


@dataclass(frozen=True, slots=True)
class Group:
    """One named subset of the catalog."""

    name: str
    description: str = ""
    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    source: Source = "file"

    def includes(self, tool: ToolRecord) -> bool:
        """Whether `tool` belongs to the group: meta-tools always; others when an allow rule
        matches and no deny rule does."""
        return tool.source == GATEWAY_SOURCE or selects(self.allow, self.deny, tool)


def parse_groups(section: Any, *, source_file: str, source: Source = "file") -> dict[str, Group]:
    """The groups of a `groups` section (none when it is absent); raises `ConfigError` naming each problem."""
    if section is None:
        return {}
    validate_section(section, GROUPS_SCHEMA, section="groups", source_file=source_file)
    bad = [name for name in section if not NAME_PATTERN.fullmatch(name)]
    if bad:
        problems = [(render_path(("groups", name)), f"{clip(name)!r}: {GROUP_NAME_RULE}") for name in bad]
        raise ConfigProblems(source_file, problems)
    return {
        name: Group(
            name=name,
            description=raw.get("description", ""),
            allow=tuple(Rule.parse(rule) for rule in raw["allow"]),
            deny=tuple(Rule.parse(rule) for rule in raw.get("deny", ())),
            source=source,
        )
        for name, raw in section.items()
    }


def parse_group(entry: Any, *, source_file: str, source: Source) -> tuple[Group, dict[str, Any]]:
    """One group in its API form (a `groups` entry with a "name"), checked like the file's; the
    group and the entry as the file would hold it (for the registration store)."""
    if not isinstance(entry, Mapping):
        raise ConfigError(source_file, "", f"expected a map with name, allow and deny, got {describe_value(entry)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(source_file, "name", "missing: a group needs a name")
    rest = {key: value for key, value in entry.items() if key != "name"}
    return parse_groups({name: rest}, source_file=source_file, source=source)[name], rest


class GroupSet:
    """The live groups: the file's, in file order, then those added through the API."""

    def __init__(self, groups: Mapping[str, Group] | None = None) -> None:
        self._groups: dict[str, Group] = dict(groups or {})

    def __iter__(self) -> Iterator[Group]:
        return iter(list(self._groups.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._groups

    def get(self, name: str) -> Group | None:
        """The group `name`, if there is one."""
        return self._groups.get(name)

    def require(self, name: str) -> Group:
        """The group `name`; `NotFoundError` when there is none."""
        group = self._groups.get(name)
        if group is None:
            raise NotFoundError(f"No group {clip(name)!r}")
        return group

    def add(self, group: Group) -> None:
        """Add a group; `ConflictError` when the name is taken."""
        if group.name in self._groups:
            raise ConflictError(f"A group named {group.name!r} exists already")
        self._groups[group.name] = group

    def follow_file(self, groups: Mapping[str, Group]) -> list[str]:
        """Take the groups of an edited configuration file in place of the file's old ones, keeping
        those added through the API (a name the file now uses is the file's); the names that changed."""
        before = dict(self._groups)
        kept = {name: group for name, group in before.items() if group.source != "file" and name not in groups}
        self._groups = {**groups, **kept}
        return sorted(
            name for name in before.keys() | self._groups.keys() if before.get(name) != self._groups.get(name)
        )

    def follow_api(self, groups: Mapping[str, Group]) -> list[str]:
        """Take `groups` as the API's groups in place of the old ones (registrations another replica
        changed), the file's staying; the names that changed."""
        before = dict(self._groups)
        files = {name: group for name, group in before.items() if group.source == "file"}
        self._groups = {**files, **{name: group for name, group in groups.items() if name not in files}}
        return sorted(
            name for name in before.keys() | self._groups.keys() if before.get(name) != self._groups.get(name)
        )

    def remove(self, name: str) -> Group:
        """Remove an API group; `NotFoundError`, or `ConflictError` for a group of the config file."""
        group = self.require(name)
        if group.source == "file":
            raise ConflictError(f"Group {name!r} is defined in the configuration file; remove it there")
        del self._groups[name]
        return group
