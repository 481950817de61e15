"""Tool groups, pure: which tools a group holds, and how a bad group is reported."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.auth.groups import Group, GroupSet, parse_group, parse_groups
from gateway.catalog.tools import GATEWAY_SOURCE, Risk, ToolRecord
from gateway.errors import ConfigError, ConflictError, NotFoundError
from gateway.problems import ConfigProblems


def tool(name: str, source: str = "toy", *, tags: frozenset[str] = frozenset(), risk: Risk | None = None) -> ToolRecord:
    return ToolRecord(
        name=name, source=source, original_name=name.split("__")[-1], input_schema={}, tags=tags, risk=risk
    )


def group(**raw: Any) -> Group:
    return parse_groups({"g": raw}, source_file="f")["g"]


def test_a_group_holds_what_an_allow_rule_matches_and_no_deny_rule_does() -> None:
    coding = group(allow=["toy__*", {"tag": "build"}], deny=[{"risk": "high"}])
    assert coding.includes(tool("toy__echo"))
    assert coding.includes(tool("make__all", "make", tags=frozenset({"build"})))
    assert not coding.includes(tool("toy__wipe", risk=Risk.HIGH))
    assert not coding.includes(tool("other__echo", "other"))


def test_meta_tools_are_in_every_group() -> None:
    assert group(allow=["nothing"]).includes(tool("Find_Tools", GATEWAY_SOURCE))


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"g": {}}, "f: groups.g: missing required key 'allow'"),
        ({"g": {"allow": []}}, "f: groups.g.allow: must list at least 1 item"),
        ({"g": {"allow": ["*"], "deni": []}}, "f: groups.g.deni: unknown key (did you mean 'deny'?)"),
        (
            {"g": {"allow": [{"risk": "huge"}]}},
            "f: groups.g.allow[0].risk: must be one of 'low', 'medium', 'high'; got 'huge'",
        ),
        ({"a b": {"allow": ["*"]}}, "f: groups[\"a b\"]: 'a b': group names are 1-32 letters, digits, '_' or '-'"),
    ],
)
def test_a_bad_group_is_reported_with_its_path(section: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigProblems) as raised:
        parse_groups(section, source_file="f")
    assert raised.value.message.startswith(expected)


def test_an_api_entry_is_parsed_like_the_file_s_and_kept_in_the_file_s_form() -> None:
    parsed, stored = parse_group({"name": "g", "allow": ["toy__*"]}, source_file="api", source="api")
    assert (parsed.name, parsed.source, stored) == ("g", "api", {"allow": ["toy__*"]})
    with pytest.raises(ConfigError, match="name: missing"):
        parse_group({"allow": ["*"]}, source_file="api", source="api")


def test_the_set_refuses_a_taken_name_and_the_removal_of_a_file_group() -> None:
    groups = GroupSet({"file": Group("file", source="file")})
    groups.add(Group("api", source="api"))
    with pytest.raises(ConflictError):
        groups.add(Group("file", source="api"))
    with pytest.raises(ConflictError):
        groups.remove("file")
    with pytest.raises(NotFoundError, match="No group 'gone'"):
        groups.require("gone")
    assert groups.remove("api").name == "api"
    assert [g.name for g in groups] == ["file"]
