"""Code mode's stub package: tools become typed Python functions whose body only hands their arguments on."""

from __future__ import annotations

import inspect
import types
from typing import Any

from gateway.catalog.tools import GATEWAY_SOURCE, ToolRecord
from gateway.skills.codestubs import identifier, python_type, stub_package


def tool(source: str, name: str, properties: dict[str, Any], required: list[str], **extra: Any) -> ToolRecord:
    schema = {"type": "object", "properties": properties, "required": required}
    return ToolRecord(name=f"{source}__{name}", source=source, original_name=name, input_schema=schema, **extra)


def load(source: str, calls: list[tuple[str, dict[str, Any]]]) -> types.ModuleType:
    """A stub module's source run as the script runner runs it, `_call` recording each call."""
    module = types.ModuleType("stub")

    def record(name: str, arguments: dict[str, Any]) -> str:
        calls.append((name, arguments))
        return "done"

    module.__dict__["_call"] = record
    exec(compile(source, "<stub>", "exec", dont_inherit=True), module.__dict__)
    return module


def test_a_function_takes_required_parameters_first_and_passes_only_those_given() -> None:
    read = tool(
        "files",
        "read_file",
        {"offset": {"type": "integer"}, "path": {"type": "string", "description": "where"}},
        ["path"],
        description="Read a file.",
        output_schema={"type": "object"},
    )
    package = stub_package([read])
    calls: list[tuple[str, dict[str, Any]]] = []
    module = load(package["files"], calls)
    function = module.read_file
    assert str(inspect.signature(function)) == "(path: str, *, offset: int | None = None) -> dict[str, typing.Any]"
    assert function("a.txt") == "done"
    function("b.txt", offset=3)
    assert calls == [("files__read_file", {"path": "a.txt"}), ("files__read_file", {"path": "b.txt", "offset": 3})]
    assert function.__doc__ is not None
    assert "Read a file." in function.__doc__ and "Tool: files__read_file" in function.__doc__
    assert "path: where" in function.__doc__


def test_parameters_python_cannot_spell_go_by_keyword_as_the_schema_names_them() -> None:
    odd = tool("api", "send", {"from": {"type": "string"}, "x-id": {"type": "integer"}}, ["from"])
    calls: list[tuple[str, dict[str, Any]]] = []
    module = load(stub_package([odd])["api"], calls)
    module.send(**{"from": "me", "x-id": 4})
    assert calls == [("api__send", {"from": "me", "x-id": 4})]


def test_names_become_identifiers_and_stay_unique_within_a_module() -> None:
    assert identifier("my-server.v2") == "my_server_v2"
    assert identifier("class") == "class_"
    assert identifier("2fa") == "_2fa"
    assert identifier("call") == "call_"
    twins = [tool("s", "get-item", {}, []), tool("s", "get.item", {}, []), tool("s", "_private", {}, [])]
    module = load(stub_package(twins)["s"], [])
    assert {name for name in vars(module) if not name.startswith("_") and callable(vars(module)[name])} >= {
        "get_item",
        "get_item_",
        "tool_private",
    }


def test_types_come_from_the_schema_and_unions_from_any_of() -> None:
    assert python_type({"type": "string"}) == "str"
    assert python_type({"type": ["integer", "null"]}) == "int | None"
    assert python_type({"anyOf": [{"type": "array"}, {"type": "object"}]}) == "list[Any] | dict[str, Any]"
    assert python_type({"anyOf": [{"type": "string"}, {}]}) == "Any"
    assert python_type({}) == "Any"


def test_a_description_with_triple_quotes_and_backslashes_stays_a_docstring() -> None:
    tricky = tool("t", "x", {}, [], description='Say """hi""" \\ and \\n bye')
    module = load(stub_package([tricky])["t"], [])
    assert module.x.__doc__ is not None and 'Say """hi""" \\ and \\n bye' in module.x.__doc__


def test_the_index_lists_every_module_and_meta_tools_are_left_out() -> None:
    records = [
        tool("calc", "evaluate", {"expression": {"type": "string"}}, ["expression"], description="Evaluate.\nMore."),
        ToolRecord(name="Use_Tool", source=GATEWAY_SOURCE, original_name="Use_Tool"),
    ]
    package = stub_package(records)
    assert set(package) == {"", "calc"}
    assert "tools.calc:\n  evaluate(): Evaluate." in package[""]
