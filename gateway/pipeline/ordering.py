"""Per-session ordering: a session's writes to one server run one at a time in arrival order.

A model that fires several calls at once expects the writes among them to land in the order
it issued them ("create the file", then "append to it"); reads cannot disturb each other, so
they run concurrently. A write waits only for earlier writes of its session to the same tool
source (an upstream server, the local tools, ...), not for reads in flight nor for writes to
other sources: a read that overlaps a write may see the state before or after it, exactly as it
would if the model had sent them to the tools directly, and making writes wait for reads would
let one slow read stall every write behind it. Sources are independent processes that cannot see
each other's pending calls, so holding a write to one behind a write to another buys no order the
model can observe, while it would let one hung server stall the session's writes everywhere until
the deadline. Servers that share state outside the gateway (two servers over one directory) get
no order between them; a model that needs one waits for the first result, as it must anyway.
Sessions never wait for each other.

Order is kept by one `anyio.Lock` per source, whose waiters are served first come, first served
(its release hands ownership to the oldest waiter). Arrival order is the order in which calls
reach this step, so it belongs before any step that awaits before passing a call on.
"""

from __future__ import annotations

import anyio
import mcp_types as types

from gateway.catalog.tools import ToolRecord
from gateway.pipeline.chain import CallNext, ToolCall

# The locks live in the session's own state, so they go away with the session.
STATE_KEY = "gateway.ordering.writes"


class SessionOrdering:
    """Pipeline step: serialise a session's non-read-only calls per source, let its read-only calls overlap."""

    def applies_to(self, tool: ToolRecord) -> bool:
        """Whether calls of `tool` queue: read-only ones pass straight on."""
        return not tool.read_only

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Pass read-only calls straight on; queue the others behind the session's earlier writes to the same source."""
        if not self.applies_to(call.tool):
            return await call_next(call)
        locks: dict[str, anyio.Lock] = call.session.state.setdefault(STATE_KEY, {})
        lock = locks.get(call.tool.source)
        if lock is None:
            lock = locks[call.tool.source] = anyio.Lock()
        async with lock:
            return await call_next(call)
