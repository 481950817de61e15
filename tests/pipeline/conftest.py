"""Fixtures for the call pipeline steps: sessions, tools and calls built from real records."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
import pytest

from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.pipeline.chain import ToolCall

MakeCall = Callable[..., ToolCall]


@pytest.fixture
def anyio_backend() -> str:
    """The pipeline runs on asyncio in production, so its tests do too."""
    return "asyncio"


def make_session(session_id: str = "s1", caller: str = "alice") -> SessionContext:
    """A fresh in-memory session context."""
    return SessionContext(session_id, caller, "memory", created_at=0.0, last_seen=0.0)


def make_tool(
    name: str = "echo",
    *,
    schema: Mapping[str, Any] | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    timeout: float | None = None,
) -> ToolRecord:
    """A tool record with the annotations the steps look at."""
    annotations = types.ToolAnnotations(read_only_hint=read_only, idempotent_hint=idempotent)
    return ToolRecord(
        name=name,
        source="test",
        original_name=name,
        input_schema=schema if schema is not None else {"type": "object"},
        annotations=annotations,
        timeout=timeout,
    )


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    """A result holding one text block."""
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)


@pytest.fixture
def session() -> SessionContext:
    """One session shared by the calls of a test."""
    return make_session()


@pytest.fixture
def make_call(session: SessionContext) -> MakeCall:
    """Build calls on the test's session unless another session is given."""

    def build(
        tool: ToolRecord | None = None,
        arguments: dict[str, Any] | None = None,
        on: SessionContext | None = None,
    ) -> ToolCall:
        return ToolCall(on or session, tool or make_tool(), arguments or {})

    return build
