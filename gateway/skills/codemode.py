"""Code mode: Run_Code runs a script in a sandbox container, the caller's tools importable there as
the `tools` package, and every call the script makes comes back through the gateway's pipeline.

A script's tool call is run by the same call-back as Use_Tool (`Calls.call_tool`): same session,
caller and role, so the same visibility, budgets, loop detection, confirmation and audit; its audit
row names the Run_Code request as its parent. What the script sees of a call is its value (the
structured result, else the text) or a `tools.ToolError` / `tools.ToolRefused` with the gateway's
message. What the model sees of the script is what it printed and its last expression's value,
or one short error naming the script's line; never a traceback of the gateway's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types

from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.errors import (
    GatewayError,
    ToolExecutionError,
    ToolInputError,
    UnknownToolError,
    clip,
)
from gateway.pipeline.chain import OUTCOMES_NOTE, ToolCall
from gateway.pipeline.confirmation import ELICIT_NOTE
from gateway.runtime import requestid
from gateway.skills.codestubs import stub_package
from gateway.skills.metatools import CallBack

# What the model is shown of a script's output when the script failed, at most.
_FAILED_OUTPUT_CHARS = 2000


OnCall = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""Answers one tool call of a script: the reply's content (`ok` and `value`, or `error` and `refused`)."""


@dataclass(frozen=True, slots=True)
class ScriptOutcome:
    """How a script ended: `error` is None, `syntax`, `exception` or `tool`; `message` says where and why."""

    output: str
    value: Any
    error: str | None
    message: str
    cut: bool
    calls: int


class ScriptHost(Protocol):
    """Where scripts run: the gateway's sandbox."""

    async def run_script(self, start: Mapping[str, Any], max_output: int, on_call: OnCall) -> ScriptOutcome: ...


class CodeMode:
    """Runs Run_Code for one gateway: `tools` gives what a session may see, `is_meta` tells the
    meta-tools (which a script may not call), `call_back` runs a call."""

    def __init__(
        self,
        tools: Callable[[SessionContext], list[ToolRecord]],
        is_meta: Callable[[str], bool],
        host: ScriptHost,
        call_back: CallBack,
        max_output: int,
    ) -> None:
        self._tools = tools
        self._is_meta = is_meta
        self._host = host
        self._call_back = call_back
        self._max_output = max_output

    async def run(self, call: ToolCall) -> types.CallToolResult:
        """Run the script of `call` and shape how it ended as a tool result."""
        code = str(call.arguments["code"])
        start = {"code": code, "stubs": stub_package(self._tools(call.session)), "max_output": self._max_output}
        outcome = await self._host.run_script(start, self._max_output, self._answerer(call))
        return shaped(outcome, self._max_output)

    def _answerer(self, call: ToolCall) -> OnCall:
        # Only a way to ask the client's user travels in: a confirmation token or an input request
        # of the Run_Code call was meant for that call, not for the script's.
        notes = {key: value for key, value in call.notes.items() if key == ELICIT_NOTE}

        async def answer(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
            with requestid.child():
                return await self._answer(call.session, name, arguments, call, notes)

        return answer

    async def _answer(
        self,
        session: SessionContext,
        name: str,
        arguments: Mapping[str, Any],
        call: ToolCall,
        notes: Mapping[str, Any],
    ) -> dict[str, Any]:
        if self._is_meta(name):
            # Meta-tools are the model's, not a script's: a script runs no script and loads no skill.
            return {"ok": False, "refused": True, "error": f"No tool named {clip(name)!r}"}
        outcomes: list[str] = []
        try:
            result = await self._call_back(session, name, arguments, call.progress, {**notes, OUTCOMES_NOTE: outcomes})
        except UnknownToolError:
            # A hidden tool gets the answer of one that does not exist, as it does outside a script.
            return {"ok": False, "refused": True, "error": f"No tool named {clip(name)!r}"}
        except GatewayError as error:
            return {"ok": False, "error": error.client_text()}
        if result.is_error:
            refused = outcomes[-1:] == ["refused"]
            return {"ok": False, "refused": refused, "error": _text(result) or "the tool failed"}
        return {"ok": True, "value": value_of(result)}


def value_of(result: types.CallToolResult) -> Any:
    """What a script gets back from a tool: its structured result, else its text (one block's, or
    a list of them), else None."""
    if result.structured_content is not None:
        return result.structured_content
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if len(texts) == 1:
        return texts[0]
    return texts or None


def shaped(outcome: ScriptOutcome, max_output: int) -> types.CallToolResult:
    """The tool result of a finished script (at most `max_output` characters), or the error of a failed one."""
    if outcome.error == "syntax":
        raise ToolInputError(
            f"The script has a syntax error at {outcome.message}", hint="Fix that line and run the script again."
        )
    if outcome.error is not None:
        printed = outcome.output[-_FAILED_OUTPUT_CHARS:]
        where = "A tool call failed" if outcome.error == "tool" else "The script raised an exception"
        message = f"{where} at {outcome.message}"
        if printed:
            message += f"\nIt printed before that:\n{printed}"
        hint = (
            "Read the tool's error; catch tools.ToolError in the script to go on without it."
            if outcome.error == "tool"
            else "Fix the script at that line and run it again."
        )
        raise ToolExecutionError(message, hint=hint)
    text = outcome.output.rstrip("\n")
    if outcome.value is not None:
        value = outcome.value if isinstance(outcome.value, str) else json.dumps(outcome.value, ensure_ascii=False)
        text = f"{text}\n{value}" if text else value
    if outcome.cut or len(text) > max_output:
        text = text[:max_output] + "\n[output cut: print less, or return a smaller value]"
    return types.CallToolResult(content=[types.TextContent(text=text or "(the script printed nothing)")])


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
