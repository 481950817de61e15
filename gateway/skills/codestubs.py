"""Code mode's `tools` package: one Python module per server, one typed function per tool a caller
may see, generated from the catalog (pure: records in, module sources out).

A function's parameters come from the tool's input schema (required ones first, the others
keyword-only with `None` meaning "not given"), its docstring is the tool's description and its
parameters', its return type a `TypedDict` made from the tool's output schema (`Any` when it has
none), defined in the module just before it. Its body hands the exposed name and the given arguments
to `_call`, which the script runner provides.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateway.catalog.tools import GATEWAY_SOURCE, ToolRecord
from gateway.skills.schematypes import MODULE_NAMES, ReturnType, python_type, return_type

# The return type of a tool without an output schema.
_UNTYPED = ReturnType("Any", [], [])
# Names the package itself holds: a server of that name gets a trailing underscore.
_TAKEN = frozenset({"call", "ToolError", "ToolRefused"})


def identifier(name: str) -> str:
    """`name` as a Python identifier: other characters become `_`, a keyword or leading digit gets one more."""
    text = re.sub(r"\W", "_", name, flags=re.ASCII) or "_"
    if text[0].isdigit():
        text = "_" + text
    if keyword.iskeyword(text) or text in _TAKEN:
        text += "_"
    return text


def modules(tools: Iterable[ToolRecord]) -> dict[str, list[ToolRecord]]:
    """The tools grouped by module name (their server's, as an identifier), meta-tools left out."""
    grouped: dict[str, list[ToolRecord]] = {}
    for tool in tools:
        if tool.source != GATEWAY_SOURCE:
            grouped.setdefault(identifier(tool.source), []).append(tool)
    return grouped


def stub_package(tools: Iterable[ToolRecord]) -> dict[str, str]:
    """The package's sources: `""` its index docstring, every other key a module of it."""
    grouped = modules(tools)
    package = {name: module_source(name, records) for name, records in sorted(grouped.items())}
    package[""] = index(grouped)
    return package


def index(grouped: Mapping[str, Sequence[ToolRecord]]) -> str:
    """The package docstring: how to browse, then each module with its functions' first lines."""
    lines = [
        "Tools as functions. help(tools.<module>) shows a module's functions, help(<function>) one's docstring.",
        "A failed call raises tools.ToolError; one the gateway refused, tools.ToolRefused.",
        "",
    ]
    for name, records in sorted(grouped.items()):
        lines.append(f"tools.{name}:")
        for tool, function in _named(records):
            lines.append(f"  {function}(): {_first_line(tool.description)}")
    return "\n".join(lines)


def module_source(name: str, tools: Sequence[ToolRecord]) -> str:
    """One module's source: a function per tool, each after the return types it names. `__all__`
    names the functions alone, so that help() of the module does not spell out every return type's
    dict methods; a function's docstring lists its return type's keys instead."""
    named = _named(tools)
    functions = [function for _, function in named]
    parts = [
        f'"""The tools of server {name}."""',
        f"from typing import Any, NotRequired, TypedDict\n\n__all__ = {functions!r}",
    ]
    taken = set(functions)
    for tool, function in named:
        returns = _UNTYPED if tool.output_schema is None else return_type(tool.output_schema, function, taken)
        parts += [*returns.sources, function_source(function, tool, returns)]
    return "\n\n\n".join(parts) + "\n"


def function_source(function: str, tool: ToolRecord, returns: ReturnType) -> str:
    """One tool as a function returning `returns`, whose body passes its given arguments to `_call`."""
    properties: Mapping[str, Any] = tool.input_schema.get("properties") or {}
    required = [name for name in tool.input_schema.get("required") or () if name in properties]
    names = [*required, *(name for name in properties if name not in required)]
    docstring = _docstring(tool, properties, returns.keys)
    if not all(name.isidentifier() and not keyword.iskeyword(name) and name != "_given" for name in names):
        # A parameter name Python cannot spell: the arguments go by keyword, as the schema names them.
        header = f"def {function}(**arguments: Any) -> {returns.annotation}:"
        body = f"    return _call({tool.name!r}, arguments)"
        return f"{header}\n{docstring}\n{body}"
    params = [f"{name}: {python_type(properties[name])}" for name in required]
    optional = [f"{name}: {python_type(properties[name])} | None = None" for name in names[len(required) :]]
    if optional:
        params += ["*", *optional]
    header = f"def {function}({', '.join(params)}) -> {returns.annotation}:"
    given = ", ".join(f"{name!r}: {name}" for name in names)
    body = (
        f"    _given = {{{given}}}\n"
        f"    return _call({tool.name!r}, {{key: value for key, value in _given.items() if value is not None}})"
    )
    return f"{header}\n{docstring}\n{body}"


def _docstring(tool: ToolRecord, properties: Mapping[str, Any], returns: Sequence[str]) -> str:
    lines = [tool.description.strip() or tool.name, "", f"Tool: {tool.name}"]
    if properties:
        lines.append("Args:")
        for name, schema in properties.items():
            about = schema.get("description", "") if isinstance(schema, Mapping) else ""
            lines.append(f"    {name}: {_first_line(str(about))}".rstrip(": "))
    if returns:
        lines += ["Returns:", *(f"    {line}" for line in returns)]
    text = "\n".join(f"    {line}" if line else "" for line in lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'    """\n{text}\n    """'


def _named(tools: Sequence[ToolRecord]) -> list[tuple[ToolRecord, str]]:
    """Each tool with its function name, unique within its module."""
    seen: set[str] = set(MODULE_NAMES)
    named = []
    for tool in tools:
        function = identifier(tool.original_name)
        while function in seen or function.startswith("_"):
            function = f"{function}_" if function in seen else f"tool{function}"
        seen.add(function)
        named.append((tool, function))
    return named


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0][:120]
