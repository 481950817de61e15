"""Tool results held to their tools' output schemas, as the SDK's client session holds them, with
each schema compiled once (`gateway.catalog.jsonschemas`): compiling costs about 60 times a validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import mcp_types as types
from jsonschema.exceptions import best_match
from referencing.exceptions import Unresolvable

from gateway.catalog.jsonschemas import SchemaCache
from gateway.errors import ToolExecutionError


class OutputValidators:
    """Checks tool results against their output schemas, compiled once per schema (kept by
    identity: a catalog entry keeps its schema object)."""

    _SIZE = 256

    def __init__(self) -> None:
        self._schemas = SchemaCache(self._SIZE)

    def check(self, tool_name: str, schema: Mapping[str, Any], result: types.CallToolResult) -> None:
        """Raise `ToolExecutionError` when `result` lacks the structured content `schema` asks for, or breaks it."""
        content = result.structured_content
        if content is None:
            raise ToolExecutionError(f"Tool {tool_name} has an output schema but did not return structured content")
        try:
            compiled = self._schemas.get(schema)
            if compiled.accepts(content):
                return
            error = best_match(compiled.validator.iter_errors(content))
        except (jsonschema.SchemaError, Unresolvable) as broken:
            raise ToolExecutionError(f"Invalid schema for tool {tool_name}: {broken}") from None
        if error is not None:
            raise ToolExecutionError(f"Invalid structured content returned by tool {tool_name}: {error.message}")
