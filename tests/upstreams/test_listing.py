"""Listed tools become records whose equal schema parts are held once."""

from __future__ import annotations

import copy

import mcp_types as types

from gateway.config.model import ServerConfig, ToolSettings
from gateway.upstreams.listing import records_for, shared

QUERY = {"type": "string", "description": "What to look for"}


def _schema(extra: str) -> dict[str, object]:
    return {
        "type": "object",
        "properties": {"query": dict(QUERY), extra: {"type": "integer", "default": 10}},
        "required": ["query"],
    }


def test_equal_schema_parts_of_a_server_s_tools_are_one_object_and_values_are_unchanged() -> None:
    tools = [types.Tool(name=f"t{i}", input_schema=_schema("limit" if i < 2 else "size")) for i in range(3)]
    records = records_for(ServerConfig(name="s", transport="stdio", command="x"), tools)
    first, second, third = (record.input_schema for record in records)
    assert first is second
    assert third is not first and third["properties"]["query"] is first["properties"]["query"]
    assert [record.input_schema for record in records] == [_schema("limit"), _schema("limit"), _schema("size")]


def test_the_tools_of_a_server_that_add_no_tags_share_its_tag_set() -> None:
    tools = [types.Tool(name=f"t{i}", input_schema={"type": "object"}) for i in range(3)]
    own = {"t2": ToolSettings(tags=("write",))}
    config = ServerConfig(name="s", transport="stdio", command="x", tags=("files",), tools=own)
    first, second, third = (record.tags for record in records_for(config, tools))
    assert first is second and first == {"files"}
    assert third == {"files", "write"}


def test_sharing_keeps_types_apart_that_compare_equal() -> None:
    value = {"a": [1, True, 1.0], "b": [True, 1, 1.0], "c": {}, "d": []}
    result = shared(copy.deepcopy(value), {})
    assert result == value
    assert [type(item) for item in result["a"]] == [int, bool, float]
    assert result["c"] == {} and result["d"] == []
