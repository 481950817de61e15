"""JSON Schemas for people (pure): an input schema as parameter-table rows, and as try-it form fields.

Schemas come from third-party servers: nothing here trusts their shape. Unknown or malformed parts
are shown as they are (as JSON text, escaped by the templates); depth and row counts are bounded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 6
MAX_ROWS = 300
_CONSTRAINTS = (
    ("minimum", "≥"),
    ("exclusiveMinimum", ">"),
    ("maximum", "≤"),
    ("exclusiveMaximum", "<"),
    ("minLength", "min length"),
    ("maxLength", "max length"),
    ("minItems", "min items"),
    ("maxItems", "max items"),
    ("pattern", "pattern"),
    ("format", "format"),
)


@dataclass(frozen=True, slots=True)
class Param:
    """One row of a parameter table: a property at `depth` (0 for the top level)."""

    path: str
    depth: int
    type: str
    required: bool
    description: str
    default: str | None
    enum: tuple[str, ...]
    constraints: tuple[str, ...]


def as_json(value: Any) -> str:
    """`value` as compact JSON text, for showing a default or an enum value."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """`schema` with a local `#/$defs/...` (or `#/definitions/...`) reference followed, once."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
        return schema
    if schema["$ref"] == "#":
        return root
    target: Any = root
    for part in schema["$ref"].removeprefix("#/").split("/"):
        target = target.get(part) if isinstance(target, Mapping) else None
    return target if isinstance(target, Mapping) else schema


def type_of(schema: Any, root: Mapping[str, Any] | None = None) -> str:
    """A short type label: `string`, `integer | null`, `array of string`; `root` resolves references."""
    if not isinstance(schema, Mapping):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        label = " | ".join(str(k) for k in kind)
    elif isinstance(kind, str):
        label = kind
    elif any(isinstance(schema.get(key), list) for key in ("anyOf", "oneOf")):
        options = schema.get("anyOf") or schema.get("oneOf") or []
        label = " | ".join(type_of(option) for option in options[:6])
    elif "enum" in schema:
        label = "enum"
    else:
        label = "any"
    items = _resolve(schema.get("items"), root) if root is not None else schema.get("items")
    if label == "array" and isinstance(items, Mapping):
        label = f"array of {type_of(items)}"
    return label


def parameters(schema: Any) -> list[Param]:
    """The rows of `schema`'s parameter table: every property, nested objects and array items below it."""
    rows: list[Param] = []
    if isinstance(schema, Mapping):
        _walk(schema, schema, "", 0, rows)
    return rows


def _walk(schema: Mapping[str, Any], root: Mapping[str, Any], prefix: str, depth: int, rows: list[Param]) -> None:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or depth > MAX_DEPTH:
        return
    required = schema.get("required")
    needed = {name for name in required if isinstance(name, str)} if isinstance(required, list) else set()
    for name, raw in properties.items():
        if len(rows) >= MAX_ROWS:
            return
        prop = _resolve(raw, root)
        path = f"{prefix}{name}"
        rows.append(_row(path, depth, prop, str(name) in needed, root))
        if not isinstance(prop, Mapping):
            continue
        items = _resolve(prop.get("items"), root)
        if isinstance(items, Mapping) and isinstance(items.get("properties"), Mapping):
            _walk(items, root, f"{path}[].", depth + 1, rows)
        _walk(prop, root, f"{path}.", depth + 1, rows)


def _row(path: str, depth: int, prop: Any, required: bool, root: Mapping[str, Any]) -> Param:
    if not isinstance(prop, Mapping):
        return Param(path, depth, "any", required, "", None, (), ())
    description = prop.get("description") or prop.get("title") or ""
    enum = prop.get("enum")
    if enum is None and isinstance(prop.get("items"), Mapping):
        enum = prop["items"].get("enum")
    constraints = tuple(f"{label} {as_json(prop[key])}" for key, label in _CONSTRAINTS if key in prop)
    return Param(
        path=path,
        depth=depth,
        type=type_of(prop, root),
        required=required,
        description=str(description),
        default=as_json(prop["default"]) if "default" in prop else None,
        enum=tuple(as_json(value) for value in enum[:50]) if isinstance(enum, list) else (),
        constraints=constraints,
    )


@dataclass(frozen=True, slots=True)
class Field:
    """One control of a try-it form: a top-level argument and how it is typed in."""

    name: str
    control: str
    """`text`, `number`, `select` (enums and booleans) or `json` (objects, arrays, anything else)."""
    label_type: str
    required: bool
    description: str
    options: tuple[str, ...] = ()
    default: str = ""


def form_fields(schema: Any) -> list[Field]:
    """The controls of the try-it form of a tool with input schema `schema`."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return []
    required = schema.get("required")
    needed = {name for name in required if isinstance(name, str)} if isinstance(required, list) else set()
    fields = []
    for name, raw in list(schema["properties"].items())[:MAX_ROWS]:
        prop = _resolve(raw, schema)
        prop = prop if isinstance(prop, Mapping) else {}
        kind = prop.get("type")
        default = prop.get("default")
        shown_default = "" if default is None else (default if isinstance(default, str) else as_json(default))
        options: tuple[str, ...] = ()
        if isinstance(prop.get("enum"), list) and all(isinstance(v, str) for v in prop["enum"]):
            control, options = "select", tuple(prop["enum"][:200])
        elif kind == "boolean":
            control, options = "select", ("true", "false")
        elif kind in ("integer", "number"):
            control = "number"
        elif kind == "string":
            control = "text"
        else:
            control = "json"
        description = str(prop.get("description") or "")
        kind_label = type_of(prop, schema)
        fields.append(Field(str(name), control, kind_label, str(name) in needed, description, options, shown_default))
    return fields


class FormProblems(Exception):
    """The try-it form's values that cannot be turned into arguments, by field name."""

    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {problem}" for name, problem in problems.items()))
        self.problems = problems


RAW_FIELD = "raw_arguments"


def arguments_from_form(fields: list[Field], values: Mapping[str, str]) -> dict[str, Any]:
    """The call's arguments from the form's `values` (`arg.<name>`, or the raw JSON object in
    `RAW_FIELD` when filled); empty fields are left out. Raises `FormProblems` naming each bad field."""
    raw = values.get(RAW_FIELD, "").strip()
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError as error:
            raise FormProblems({RAW_FIELD: f"not valid JSON: {error}"}) from None
        if not isinstance(parsed, dict):
            raise FormProblems({RAW_FIELD: "the arguments must be a JSON object"})
        return parsed
    arguments: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for field in fields:
        text = values.get(f"arg.{field.name}", "")
        if text.strip() == "" and field.control != "text":
            continue
        if text == "":
            continue
        try:
            arguments[field.name] = _value(field, text)
        except ValueError as error:
            problems[field.name] = str(error)
    if problems:
        raise FormProblems(problems)
    return arguments


def _value(field: Field, text: str) -> Any:
    if field.control == "number":
        try:
            return int(text) if field.label_type.startswith("integer") else float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text[:40]!r}") from None
    if field.control == "select" and field.options == ("true", "false"):
        return text == "true"
    if field.control == "json":
        try:
            return json.loads(text)
        except ValueError:
            # A bare word in a field of no declared type is meant as a string.
            if field.label_type == "any":
                return text
            raise ValueError('expected JSON, e.g. {"key": "value"} or [1, 2]') from None
    return text
