"""The pipeline step that keeps sandboxed tools off the host.

A tool marked `sandbox` runs only through a sandbox. When none is available the call is
refused here, before it is queued or executed, with the reason the sandbox is missing.
"""

from __future__ import annotations

from collections.abc import Callable

import mcp_types as types

from gateway.errors import ToolRefusedError
from gateway.pipeline import CallNext, ToolCall


class SandboxUnavailableError(ToolRefusedError):
    """A sandboxed tool was called while no sandbox can run it."""

    # The audit outcome is `refused:sandbox`, telling these apart from other policy refusals.
    reason = "sandbox"
    hint = "This tool cannot run now; use another tool or ask the operator to enable the sandbox."


class SandboxGuard:
    """Refuses calls to sandboxed tools while the sandbox is unavailable."""

    def __init__(self, availability: Callable[[], tuple[bool, str]]) -> None:
        self._availability = availability

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        if call.tool.sandbox is not None:
            ready, reason = self._availability()
            if not ready:
                raise SandboxUnavailableError(
                    f"Tool {call.tool.name} runs only in a Docker sandbox, and the sandbox is unavailable: "
                    f"{reason}. The call was not run."
                )
        return await call_next(call)
