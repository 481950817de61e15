"""Problems in what an operator wrote (a config file, a section, an API body): where each is, and how it is told.

A leaf: every part that reads a section of the configuration reports through it, and the configuration
itself (`gateway.config`) stands above those parts.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from gateway.errors import ConfigError

if TYPE_CHECKING:
    import jsonschema

JsonPath = tuple[str | int, ...]
Problem = tuple[JsonPath, str]

# Far deeper than any real configuration, and shallow enough for every recursive step that reads one.
MAX_DEPTH = 64

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,32}")
NAME_RULE = "names and namespaces are 1-32 letters, digits, '_' or '-', because they prefix tool names"


class ConfigProblems(ConfigError):
    """Every violation found in one file; `file`, `path` and `problem` describe the first."""

    def __init__(self, file: str, problems: list[tuple[str, str]]) -> None:
        super().__init__(file, *problems[0])
        self.problems = tuple(problems)
        self.message = "\n".join(f"{file}: {path}: {text}" if path else f"{file}: {text}" for path, text in problems)
        self.args = (self.message,)


_CLIENT_TOP_LEVEL = ("mcpServers",)
"""Top-level keys that make a file a client's (clientfiles.detect_format), so a near miss is worth a hint."""

_TYPE_NAMES = {
    "object": "a map",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "null": "null",
}


def explain_error(error: jsonschema.ValidationError) -> list[Problem]:
    """One readable problem per thing wrong, with the path inside the file."""
    path: JsonPath = tuple(error.absolute_path)
    kind, schema = error.validator, cast(dict[str, Any], error.schema)
    expected: Any = error.validator_value
    value: Any = error.instance
    if kind == "additionalProperties" and expected is False:
        allowed = sorted(schema.get("properties", {}))
        # At the top, a key of a client's file may be what was meant (`mcpServer` for `mcpServers`).
        hinted = allowed if path else [*allowed, *_CLIENT_TOP_LEVEL]
        return [((*path, key), _unknown_key(key, allowed, hinted)) for key in value if key not in allowed]
    if kind == "type":
        names = [expected] if isinstance(expected, str) else expected
        return [(path, f"expected {' or '.join(_TYPE_NAMES[n] for n in names)}, got {describe_value(value)}")]
    if kind == "required":
        return [(path, f"missing required key '{key}'") for key in expected if key not in value]
    if kind == "enum":
        return [(path, f"must be one of {', '.join(map(repr, expected))}; got {value!r}")]
    if kind == "minimum":
        return [(path, f"must be at least {expected}; got {value!r}")]
    if kind == "exclusiveMinimum":
        return [(path, f"must be greater than {expected}; got {value!r}")]
    if kind == "minLength":
        return [(path, "must not be empty")]
    if kind == "minItems":
        return [(path, f"must list at least {expected} {'item' if expected == 1 else 'items'}")]
    if kind == "pattern":
        return [(path, f"must be {schema.get('description', expected)}; got {value!r}")]
    if kind in ("anyOf", "oneOf"):
        branches: dict[int, list[jsonschema.ValidationError]] = {}
        for sub in error.context or []:
            branches.setdefault(cast(int, sub.relative_schema_path[0]), []).append(sub)
        for subs in branches.values():
            # The branch whose kind of value matches (a map for a map) explains the real mistake.
            if not any(sub.validator in ("type", "const") and not sub.relative_path for sub in subs):
                return [problem for sub in subs for problem in explain_error(sub)]
        described = schema.get("description", "a valid value")
        return [(path, f"expected {described}, got {describe_value(value)}")]
    return [(path, error.message)]


def _unknown_key(key: str, allowed: list[str], hinted: list[str]) -> str:
    """The message for a key the schema does not know, suggesting the nearest of `hinted`."""
    close = difflib.get_close_matches(key, hinted, n=1, cutoff=0.75)
    return f"unknown key (did you mean '{close[0]}'?)" if close else f"unknown key; allowed: {', '.join(allowed)}"


def describe_value(value: Any) -> str:
    """A short description of a value's kind, without echoing strings that may hold secrets."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"the number {value}"
    names = {dict: "a map", list: "a list", str: "a string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def render_path(path: JsonPath) -> str:
    """A path inside the file, written like `servers.files.args[2]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    return text


def nesting_problem(data: Any) -> list[Problem]:
    """The problem of lists and maps nested more than MAX_DEPTH deep, found without recursing."""
    pending: list[tuple[Any, JsonPath]] = [(data, ())]
    while pending:
        value, path = pending.pop()
        if len(path) > MAX_DEPTH:
            return [(path[:MAX_DEPTH], f"lists and maps are nested more than {MAX_DEPTH} levels deep here")]
        if isinstance(value, dict):
            pending.extend((item, (*path, str(key))) for key, item in value.items())
        elif isinstance(value, list):
            pending.extend((item, (*path, index)) for index, item in enumerate(value))
    return []


def raise_if_any(source: str, problems: list[Problem]) -> None:
    """Raise one ConfigError listing every problem (each once, in order), if there are any."""
    unique = list(dict.fromkeys((render_path(path), text) for path, text in problems))
    if unique:
        raise ConfigProblems(source, unique)


def validate_section(
    data: Any, schema: Mapping[str, Any], *, section: str, source_file: str, hide_values: bool = False
) -> None:
    """Raise `ConfigProblems` listing every place where the section `data` breaks `schema`.

    `hide_values` keeps the section's values out of the messages, for sections that hold secrets.
    """
    import jsonschema  # 40 ms: loaded when a file is validated, not by commands that read none

    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(
        (render_path((section, *path)), text.split("; got ", 1)[0] if hide_values else text)
        for error in validator.iter_errors(data)
        for path, text in explain_error(error)
    )
    if problems:
        raise ConfigProblems(source_file, problems)
