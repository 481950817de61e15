"""Tasks at the front door (2025-11-25): task-augmented `tools/call` and `tasks/get`, `tasks/result`,
`tasks/list`, `tasks/cancel`, each sent to the server that runs the task under its own id.

The SDK serves none of this: a `tools/call` handler's answer must be a `CallToolResult`, and
`tasks/*` are no methods it knows. So a task-augmented call runs the ordinary `tools/call` path
(session, pipeline, audit) with a `TaskOrder` in its notes, and a server middleware around it
answers with the task instead (`TaskCalls`); the `tasks/*` methods are request handlers of our
own. The 2026-07-28 era has no tasks in its core protocol: there, `tasks/*` are unknown methods
and a call's `task` field is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog, Route, page
from gateway.catalog.tools import ToolRecord
from gateway.clients.downstream import bound
from gateway.clients.session import SessionContext
from gateway.clients.tasks import TaskEntry, TaskOrder, task_wire, with_related
from gateway.errors import GatewayError, ProtocolError, ToolError, clip
from gateway.frontdoors.clientrequests import ClientOfRequest
from gateway.service import Gateway
from gateway.upstreams.connection import Upstream

Context = ServerRequestContext[Any, Any]
SessionOf = Callable[[Context], SessionContext]
Shown = Callable[[types.CallToolResult], types.CallToolResult]

CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())),
)
"""What the gateway advertises: task-augmented tool calls, listing and cancelling tasks."""


@dataclass(slots=True)
class _Slot:
    """What the `tools/call` handler tells the middleware of a task-augmented call."""

    order: TaskOrder | None = None
    session: SessionContext | None = None
    tool: ToolRecord | None = None


_SLOT: ContextVar[_Slot | None] = ContextVar("gateway.task_slot", default=None)


def _modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def task_order(
    ctx: Context, catalog: Catalog, visibility: Visibility, session: SessionContext, params: types.CallToolRequestParams
) -> TaskOrder | None:
    """The order to run this call as a task, when the client asked for one; None otherwise.

    A tool must be called as the protocol says its `taskSupport` allows (absent means
    "forbidden"): a task for a tool that forbids them, or a plain call of one that requires
    them, is answered "Method not found" (-32601). An unknown tool is left to the call itself.
    """
    # Not `resolve`: an unknown name costs it a search for near misses, which the call makes anyway.
    tool = catalog.tool(params.name)
    support = tool.execution.task_support if tool is not None and tool.execution is not None else None
    slot = _SLOT.get()
    asked = slot is not None and params.task is not None
    if not asked and (support != "required" or _modern(ctx)):
        return None  # the plain call of nearly every tool: one look-up
    if tool is None or not visibility.may_see(session, tool):
        return None  # a hidden tool is as unknown as a missing one: the call says so
    if not asked:
        raise MCPError(code=types.METHOD_NOT_FOUND, message=f"Tool {clip(params.name)!r} must be called as a task")
    if support not in ("optional", "required"):
        raise MCPError(code=types.METHOD_NOT_FOUND, message=f"Tool {clip(params.name)!r} does not run as a task")
    assert slot is not None and params.task is not None
    slot.order, slot.session, slot.tool = TaskOrder(params.task), session, tool
    return slot.order


@contextmanager
def _answered(gateway: Gateway) -> Iterator[None]:
    """Gateway errors as the client sees them: invalid params, without secrets."""
    try:
        yield
    except GatewayError as error:
        raise MCPError(code=types.INVALID_PARAMS, message=gateway.redact(error.client_text())) from None


class TaskCalls:
    """The server middleware that answers a task-augmented `tools/call` with its task."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method != "tools/call" or _modern(ctx) or not isinstance(params, Mapping) or not params.get("task"):
            return await call_next(ctx)
        slot = _Slot()
        token = _SLOT.set(slot)
        try:
            answer = await call_next(ctx)
        finally:
            _SLOT.reset(token)
        if slot.order is None or slot.session is None or slot.tool is None:
            return answer
        book = self._gateway.tasks
        if slot.order.created is not None:
            entry = book.add(slot.session, slot.tool, slot.order.created)
        else:
            # Refused by the pipeline, or run at once by a source that runs no tasks.
            result = types.CallToolResult.model_validate(answer, by_name=False)
            entry = book.finished(slot.session, slot.tool, result)
        return {"task": task_wire(entry.task)}


def install(server: Server[Any], gateway: Gateway, session_of: SessionOf, shown: Shown, page_size: int) -> None:
    """Serve tasks on `server`: the middleware for task-augmented calls and the `tasks/*` methods.

    `shown` is how a tool's result is shown to a client (its errors without secrets).
    """
    book = gateway.tasks

    def find(ctx: Context, task_id: str) -> TaskEntry:
        if _modern(ctx):
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
        return book.get(session_of(ctx), task_id)

    async def upstream(entry: TaskEntry) -> Upstream:
        return await gateway.router.upstream(entry.session, Route(entry.server, entry.tool.original_name))

    async def refreshed(entry: TaskEntry) -> types.Task:
        if entry.upstream_id is None:
            return entry.task
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=entry.upstream_id))
        answer = await (await upstream(entry)).send_as_is(request)
        return book.seen(entry, types.Task.model_validate(answer, by_name=False))

    async def get(ctx: Context, params: types.GetTaskRequestParams) -> dict[str, Any]:
        with _answered(gateway):
            return task_wire(await refreshed(find(ctx, params.task_id)))

    async def result(ctx: Context, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        with _answered(gateway):
            entry = find(ctx, params.task_id)
            outcome = entry.result
            if entry.upstream_id is not None:
                request = types.GetTaskPayloadRequest(
                    params=types.GetTaskPayloadRequestParams(task_id=entry.upstream_id)
                )
                # The server may ask the client for input while the client waits for the result.
                client = ClientOfRequest(ctx, entry.session, entry.tool.name, gateway.passthrough, entry)
                with bound(client):
                    answer = await (await upstream(entry)).send_as_is(request)
                outcome = gateway.catalog.exposed_links(entry.server, types.CallToolResult.model_validate(answer))
            assert outcome is not None
            return with_related(shown(outcome), entry.id).model_dump(by_alias=True, mode="json", exclude_none=True)

    async def listed(ctx: Context, params: types.PaginatedRequestParams) -> dict[str, Any]:
        with _answered(gateway):
            if _modern(ctx):
                raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
            entries, cursor = page(book.of(session_of(ctx)), params.cursor, page_size, key=_task_id)
            tasks: list[dict[str, Any]] = []
            for entry in entries:
                try:
                    tasks.append(task_wire(await refreshed(entry)))
                except ProtocolError:
                    book.forget(entry)  # its server no longer knows it: its time to live ran out
                except ToolError:
                    tasks.append(task_wire(entry.task))  # its server is down: the last state seen
            return {"tasks": tasks} | ({"nextCursor": cursor} if cursor else {})

    async def cancel(ctx: Context, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        with _answered(gateway):
            entry = find(ctx, params.task_id)
            if entry.upstream_id is None:
                raise ProtocolError(f"Cannot cancel task: it is already {entry.task.status}")
            request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=entry.upstream_id))
            answer = await (await upstream(entry)).send_as_is(request)
            return task_wire(book.seen(entry, types.Task.model_validate(answer, by_name=False)))

    server.middleware.append(TaskCalls(gateway))
    server.add_request_handler("tasks/get", types.GetTaskRequestParams, get)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, result)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, listed)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel)


def _task_id(entry: TaskEntry) -> str:
    return entry.id
