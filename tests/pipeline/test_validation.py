"""Argument validation against the tool's input schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
import pytest

from gateway.catalog import jsonschemas
from gateway.errors import ToolExecutionError, ToolInputError
from gateway.pipeline.chain import Pipeline, ToolCall
from gateway.pipeline.validation import ValidateArguments

from .conftest import MakeCall, make_tool, text_result

pytestmark = pytest.mark.anyio

ITEMS_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "integer"}},
                "required": ["name"],
            },
        },
    },
    "required": ["title", "items"],
    "additionalProperties": False,
}


class Recorder:
    """The rest of the chain: notes whether the call got through."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    async def __call__(self, call: ToolCall) -> types.CallToolResult:
        self.calls.append(call)
        return text_result("done")


async def test_valid_arguments_reach_the_next_step(make_call: MakeCall) -> None:
    recorder = Recorder()
    call = make_call(make_tool(schema=ITEMS_SCHEMA), {"title": "t", "items": [{"name": 1}]})
    result = await ValidateArguments()(call, recorder)
    assert result.content[0] == types.TextContent(text="done")
    assert recorder.calls == [call]


async def test_every_violation_is_listed_with_its_path_and_the_call_never_runs(make_call: MakeCall) -> None:
    recorder = Recorder()
    arguments = {"items": [{"name": 1}, {"name": 2}, {"name": "x"}, {}], "extra": 1}
    with pytest.raises(ToolInputError) as raised:
        await ValidateArguments()(make_call(make_tool("build", schema=ITEMS_SCHEMA), arguments), recorder)
    assert recorder.calls == []
    lines = raised.value.message.splitlines()
    assert lines[0] == "Invalid arguments for tool 'build':"
    assert lines[1:] == [
        "- $: 'title' is a required property",
        "- $: unexpected argument 'extra'; the tool takes title, items",
        "- $.items[2].name: 'x' is not of type 'integer'",
        "- $.items[3]: 'name' is a required property",
    ]


async def test_violations_sort_array_indexes_numerically(make_call: MakeCall) -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}
    arguments = {"xs": ["a"] * 11}
    with pytest.raises(ToolInputError) as raised:
        await ValidateArguments()(make_call(make_tool(schema=schema), arguments), Recorder())
    paths = [line.split(":")[0] for line in raised.value.message.splitlines()[1:]]
    assert paths == [f"- $.xs[{i}]" for i in range(11)]


async def test_a_huge_wrong_value_is_quoted_only_in_part(make_call: MakeCall) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    with pytest.raises(ToolInputError) as raised:
        await ValidateArguments()(make_call(make_tool(schema=schema), {"n": "y" * 100_000}), Recorder())
    assert len(raised.value.message) < 400
    assert raised.value.message.splitlines()[1].startswith("- $.n: 'yyy")


async def test_the_pipeline_answers_invalid_arguments_with_an_error_result(make_call: MakeCall) -> None:
    pipeline = Pipeline([ValidateArguments()], _never_runs)
    result = await pipeline.run(make_call(make_tool(schema=ITEMS_SCHEMA), {"title": 3, "items": []}))
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "$.title: 3 is not of type 'string'" in result.content[0].text


async def test_the_schema_draft_follows_its_dollar_schema(make_call: MakeCall) -> None:
    # Draft 4 spells an exclusive bound as a boolean next to "maximum"; 2020-12 would reject that schema.
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}},
    }
    with pytest.raises(ToolInputError, match=r"\$\.n: 5 is greater than or equal to the maximum of 5"):
        await ValidateArguments()(make_call(make_tool(schema=schema), {"n": 5}), Recorder())


async def test_an_invalid_schema_is_an_execution_error_naming_the_tool(make_call: MakeCall) -> None:
    recorder = Recorder()
    broken = {"type": "object", "properties": {"n": {"type": "integr"}}}
    with pytest.raises(ToolExecutionError, match="Tool 'broken' has an invalid input schema"):
        await ValidateArguments()(make_call(make_tool("broken", schema=broken), {"n": 1}), recorder)
    assert recorder.calls == []


async def test_a_schema_with_an_unresolvable_ref_is_an_execution_error(make_call: MakeCall) -> None:
    schema = {"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}}
    with pytest.raises(ToolExecutionError, match="Tool 'refs' has an input schema that cannot be applied"):
        await ValidateArguments()(make_call(make_tool("refs", schema=schema), {"n": 1}), Recorder())


async def test_validators_are_compiled_once_per_schema(make_call: MakeCall, monkeypatch: pytest.MonkeyPatch) -> None:
    step = ValidateArguments()
    arguments = {"title": "t", "items": [{"name": 1}]}
    compiled: list[Mapping[str, Any]] = []
    compile_ = jsonschemas.compile_schema

    # Counting compiles is exact where timing them is not on a busy machine.
    def counted(schema: Mapping[str, Any]) -> jsonschemas.Compiled:
        compiled.append(schema)
        return compile_(schema)

    monkeypatch.setattr(jsonschemas, "compile_schema", counted)

    async def compiles(fresh_schema: bool) -> int:
        compiled.clear()
        tool = make_tool(schema=ITEMS_SCHEMA)
        for _ in range(200):
            if fresh_schema:
                tool = make_tool(schema=dict(ITEMS_SCHEMA))
            await step(make_call(tool, arguments), Recorder())
        return len(compiled)

    # A new schema object each time forces a compile; the same object is compiled once.
    assert await compiles(fresh_schema=False) == 1
    assert await compiles(fresh_schema=True) == 200


async def _never_runs(call: ToolCall) -> types.CallToolResult:
    raise AssertionError("an invalid call reached execution")


async def test_arguments_the_schema_does_not_take_are_named_with_those_it_takes_and_a_hint_to_leave_them_out(
    make_call: MakeCall,
) -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "object", "additionalProperties": False}}},
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
    }
    arguments = {"items": [{"nme": 1}], "x-trace": "ok", "colour": "red", "size": 2}
    with pytest.raises(ToolInputError) as raised:
        await ValidateArguments()(make_call(make_tool("paint", schema=schema), arguments), Recorder())
    assert raised.value.message.splitlines()[1:] == [
        "- $: unexpected arguments 'colour', 'size'; the tool takes items",
        "- $.items[0]: unexpected property 'nme'; it takes no properties",
    ]
    assert "Leave out the arguments the tool does not take" in raised.value.hint


async def test_a_schema_without_additional_properties_false_lets_extra_arguments_through(make_call: MakeCall) -> None:
    recorder = Recorder()
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    await ValidateArguments()(make_call(make_tool(schema=schema), {"a": 1, "extra": 2}), recorder)
    assert len(recorder.calls) == 1
