"""The call pipeline: a list of small steps around every tool call, like middleware.

Each step is `async (call, call_next) -> CallToolResult`; the last link runs the tool on
its source. Steps raise `ToolError` subclasses to refuse or fail a call; `Pipeline.run`
turns every failure into an `is_error` result, so no traceback reaches a client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, runtime_checkable

import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT

from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.errors import ToolError, ToolRefusedError

ProgressFn = ProgressFnT
"""Receives progress of a running call: `(progress, total, message)`."""


@dataclass(slots=True)
class ToolCall:
    """One call travelling through the pipeline."""

    session: SessionContext
    tool: ToolRecord
    arguments: dict[str, Any]
    progress: ProgressFn | None = None
    notes: dict[str, Any] = field(default_factory=dict)


OUTCOME_NOTE = "outcome"
"""A note a step sets when its result, an error for the model, is not a failure of the tool: the audit
outcome to record instead of `error` (e.g. `refused:awaiting_approval`)."""
OUTCOMES_NOTE = "gateway.outcomes"
"""A list a caller may put in a call's notes to learn how the call ended (`ok`, `error` or
`refused`: not run), which the `is_error` result alone does not tell (code mode's scripts)."""
DETAIL_NOTE = "detail"
"""A note a step sets when an ok result is worth a word in its audit row (Find_Tools finding nothing:
`NO_MATCH`); an error's row holds its text instead."""
NO_MATCH = "no match"
CHAINS_KEPT = 10_000
"""Tools whose composed chains are kept; past it they are all composed again (a few microseconds
each), so that an upstream renaming its tools over and over cannot grow the gateway's memory."""


CallNext = Callable[[ToolCall], Awaitable[types.CallToolResult]]


class Step(Protocol):
    """One stage of the pipeline."""

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult: ...


@runtime_checkable
class ToolSpecific(Protocol):
    """A step with work for the calls of some tools only, as the tool's record alone tells."""

    def applies_to(self, tool: ToolRecord) -> bool: ...


class ToolSource(Protocol):
    """Where tools run: an upstream MCP server, the local Python tools, a sandbox."""

    async def call_tool(
        self, tool: ToolRecord, arguments: Mapping[str, Any], progress: ProgressFn | None
    ) -> types.CallToolResult: ...


def error_result(error: ToolError) -> types.CallToolResult:
    """The `is_error` result a client sees for a failed or refused call."""
    return types.CallToolResult(content=[types.TextContent(text=error.client_text())], is_error=True)


class Pipeline:
    """Runs calls through the steps, then through `terminal`, which executes them.

    Each tool's chain is composed once per record of it (a new catalog version brings a new
    record): the steps that have nothing to do for that tool (`ToolSpecific`) are left out, and
    each link is the next step itself, with nothing between them.
    """

    def __init__(self, steps: Sequence[Step], terminal: CallNext) -> None:
        self._steps = tuple(reversed(steps))
        self._terminal = terminal
        self._chains: dict[str, tuple[ToolRecord, CallNext]] = {}

    def _chain(self, tool: ToolRecord) -> CallNext:
        composed = self._chains.get(tool.name)
        if composed is not None and composed[0] is tool:
            return composed[1]
        chain = self._terminal
        for step in self._steps:
            if not isinstance(step, ToolSpecific) or step.applies_to(tool):
                chain = partial(step, call_next=chain)
        if len(self._chains) >= CHAINS_KEPT:
            self._chains.clear()
        self._chains[tool.name] = (tool, chain)
        return chain

    async def run(self, call: ToolCall) -> types.CallToolResult:
        """Run one call; failures come back as `is_error` results, never as exceptions."""
        try:
            result = await self._chain(call.tool)(call)
        except ToolError as error:
            _tell(call, "refused" if isinstance(error, ToolRefusedError) else "error")
            return error_result(error)
        outcome = call.notes.get(OUTCOME_NOTE)
        if isinstance(outcome, str) and outcome.startswith("refused"):
            _tell(call, "refused")
        else:
            _tell(call, "error" if result.is_error else "ok")
        return result


def _tell(call: ToolCall, outcome: str) -> None:
    outcomes = call.notes.get(OUTCOMES_NOTE)
    if isinstance(outcomes, list):
        outcomes.append(outcome)
