"""Argument validation: a call's arguments are checked against its tool's input schema first."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import mcp_types as types
from jsonschema.exceptions import ValidationError

from gateway.catalog.jsonschemas import Compiled, SchemaCache
from gateway.errors import ToolExecutionError, ToolInputError, clip
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.runtime import tracing

# A violation quoting a huge argument would flood the model's context; the path says where it is.
_MAX_VIOLATION_CHARS = 300
# Enough for every tool of a large catalog; bounded so catalog reloads cannot grow it without end.
_CACHE_SIZE = 4096
_BROKEN_SCHEMA = "The tool's server publishes a broken schema; use another tool."
_EXTRA_HINT = (
    "Leave out the arguments the tool does not take (its input schema refuses any others), "
    "fix the rest to match the schema, and call again."
)


class ValidateArguments:
    """Pipeline step: refuse calls whose arguments do not match the tool's input schema.

    Compiled schemas are cached by identity (`gateway.catalog.jsonschemas`): a `ToolRecord` keeps its
    schema object for its lifetime, so the hot path looks them up instead of rebuilding them.
    """

    def __init__(self) -> None:
        self._schemas = SchemaCache(_CACHE_SIZE)

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Validate `call.arguments`, then pass the call on; raise `ToolInputError` on violations."""
        with tracing.span("validate"):
            errors = self._errors(call.tool.name, call.tool.input_schema, call.arguments)
            if errors:
                listing = "\n".join(f"- {_line(error)}" for error in errors)
                extra = any(error.validator == "additionalProperties" for error in errors)
                raise ToolInputError(
                    f"Invalid arguments for tool '{call.tool.name}':\n{listing}", hint=_EXTRA_HINT if extra else None
                )
        return await call_next(call)

    def violations(self, tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
        """Every violation of `schema` by `arguments`, as `<json path>: <message>`, sorted."""
        return [_line(error) for error in self._errors(tool, schema, arguments)]

    def _errors(self, tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[ValidationError]:
        compiled = self._compiled(tool, schema)
        if compiled.accepts(arguments):
            return []
        try:
            errors = list(compiled.validator.iter_errors(dict(arguments)))
        except Exception as error:
            # A schema can pass the meta-schema and still fail when applied (unresolvable $ref,
            # a regex Python rejects); that is the server's fault, not the caller's.
            raise ToolExecutionError(
                f"Tool '{tool}' has an input schema that cannot be applied: {type(error).__name__}: {_clip(str(error))}"
            ) from None
        return sorted(errors, key=lambda error: (_path_key(error), error.message))

    def _compiled(self, tool: str, schema: Mapping[str, Any]) -> Compiled:
        try:
            return self._schemas.get(schema)
        except jsonschema.SchemaError as error:
            raise ToolExecutionError(
                f"Tool '{tool}' has an invalid input schema at {error.json_path}: {_clip(error.message)}",
                hint=_BROKEN_SCHEMA,
            ) from None
        except Exception as error:
            # Checking can fail before judging the schema: `$schema` not a string, nesting past the recursion limit.
            failure = f"{type(error).__name__}: {_clip(str(error))}"
            raise ToolExecutionError(
                f"Tool '{tool}' has an input schema that cannot be checked: {failure}",
                hint=_BROKEN_SCHEMA,
            ) from None


def _line(error: ValidationError) -> str:
    """`<json path>: <message>`; an argument the schema does not take is named with those it does."""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        patterns = error.schema.get("patternProperties", {}) if isinstance(error.schema, Mapping) else {}
        unexpected = [
            key
            for key in error.instance
            if key not in known and not any(re.search(pattern, str(key)) for pattern in patterns)
        ]
        named = ", ".join(repr(clip(str(key))) for key in unexpected)
        takes = _clip(", ".join(clip(str(key)) for key in known)) if isinstance(known, Mapping) and known else ""
        many = len(unexpected) > 1
        if not error.absolute_path:
            told = f"unexpected argument{'s' if many else ''} {named}"
            return f"{error.json_path}: {told}; the tool takes {takes or 'no arguments'}"
        told = f"unexpected propert{'ies' if many else 'y'} {named}"
        return f"{error.json_path}: {told}; it takes {takes or 'no properties'}"
    return f"{error.json_path}: {_clip(error.message)}"


def _path_key(error: ValidationError) -> tuple[tuple[int, int, str], ...]:
    # Array indexes sort numerically ($.items[2] before $.items[10]), property names by name.
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in error.absolute_path)


def _clip(text: str) -> str:
    if len(text) <= _MAX_VIOLATION_CHARS:
        return text
    return text[: _MAX_VIOLATION_CHARS - 3] + "..."
