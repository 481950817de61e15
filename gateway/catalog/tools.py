"""The unified tool record: every tool, whatever its source, becomes one `ToolRecord`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

import mcp_types as types

Layer = Literal["core", "extended"]
# The source of the gateway's own tools, the meta-tools: every role may see them.
GATEWAY_SOURCE = "gateway"
RUN_CODE = "Run_Code"
"""The meta-tool of code mode; a role with `code_mode: false` does not see it."""


class Risk(StrEnum):
    """How much harm a call can do; decides whether a person must confirm it."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """One tool as the gateway knows it, independent of where it comes from.

    `name` is the exposed, namespaced name clients see; `source` names the tool source
    (an upstream server, the local Python tools, ...) and `original_name` the name that
    source knows it by.
    """

    name: str
    source: str
    original_name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: Mapping[str, Any] | None = None
    title: str | None = None
    annotations: types.ToolAnnotations | None = None
    risk: Risk | None = None
    """The risk the operator configured, which wins over everything else."""
    risk_floor: Risk | None = None
    """The highest risk any tool under this exposed name had (`gateway.catalog.ownership`):
    annotations cannot go below it."""
    layer: Layer = "core"
    tags: frozenset[str] = frozenset()
    skills: tuple[str, ...] = ()
    sandbox: str | None = None
    timeout: float | None = None
    execution: types.ToolExecution | None = None
    """How the server runs the tool (`taskSupport`: whether calls may be task-augmented), passed on as listed."""
    icons: tuple[types.Icon, ...] | None = None
    """The icons a client may show for the tool, passed on as listed."""
    meta: Mapping[str, Any] | None = None
    """The tool's `_meta` as listed, every key kept; in the catalog, the view an MCP Apps tool names
    (`gateway.catalog.apps`) is under its exposed URI."""

    @property
    def read_only(self) -> bool:
        """True when the source declares the tool free of side effects."""
        return bool(self.annotations and self.annotations.read_only_hint)

    @property
    def idempotent(self) -> bool:
        """True when repeating the call has no further effect (read-only tools are)."""
        return self.read_only or bool(self.annotations and self.annotations.idempotent_hint)

    def renamed(self, name: str) -> ToolRecord:
        """The same tool under another exposed name."""
        return replace(self, name=name)

    def to_mcp(self) -> types.Tool:
        """The tool as listed to MCP clients, under its exposed name."""
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=dict(self.input_schema),
            output_schema=dict(self.output_schema) if self.output_schema is not None else None,
            annotations=self.annotations,
            execution=self.execution,
            icons=list(self.icons) if self.icons is not None else None,
            _meta=dict(self.meta) if self.meta is not None else None,
        )
