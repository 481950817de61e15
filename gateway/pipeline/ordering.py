"""Per-session ordering: a session's writes run one at a time in arrival order, its reads freely.

A model that fires several calls at once expects the writes among them to land in the order
it issued them ("create the file", then "append to it"); reads cannot disturb each other, so
they run concurrently. A write waits only for earlier writes of its session, not for reads in
flight: a read that overlaps a write may see the state before or after it, exactly as it would
if the model had sent them to the tools directly, and making writes wait for reads would let
one slow read stall every write behind it. Sessions never wait for each other.

Order is kept by an `anyio.Lock`, whose waiters are served first come, first served (its
release hands ownership to the oldest waiter). Arrival order is the order in which calls reach
this step, so it belongs before any step that awaits before passing a call on.
"""

from __future__ import annotations

import anyio
import mcp_types as types

from gateway.pipeline.chain import CallNext, ToolCall

# The lock lives in the session's own state, so it goes away with the session.
STATE_KEY = "gateway.ordering.writes"


class SessionOrdering:
    """Pipeline step: serialise a session's non-read-only calls, let its read-only calls overlap."""

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Pass read-only calls straight on; queue the others behind the session's earlier writes."""
        if call.tool.read_only:
            return await call_next(call)
        lock: anyio.Lock | None = call.session.state.get(STATE_KEY)
        if lock is None:
            lock = call.session.state[STATE_KEY] = anyio.Lock()
        async with lock:
            return await call_next(call)
