"""Tool results held to their tools' output schemas, as the SDK's client session holds them, with
one compiled validator per schema: compiling costs about 60 times a validation."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import jsonschema
import mcp_types as types
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from gateway.errors import ToolExecutionError


class OutputValidators:
    """Checks tool results against their output schemas, with one compiled validator per schema (kept
    by identity: a catalog entry keeps its schema object)."""

    _SIZE = 256

    def __init__(self) -> None:
        self._cache: OrderedDict[int, tuple[Mapping[str, Any], Validator]] = OrderedDict()

    def check(self, tool_name: str, schema: Mapping[str, Any], result: types.CallToolResult) -> None:
        """Raise `ToolExecutionError` when `result` lacks the structured content `schema` asks for, or breaks it."""
        if result.structured_content is None:
            raise ToolExecutionError(f"Tool {tool_name} has an output schema but did not return structured content")
        try:
            error = best_match(self._validator(schema).iter_errors(result.structured_content))
        except (jsonschema.SchemaError, Unresolvable) as broken:
            raise ToolExecutionError(f"Invalid schema for tool {tool_name}: {broken}") from None
        if error is not None:
            raise ToolExecutionError(f"Invalid structured content returned by tool {tool_name}: {error.message}")

    def _validator(self, schema: Mapping[str, Any]) -> Validator:
        cached = self._cache.get(id(schema))
        if cached is not None and cached[0] is schema:
            self._cache.move_to_end(id(schema))
            return cached[1]
        kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        kind.check_schema(dict(schema))
        validator: Validator = kind(schema)
        self._cache[id(schema)] = (schema, validator)
        if len(self._cache) > self._SIZE:
            self._cache.popitem(last=False)
        return validator
