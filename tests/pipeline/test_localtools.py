"""Local Python tools: schemas from signatures and docstrings, loading, and running them."""

from __future__ import annotations

import datetime
import enum
import textwrap
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Optional

import anyio
import jsonschema
import mcp_types as types
import pytest

from gateway.errors import ToolExecutionError, ToolInputError
from gateway.pipeline.chain import Pipeline, ToolCall
from gateway.pipeline.execution import ExecuteWithDeadline
from gateway.pipeline.validation import ValidateArguments
from gateway.upstreams.localtools import (
    LocalToolError,
    LocalToolSource,
    load_module_tools,
    load_reference,
    parse_docstring,
    tool,
    tool_record,
)

from .conftest import make_session


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def search(
    query: str,
    limit: int = 10,
    tags: list[str] | None = None,
    weights: dict[str, float] | None = None,
    mode: Literal["fast", "exact"] = "fast",
    colour: Colour = Colour.RED,
    strict: bool = False,
    extra: Any = None,
) -> str:
    """Search the index for documents.

    Matches are ranked by score.

    Args:
        query: The words to look for.
        limit (int): How many documents to return,
            at most.
        tags: Only documents with all of these tags.

    Returns:
        The matching documents, one per line.
    """
    return query


def rest_style(path: str, depth: Optional[int] = None) -> None:  # noqa: UP045 - Optional is what we parse
    """Walk a directory.

    :param path: The directory to walk.
    :param int depth: How deep to go;
        unlimited when omitted.
    :returns: nothing.
    """


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    record = tool_record(search)
    assert record.name == record.original_name == "search"
    assert record.source == "local"
    assert record.description == "Search the index for documents.\n\nMatches are ranked by score."
    assert record.input_schema == {
        "title": "searchArguments",
        "type": "object",
        "properties": {
            "query": {"title": "Query", "type": "string", "description": "The words to look for."},
            "limit": {
                "title": "Limit",
                "type": "integer",
                "description": "How many documents to return, at most.",
                "default": 10,
            },
            "tags": {
                "title": "Tags",
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "description": "Only documents with all of these tags.",
                "default": None,
            },
            "weights": {
                "title": "Weights",
                "anyOf": [{"type": "object", "additionalProperties": {"type": "number"}}, {"type": "null"}],
                "default": None,
            },
            "mode": {"title": "Mode", "type": "string", "enum": ["fast", "exact"], "default": "fast"},
            "colour": {"$ref": "#/$defs/Colour", "default": "red"},
            "strict": {"title": "Strict", "type": "boolean", "default": False},
            "extra": {"title": "Extra", "default": None},
        },
        "$defs": {"Colour": {"title": "Colour", "type": "string", "enum": ["red", "blue"]}},
        "required": ["query"],
        "additionalProperties": False,
    }
    jsonschema.Draft202012Validator.check_schema(record.input_schema)


def test_rest_docstrings_and_optional_are_understood() -> None:
    record = tool_record(rest_style, source="files")
    assert record.source == "files"
    assert record.description == "Walk a directory."
    assert record.input_schema["properties"] == {
        "path": {"title": "Path", "type": "string", "description": "The directory to walk."},
        "depth": {
            "title": "Depth",
            "anyOf": [{"type": "integer"}, {"type": "null"}],
            "description": "How deep to go; unlimited when omitted.",
            "default": None,
        },
    }


def with_parameter(hint: Any) -> Callable[..., None]:
    """A function taking one parameter `x` of type `hint`."""

    def takes(x: Any) -> None:
        """Take x."""

    takes.__annotations__ = {"x": hint, "return": None}
    return takes


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (list[Any], {"type": "array", "items": {}}),
        (dict, {"type": "object", "additionalProperties": True}),
        (Literal[1, "a"], {"enum": [1, "a"]}),
        (datetime.date, {"type": "string", "format": "date"}),
        (object, {}),
    ],
)
def test_type_hints_map_to_json_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert tool_record(with_parameter(hint)).input_schema["properties"]["x"] == {"title": "X", **schema}


def test_a_parameter_json_schema_cannot_express_is_refused_naming_the_function() -> None:
    with pytest.raises(LocalToolError) as raised:
        tool_record(with_parameter(Iterator[int]))
    assert raised.value.message.startswith(
        "Local tool 'takes': cannot describe its parameters: PydanticInvalidForJsonSchema: "
    )


def test_a_parameter_that_cannot_be_passed_by_name_is_refused() -> None:
    def positional(x: int, /) -> None:
        """Take x."""

    with pytest.raises(LocalToolError, match="parameter 'x' cannot be passed by name"):
        tool_record(positional)


def test_a_docstring_without_sections_is_all_description() -> None:
    assert parse_docstring("Say hello.\n\nTo anyone.") == ("Say hello.\n\nTo anyone.", {})


def test_decorator_options_become_annotations() -> None:
    @tool(read_only=True, title="Current time")
    def now() -> str:
        """The current time."""
        return "noon"

    @tool
    def plain() -> None:
        """Nothing."""

    record = tool_record(now)
    assert record.annotations == types.ToolAnnotations(title="Current time", read_only_hint=True)
    assert record.title == "Current time"
    assert record.read_only
    assert tool_record(plain).annotations is None
    assert now() == "noon"


@pytest.fixture
def tool_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "ops_tools_fixture.py").write_text(
        textwrap.dedent(
            '''
            from gateway.upstreams.localtools import tool

            @tool(read_only=True)
            def first(x: int) -> int:
                """First tool."""
                return x

            def helper() -> None:
                """Not a tool."""

            @tool
            async def second() -> str:
                """Second tool."""
                return "2"
            '''
        )
    )
    (tmp_path / "broken_tools_fixture.py").write_text("raise RuntimeError('bad config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "ops_tools_fixture"


def test_a_module_yields_its_decorated_functions_in_order(tool_module: str) -> None:
    assert [f.__name__ for f in load_module_tools(tool_module)] == ["first", "second"]


def test_a_reference_loads_the_named_function(tool_module: str) -> None:
    assert load_reference(f"{tool_module}:helper").__name__ == "helper"


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("no_colon", "expected 'module:function'"),
        (
            "no_such_module_anywhere:f",
            "cannot import 'no_such_module_anywhere': ModuleNotFoundError: No module named 'no_such_module_anywhere'",
        ),
        ("ops_tools_fixture:missing", "module 'ops_tools_fixture' has no 'missing'"),
        ("broken_tools_fixture:f", "cannot import 'broken_tools_fixture': RuntimeError: bad config"),
    ],
)
def test_bad_references_name_the_reference(tool_module: str, reference: str, problem: str) -> None:
    with pytest.raises(LocalToolError) as raised:
        load_reference(reference)
    assert raised.value.message == f"Local tool reference '{reference}': {problem}"


def test_two_functions_with_one_name_are_refused() -> None:
    with pytest.raises(LocalToolError, match="two functions are named 'search'"):
        LocalToolSource([search, search])


def returns(value: Any) -> Any:
    """Give back what it was asked to."""
    return value


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "result"),
    [
        ("hi", types.CallToolResult(content=[types.TextContent(text="hi")])),
        (None, types.CallToolResult(content=[types.TextContent(text="")])),
        ({"a": 1}, types.CallToolResult(content=[types.TextContent(text='{"a": 1}')], structured_content={"a": 1})),
        (
            [1, 2],
            types.CallToolResult(content=[types.TextContent(text="[1, 2]")], structured_content={"result": [1, 2]}),
        ),
        (3, types.CallToolResult(content=[types.TextContent(text="3")])),
        (
            {"at": datetime.date(2026, 1, 2)},
            types.CallToolResult(
                content=[types.TextContent(text='{"at": "2026-01-02"}')], structured_content={"at": "2026-01-02"}
            ),
        ),
        (types.CallToolResult(content=[], is_error=True), types.CallToolResult(content=[], is_error=True)),
    ],
)
async def test_return_values_become_results(value: Any, result: types.CallToolResult) -> None:
    source = LocalToolSource([returns])
    assert await source.call_tool(source.records[0], {"value": value}, None) == result


@pytest.mark.anyio
async def test_sync_functions_run_in_a_worker_thread_and_async_ones_on_the_loop() -> None:
    def where() -> str:
        """Name the thread."""
        return threading.current_thread().name

    async def where_async() -> str:
        """Name the thread."""
        return threading.current_thread().name

    source = LocalToolSource([where, where_async])
    sync_result, async_result = [await source.call_tool(r, {}, None) for r in source.records]
    assert sync_result.content[0] != types.TextContent(text=threading.current_thread().name)
    assert async_result.content[0] == types.TextContent(text=threading.current_thread().name)


@pytest.mark.anyio
async def test_enum_arguments_arrive_as_members() -> None:
    def paint(colour: Colour, also: list[Colour] | None = None) -> str:
        """Paint."""
        assert isinstance(colour, Colour)
        assert all(isinstance(c, Colour) for c in also or [])
        return colour.name

    source = LocalToolSource([paint])
    result = await source.call_tool(source.records[0], {"colour": "blue", "also": ["red"]}, None)
    assert result.content[0] == types.TextContent(text="BLUE")


@pytest.mark.anyio
async def test_arguments_arrive_as_the_declared_types_and_a_misfit_is_an_input_error() -> None:
    def days_until(when: datetime.date) -> int:
        """Days from 2026-01-01 to `when`."""
        assert isinstance(when, datetime.date)
        return (when - datetime.date(2026, 1, 1)).days

    source = LocalToolSource([days_until])
    result = await source.call_tool(source.records[0], {"when": "2026-01-31"}, None)
    assert result.content[0] == types.TextContent(text="30")
    with pytest.raises(ToolInputError) as raised:
        await source.call_tool(source.records[0], {"when": "soon"}, None)
    assert raised.value.message.startswith("Invalid arguments for tool 'days_until':\n- $.when: Input should be")


@pytest.mark.anyio
async def test_keyword_arguments_the_function_does_not_name_reach_its_var_keyword_parameter() -> None:
    def labels(name: str, **more: str) -> dict[str, str]:
        """Label `name` with the rest."""
        return {"name": name, **more}

    source = LocalToolSource([labels])
    record = source.records[0]
    assert record.input_schema["additionalProperties"] is True
    assert set(record.input_schema["properties"]) == {"name"}
    result = await source.call_tool(record, {"name": "a", "colour": "red"}, None)
    assert result.structured_content == {"name": "a", "colour": "red"}


@pytest.mark.anyio
async def test_through_the_pipeline_bad_arguments_and_exceptions_become_error_results() -> None:
    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    source = LocalToolSource([divide])
    pipeline = Pipeline([ExecuteWithDeadline(5, 0), ValidateArguments()], _terminal(source))
    record = source.records[0]
    session = make_session()
    ok = await pipeline.run(ToolCall(session, record, {"a": 6, "b": 3}))
    assert ok.content[0] == types.TextContent(text="2.0")
    invalid = await pipeline.run(ToolCall(session, record, {"a": "6"}))
    assert invalid.is_error
    assert "$.a: '6' is not of type 'integer'" in str(invalid.content[0])
    failed = await pipeline.run(ToolCall(session, record, {"a": 1, "b": 0}))
    assert failed.content[0] == types.TextContent(
        text=f"Tool 'divide' failed: ZeroDivisionError: division by zero\nHint: {ToolExecutionError.hint}"
    )


@pytest.mark.anyio
async def test_a_hanging_sync_function_does_not_hold_the_deadline() -> None:
    release = threading.Event()

    def hang() -> None:
        """Block until released."""
        release.wait(10)

    source = LocalToolSource([hang])
    pipeline = Pipeline([ExecuteWithDeadline(0.05, 0)], _terminal(source))
    try:
        with anyio.fail_after(5):
            result = await pipeline.run(ToolCall(make_session(), source.records[0], {}))
    finally:
        release.set()
    assert result.is_error
    assert "did not finish within 0.05 s" in str(result.content[0])


def _terminal(source: LocalToolSource) -> Callable[[ToolCall], Awaitable[types.CallToolResult]]:
    async def execute(call: ToolCall) -> types.CallToolResult:
        return await source.call_tool(call.tool, call.arguments, call.progress)

    return execute
