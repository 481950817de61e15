"""Code mode's stub package: tools become typed Python functions whose body only hands their arguments on."""

from __future__ import annotations

import inspect
import pydoc
import types
import typing
from typing import Any

from gateway.catalog.tools import GATEWAY_SOURCE, ToolRecord
from gateway.skills.codestubs import identifier, stub_package
from gateway.skills.schematypes import python_type


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


ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "note": {"type": ["string", "null"]},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku"],
            },
        },
        "customer": {"$ref": "#/$defs/Customer"},
        "status": {"enum": ["open", "shipped"]},
        "extra": {"type": "object"},
    },
    "required": ["id", "lines"],
    "$defs": {"Customer": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
}


def test_the_return_type_is_a_typed_dict_of_the_output_schema_its_optional_keys_not_required() -> None:
    order = tool("shop", "get_order", {"id": {"type": "integer"}}, ["id"], output_schema=ORDER)
    source = stub_package([order])["shop"]
    module = load(source, [])
    assert str(inspect.signature(module.get_order)) == "(id: int) -> stub.GetOrderResult"
    returned = module.get_order.__annotations__["return"]
    assert returned is module.GetOrderResult and typing.is_typeddict(returned)
    assert "class GetOrderResult(TypedDict):" in source and "    note: NotRequired[str | None]" in source
    assert returned.__required_keys__ == {"id", "lines"}
    assert returned.__optional_keys__ == {"note", "customer", "status", "extra"}
    hints = typing.get_type_hints(returned)
    assert hints["id"] is int and hints["status"] is Any and hints["extra"] == dict[str, Any]
    line = typing.get_args(hints["lines"])[0]
    assert typing.is_typeddict(line) and line.__required_keys__ == {"sku"} and line.__optional_keys__ == {"qty"}
    assert typing.get_type_hints(hints["customer"]) == {"name": str}
    assert module.get_order.__doc__ is not None
    assert "Returns:\n        GetOrderResult:\n            id: int\n            note: str | None (not required)\n" in (
        module.get_order.__doc__
    )
    assert (
        "GetOrderResultLinesItem:\n            sku: str\n            qty: int (not required)"
        in module.get_order.__doc__
    )


def test_help_of_a_module_shows_its_functions_and_not_the_dict_methods_of_their_return_types() -> None:
    order = tool("shop", "get_order", {}, [], output_schema=ORDER)
    module = load(stub_package([order])["shop"], [])
    shown = pydoc.plain(pydoc.render_doc(module))
    assert "get_order() -> stub.GetOrderResult" in shown and "lines: list[GetOrderResultLinesItem]" in shown
    assert "CLASSES" not in shown and "fromkeys" not in shown


def test_a_tool_without_an_output_schema_returns_any_and_one_without_properties_a_dict() -> None:
    plain = tool("t", "plain", {}, [])
    loose = tool("t", "loose", {}, [], output_schema={"type": "object"})
    module = load(stub_package([plain, loose])["t"], [])
    assert module.plain.__annotations__["return"] is Any
    assert module.loose.__annotations__["return"] == dict[str, Any]


def test_keys_python_cannot_spell_keep_their_names_in_the_typed_dict() -> None:
    schema = {"type": "object", "properties": {"from": {"type": "string"}, "x-id": {"type": "integer"}, "__init__": {}}}
    module = load(stub_package([tool("api", "send", {}, [], output_schema=schema)])["api"], [])
    returned = module.send.__annotations__["return"]
    assert typing.get_type_hints(returned) == {"from": str, "x-id": int, "__init__": Any}
    assert returned.__doc__ == "What send() returns."


def test_return_type_names_stay_unique_and_clear_of_functions_and_the_modules_own_names() -> None:
    nested = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    records = [
        tool("s", "GetResult", {}, [], output_schema=nested),
        tool("s", "get", {}, [], output_schema=nested),
        tool("s", "Any", {}, [], output_schema=nested),
        tool("s", "Get", {}, [], output_schema=nested),
    ]
    module = load(stub_package(records)["s"], [])
    returns = [module.GetResult, module.get, module.Any_, module.Get]
    assert module.Any is Any and module.TypedDict is typing.TypedDict
    classes = [function.__annotations__["return"] for function in returns]
    assert len({id(kind) for kind in classes}) == 4 and all(typing.is_typeddict(kind) for kind in classes)
    assert all(typing.is_typeddict(typing.get_type_hints(kind)["a"]) for kind in classes)
    assert not any(callable(kind) and kind in returns for kind in classes)


def hostile_schemas() -> dict[str, Any]:
    """Output schemas no stub may break on: deep, huge, self-referring or malformed."""
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(2000):
        deep = {"type": "object", "properties": {"x": deep}}
    unions: dict[str, Any] = {"type": "string"}
    for _ in range(2000):
        unions = {"anyOf": [unions, {"type": "null"}]}
    wide = {"type": "object", "properties": {f"k{n}": {"type": "integer"} for n in range(10_000)}}
    bushy: dict[str, Any] = {"type": "integer"}
    for _ in range(8):
        bushy = {"type": "object", "properties": {f"p{n}": bushy for n in range(60)}}
    return {
        "deep": deep,
        "unions": {"type": "object", "properties": {"u": unions}},
        "wide": wide,
        "bushy": bushy,
        "cycle": {
            "$ref": "#/$defs/Node",
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        },
        "dangling": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}, "b": {"$ref": 5}}},
        "malformed": {
            "type": "object",
            "properties": {"a": "string", "b": [1], 'c"""\\': {"type": 7}},
            "required": "a",
        },
        "items": {"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}},
        "not_a_schema": {"type": "object", "properties": []},
    }


def test_hostile_output_schemas_give_a_dict_or_any_where_they_go_too_far_and_never_break_the_module() -> None:
    records = [tool("h", name, {}, [], output_schema=schema) for name, schema in hostile_schemas().items()]
    module = load(stub_package(records)["h"], [])
    returned = {name: getattr(module, name).__annotations__["return"] for name in hostile_schemas()}
    assert returned["wide"] == dict[str, Any] and returned["not_a_schema"] == dict[str, Any]
    depth, kind = 0, returned["deep"]
    while typing.is_typeddict(kind):
        depth, kind = depth + 1, typing.get_type_hints(kind)["x"]
    assert 1 < depth < 10 and kind == dict[str, Any]
    assert typing.get_type_hints(returned["unions"])["u"] is Any
    assert typing.get_type_hints(returned["dangling"]) == {"a": Any, "b": Any}
    assert typing.get_type_hints(returned["malformed"]) == {"a": Any, "b": Any, 'c"""\\': Any}
    assert typing.get_type_hints(returned["items"]) == {"a": list[Any]}
    assert typing.is_typeddict(returned["cycle"]) and typing.is_typeddict(returned["bushy"])


def test_deeply_nested_unions_stop_at_any() -> None:
    unions: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        unions = {"anyOf": [unions, {"type": "null"}]}
    assert python_type(unions) == "Any"
