"""A span for each client request, on both ways a request takes (the SDK's dispatcher and the hot
path), installed as the outermost server middleware only when the gateway exports traces.

The span is named and described as OpenTelemetry's conventions for MCP name a server span
(`tools/call calc__evaluate`, `mcp.method.name`, `gen_ai.tool.name`, `jsonrpc.request.id`) and
continues the client's trace: the `traceparent` of the request's `params._meta` (SEP-414), else
of its HTTP headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from gateway.runtime import tracing

# The attribute naming what a method acts on, from its `name` parameter. A resource's URI is left
# out: one may carry a query or user-info the redactor keeps out of logs.
_TARGETS = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}


class RequestSpans:
    """Server middleware: each request handled inside a span of `tracing`; notifications pass as they are."""

    def __init__(self, spans: tracing.Tracing) -> None:
        self._tracing = spans

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Handle `ctx` inside its span; a protocol error or a tool's error result marks it failed."""
        if ctx.request_id is None:
            return await call_next(ctx)
        method = ctx.method
        attributes: dict[str, str] = {
            "mcp.method.name": method,
            "mcp.protocol.version": ctx.protocol_version,
            "jsonrpc.request.id": str(ctx.request_id),
        }
        target = _target(method, ctx.params)
        if target is not None:
            attributes[_TARGETS[method]] = target
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
        name = f"{method} {target}" if target is not None else method
        headers = getattr(ctx.request, "headers", None)
        with self._tracing.request(name, attributes, (ctx.meta, headers)):
            try:
                result = await call_next(ctx)
            except MCPError as error:
                tracing.failed(str(error.error.code))
                raise
            if _is_tool_error(result):
                tracing.failed("tool_error")
            return result


def _target(method: str, params: Mapping[str, Any] | None) -> str | None:
    value = params.get("name") if method in _TARGETS and params is not None else None
    return value if isinstance(value, str) else None


def _is_tool_error(result: HandlerResult) -> bool:
    if isinstance(result, types.CallToolResult):
        return result.is_error is True
    return isinstance(result, dict) and result.get("isError") is True
