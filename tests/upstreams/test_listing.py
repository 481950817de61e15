"""Listed tools, as the JSON a server sends, become records whose equal parts are held once."""

from __future__ import annotations

import copy

import mcp_types as types
import pytest

from gateway.config.model import ServerConfig, ToolSettings
from gateway.errors import ToolExecutionError
from gateway.upstreams.listing import records_for, shared

QUERY = {"type": "string", "description": "What to look for"}


def _schema(extra: str) -> dict[str, object]:
    return {
        "type": "object",
        "properties": {"query": dict(QUERY), extra: {"type": "integer", "default": 10}},
        "required": ["query"],
    }


SERVER = ServerConfig(name="s", transport="stdio", command="x")


def _tool(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "inputSchema": {"type": "object"}, **fields}


def test_equal_schema_parts_of_a_server_s_tools_are_one_object_and_values_are_unchanged() -> None:
    tools = [_tool(f"t{i}", inputSchema=_schema("limit" if i < 2 else "size")) for i in range(3)]
    records = records_for(SERVER, tools)
    first, second, third = (record.input_schema for record in records)
    assert first is second
    assert third is not first and third["properties"]["query"] is first["properties"]["query"]
    assert [record.input_schema for record in records] == [_schema("limit"), _schema("limit"), _schema("size")]


def test_the_tools_of_a_server_that_add_no_tags_share_its_tag_set() -> None:
    tools = [_tool(f"t{i}") for i in range(3)]
    own = {"t2": ToolSettings(tags=("write",))}
    config = ServerConfig(name="s", transport="stdio", command="x", tags=("files",), tools=own)
    first, second, third = (record.tags for record in records_for(config, tools))
    assert first is second and first == {"files"}
    assert third == {"files", "write"}


def test_equal_output_schemas_and_annotations_are_one_object_too() -> None:
    output = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}
    hints = {"readOnlyHint": True, "title": "Reads"}
    tools = [_tool(f"t{i}", outputSchema=copy.deepcopy(output), annotations=dict(hints)) for i in range(2)]
    first, second = records_for(SERVER, tools)
    assert first.output_schema is second.output_schema and first.output_schema == output
    assert first.annotations is second.annotations
    assert first.annotations == types.ToolAnnotations(read_only_hint=True, title="Reads") and first.read_only


def test_a_listed_tool_keeps_its_fields() -> None:
    listed = _tool(
        "t",
        title="T",
        description="Does t.",
        outputSchema={"type": "object"},
        execution={"taskSupport": "optional"},
        icons=[{"src": "https://example.com/t.png"}],
    )
    (record,) = records_for(SERVER, [listed])
    expected = types.Tool.model_validate(listed)
    assert (record.name, record.original_name, record.source) == ("t", "t", "s")
    assert (record.title, record.description) == (expected.title, expected.description)
    assert (record.input_schema, record.output_schema) == (expected.input_schema, expected.output_schema)
    assert record.execution == expected.execution and record.annotations is None


@pytest.mark.parametrize(
    "listed",
    [
        {"inputSchema": {"type": "object"}},
        _tool("t", inputSchema={"type": "string"}),
        _tool("t", inputSchema=None),
        _tool("t", outputSchema={"type": "array"}),
        _tool("t", description=3),
        _tool("t", annotations={"readOnlyHint": "maybe"}),
        "t",
    ],
)
def test_a_tool_not_of_the_protocol_s_shape_fails_the_listing(listed: object) -> None:
    with pytest.raises(ToolExecutionError):
        records_for(SERVER, [listed])


def test_sharing_keeps_types_apart_that_compare_equal() -> None:
    value = {"a": [1, True, 1.0], "b": [True, 1, 1.0], "c": {}, "d": []}
    result = shared(copy.deepcopy(value), {})
    assert result == value
    assert [type(item) for item in result["a"]] == [int, bool, float]
    assert result["c"] == {} and result["d"] == []
