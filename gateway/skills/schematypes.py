"""JSON Schema as Python annotations for code mode's stubs (pure): a parameter's type, and a tool's
return type as `TypedDict` classes made from its output schema.

An object with properties becomes a `TypedDict` (keys the schema does not require are
`NotRequired`), an array `list[...]` of its items' type, `anyOf` / `oneOf` a union, a local `$ref`
what it points to; what has no `type` (an `enum` alone, `not`, `if`...) is `Any`. Schemas are the
upstream server's to write, so every walk is bounded: past a depth, a count of keys, of classes or
of schema nodes visited, an object is `dict[str, Any]` and anything else `Any`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list[Any]",
    "object": "dict[str, Any]",
    "null": "None",
}
# How far a schema is followed: nesting below the return type, keys of one TypedDict, TypedDicts
# of one tool, schema nodes visited for one tool. Enough for any schema a person writes.
_MAX_DEPTH = 6
_MAX_KEYS = 64
_MAX_CLASSES = 16
_MAX_NODES = 1000
# Names a stub module holds besides its functions and return types.
MODULE_NAMES = frozenset({"Any", "NotRequired", "TypedDict", "_call"})


def python_type(schema: Mapping[str, Any], depth: int = 0) -> str:
    """The annotation for a JSON Schema: its `type` (or list of types, or the types of its `anyOf` or
    `oneOf` members), `Any` when it has none or nests past the depth followed."""
    members = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(members, list) and members:
        if depth >= _MAX_DEPTH or len(members) > _MAX_KEYS:
            return "Any"
        kinds = [python_type(member, depth + 1) if isinstance(member, Mapping) else "Any" for member in members]
        return _union(kinds)
    kind = schema.get("type")
    if isinstance(kind, str):
        return _JSON_TYPES.get(kind, "Any")
    if isinstance(kind, list) and kind:
        return _union([_JSON_TYPES.get(str(one), "Any") for one in kind])
    return "Any"


def class_name(function: str) -> str:
    """The name of a function's return type: `read_file` gives `ReadFileResult`."""
    return _camel(function) + "Result"


@dataclass(frozen=True, slots=True)
class ReturnType:
    """A tool's return annotation, the sources of the classes it names (each after those it uses),
    and those classes' keys as lines for the function's docstring (the outermost class first)."""

    annotation: str
    sources: list[str]
    keys: list[str]


def return_type(schema: Mapping[str, Any], function: str, taken: set[str]) -> ReturnType:
    """A tool's return type from its output schema (`dict[str, Any]` when no class can be made); a
    class name is never one of `taken` (which gets the new names) nor of `MODULE_NAMES`."""
    walk = _Walk(schema, taken, function)
    made = walk.annotation(schema, class_name(function), 0)
    keys = [line for lines in reversed(walk.keys) for line in lines]
    return ReturnType("dict[str, Any]" if made == "Any" else made, walk.sources, keys)


class _Walk:
    """One output schema's walk, bounded by the limits above."""

    def __init__(self, root: Mapping[str, Any], taken: set[str], function: str) -> None:
        self.sources: list[str] = []
        self.keys: list[list[str]] = []
        self._root = root
        self._taken = taken
        self._function = function
        self._nodes = 0
        self._classes = 0

    def annotation(self, schema: object, name: str, depth: int) -> str:
        self._nodes += 1
        if not isinstance(schema, Mapping):
            return "Any"
        if depth > _MAX_DEPTH or self._nodes > _MAX_NODES:
            return python_type(schema, _MAX_DEPTH)
        schema = self._resolved(schema)
        members = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(members, list) and members:
            if len(members) > _MAX_KEYS:
                return "Any"
            return _union([self.annotation(member, name, depth + 1) for member in members])
        kind = schema.get("type")
        if kind == "object" or (kind is None and isinstance(schema.get("properties"), Mapping)):
            return self._typed_dict(schema, name, depth)
        if kind == "array":
            items = schema.get("items")
            return (
                f"list[{self.annotation(items, name + 'Item', depth + 1)}]"
                if isinstance(items, Mapping)
                else "list[Any]"
            )
        return python_type(schema, depth)

    def _resolved(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """What a local `$ref` (`#/$defs/X`, `#/definitions/X`) points to; the schema itself otherwise."""
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        for prefix in ("#/$defs/", "#/definitions/"):
            defined = self._root.get(prefix[2:-1])
            if ref.startswith(prefix) and isinstance(defined, Mapping):
                target = defined.get(ref[len(prefix) :])
                if isinstance(target, Mapping):
                    return target
        return {}

    def _typed_dict(self, schema: Mapping[str, Any], name: str, depth: int) -> str:
        properties = schema.get("properties")
        if (
            not isinstance(properties, Mapping)
            or not properties
            or len(properties) > _MAX_KEYS
            or not all(isinstance(key, str) for key in properties)
            or self._classes >= _MAX_CLASSES
        ):
            return "dict[str, Any]"
        self._classes += 1
        unique = name
        while unique in self._taken or unique in MODULE_NAMES:
            unique += "_"
        self._taken.add(unique)
        listed = schema.get("required")
        required = {key for key in listed if isinstance(key, str)} if isinstance(listed, list) else set()
        fields, lines = [], [f"{unique}:"]
        for key, value in properties.items():
            kind = self.annotation(value, name + _camel(key), depth + 1)
            fields.append((key, kind if key in required else f"NotRequired[{kind}]"))
            lines.append(f"    {_shown(key)}: {kind}{'' if key in required else ' (not required)'}")
        about = f"{'What' if depth == 0 else 'Part of what'} {self._function}() returns."
        self.sources.append(_class_source(unique, fields, about))
        self.keys.append(lines)
        return unique


def _shown(key: str) -> str:
    """A key as the docstring shows it: plain when it is an identifier, else quoted."""
    return key if key.isidentifier() else repr(key)


def _class_source(name: str, fields: list[tuple[str, str]], about: str) -> str:
    """A TypedDict in class syntax, or in call syntax when a key is no plain identifier (`from`,
    `x-id`, `__dunder`: the class body would reject or rename it)."""
    if all(key.isidentifier() and not keyword.iskeyword(key) and not key.startswith("__") for key, _ in fields):
        lines = [f"class {name}(TypedDict):", f'    """{about}"""', ""]
        lines += [f"    {key}: {kind}" for key, kind in fields]
        return "\n".join(lines)
    keys = "".join(f"        {key!r}: {kind},\n" for key, kind in fields)
    return f"{name} = TypedDict(\n    {name!r},\n    {{\n{keys}    }},\n)\n{name}.__doc__ = {about!r}"


def _camel(text: str) -> str:
    """`text` as a CamelCase identifier part: `read_file` and `read-file` give `ReadFile`."""
    parts = re.sub(r"\W", "_", text, flags=re.ASCII).split("_")
    camel = "".join(part[:1].upper() + part[1:] for part in parts)
    return camel if not camel[:1].isdigit() else f"T{camel}"


def _union(kinds: list[str]) -> str:
    return "Any" if "Any" in kinds else " | ".join(dict.fromkeys(kinds))
