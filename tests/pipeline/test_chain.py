"""The pipeline's chain: each tool's steps composed once per record of it, steps with nothing to do left out."""

from __future__ import annotations

from dataclasses import replace

import mcp_types as types
import pytest

from gateway.catalog.tools import ToolRecord
from gateway.pipeline import chain
from gateway.pipeline.chain import CallNext, Pipeline, ToolCall

from .conftest import MakeCall, make_tool, text_result

pytestmark = pytest.mark.anyio

READ = make_tool("read", read_only=True)
WRITE = make_tool("write")


class WritesOnly:
    """A step with work for calls of tools that are not read-only; it counts how often it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.ran: list[str] = []

    def applies_to(self, tool: ToolRecord) -> bool:
        self.asked.append(tool.name)
        return not tool.read_only

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        self.ran.append(call.tool.name)
        return await call_next(call)


async def answer(call: ToolCall) -> types.CallToolResult:
    return text_result(call.tool.name)


async def test_a_step_with_nothing_to_do_for_a_tool_is_left_out_of_its_calls(make_call: MakeCall) -> None:
    step = WritesOnly()
    pipeline = Pipeline([step], answer)
    assert await pipeline.run(make_call(READ)) == text_result("read")
    assert await pipeline.run(make_call(WRITE)) == text_result("write")
    assert step.ran == ["write"]


async def test_a_tool_s_chain_is_decided_once_per_record_and_again_for_a_new_record_of_it(
    make_call: MakeCall,
) -> None:
    step = WritesOnly()
    pipeline = Pipeline([step], answer)
    for _ in range(3):
        await pipeline.run(make_call(READ))
    assert step.asked == ["read"]
    # The server now lists the tool as a write: its new record gets a chain of its own.
    changed = replace(READ, annotations=types.ToolAnnotations(read_only_hint=False))
    await pipeline.run(make_call(changed))
    assert step.asked == ["read", "read"]
    assert step.ran == ["read"]


async def test_tools_renamed_over_and_over_keep_no_more_chains_than_the_bound(
    make_call: MakeCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chain, "CHAINS_KEPT", 3)
    step = WritesOnly()
    pipeline = Pipeline([step], answer)
    renamed = [make_tool(f"write{n}") for n in range(3)]
    for tool in renamed:
        await pipeline.run(make_call(tool))
    await pipeline.run(make_call(renamed[0]))
    assert step.asked == ["write0", "write1", "write2"]
    # A fourth name finds the bound reached: every chain is composed again when next called.
    await pipeline.run(make_call(WRITE))
    await pipeline.run(make_call(renamed[0]))
    assert step.asked == ["write0", "write1", "write2", "write", "write0"]
    assert step.ran == ["write0", "write1", "write2", "write0", "write", "write0"]
