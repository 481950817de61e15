"""An upstream that runs tool calls as tasks (2025-11-25), which the SDK's own servers do not.

A low-level SDK `Server` with the task methods added: a task-augmented `tools/call` is answered
with a working task (by a server middleware, since the SDK insists a `tools/call` answer is a
`CallToolResult`); the test finishes it with `finish`, which also sends the status notification.
`tasks/result` waits until the task ends; for a task started with text `ask:<question>` it first
asks the client's model the question (sampling, naming the task in `_meta`), and the answer is the
result. Tools: `slow` (tasks optional), `batch` (tasks required), `quick` (no tasks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

NOW = "2026-01-01T00:00:00+00:00"
TOOLS = {"slow": "optional", "batch": "required", "quick": None}
RELATED_TASK = "io.modelcontextprotocol/related-task"
ASK = "ask:"
"""A task whose text starts so asks the client's model the rest when its result is asked for."""


@dataclass
class Job:
    """One task: its state, the arguments of its call, and where its status is told."""

    task: types.Task
    arguments: dict[str, Any]
    session: ServerSession
    done: anyio.Event = field(default_factory=anyio.Event)
    result: types.CallToolResult | None = None


def wire(task: types.Task) -> dict[str, Any]:
    """A task as JSON, `ttl` kept when null."""
    return {**task.model_dump(by_alias=True, mode="json", exclude_none=True), "ttl": task.ttl}


class TaskServer(Server[Any]):
    """The server, advertising tasks for tool calls, listing and cancelling."""

    def __init__(self, name: str = "tasking") -> None:
        super().__init__(name, on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        self.jobs: dict[str, Job] = {}
        self.middleware.append(self._task_calls)
        self.add_request_handler("tasks/get", types.GetTaskRequestParams, self._get)
        self.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self._result)
        self.add_request_handler("tasks/list", types.PaginatedRequestParams, self._list)
        self.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self._cancel)

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        capabilities.tasks = types.ServerTasksCapability(
            list=types.TasksListCapability(),
            cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(
                tools=types.TasksToolsCapability(call=types.TasksCallCapability())
            ),
        )
        return capabilities

    async def finish(self, task_id: str, text: str) -> None:
        """Complete a task with a text result, and tell its client."""
        job = self.jobs[task_id]
        job.result = types.CallToolResult(content=[types.TextContent(text=text)])
        await self._moved(job, "completed")

    async def _moved(self, job: Job, status: types.TaskStatus) -> None:
        job.task = job.task.model_copy(update={"status": status})
        job.done.set()
        notice = types.TaskStatusNotification(params=types.TaskStatusNotificationParams(**job.task.model_dump()))
        await job.session.send_notification(notice)  # type: ignore[arg-type]

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        tools = [
            types.Tool(
                name=name,
                input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
                execution=types.ToolExecution(task_support=support) if support else None,
            )
            for name, support in TOOLS.items()
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if TOOLS.get(params.name) == "required":
            raise MCPError(code=types.METHOD_NOT_FOUND, message=f"{params.name} must be called as a task")
        said = (params.arguments or {}).get("text")
        return types.CallToolResult(content=[types.TextContent(text=f"at once: {said}")])

    async def _task_calls(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, Mapping) or not params.get("task"):
            return await call_next(ctx)
        call = types.CallToolRequestParams.model_validate(params, by_name=False)
        task_id = f"t{len(self.jobs) + 1}"
        task = types.Task(task_id=task_id, status="working", created_at=NOW, last_updated_at=NOW, ttl=60000)
        self.jobs[task_id] = Job(task, dict(call.arguments or {}), ctx.session)
        return {"task": wire(task)}

    def _job(self, task_id: str) -> Job:
        job = self.jobs.get(task_id)
        if job is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Failed to retrieve task: Task not found: {task_id}")
        return job

    async def _get(self, ctx: Any, params: types.GetTaskRequestParams) -> dict[str, Any]:
        return wire(self._job(params.task_id).task)

    async def _result(self, ctx: Any, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        job = self._job(params.task_id)
        if job.arguments.get("text", "").startswith(ASK):
            await self._ask_model(ctx, job)
        await job.done.wait()
        if job.result is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Task {params.task_id} was {job.task.status}")
        meta = {RELATED_TASK: {"taskId": params.task_id}}
        return job.result.model_copy(update={"meta": meta}).model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _ask_model(self, ctx: Any, job: Job) -> None:
        """Ask the client's model the question after `ASK`, about the task, and complete it with the answer."""
        question = types.SamplingMessage(role="user", content=types.TextContent(text=job.arguments["text"][len(ASK) :]))
        request = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[question], max_tokens=10, _meta={RELATED_TASK: {"taskId": job.task.task_id}}
            )
        )
        metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
        answer = await ctx.session.send_request(request, types.CreateMessageResult, metadata=metadata)
        said = answer.content.text if isinstance(answer.content, types.TextContent) else "?"
        job.result = types.CallToolResult(content=[types.TextContent(text=f"model said: {said}")])
        job.task = job.task.model_copy(update={"status": "completed"})
        job.done.set()

    async def _list(self, ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
        return {"tasks": [wire(job.task) for job in self.jobs.values()]}

    async def _cancel(self, ctx: Any, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        job = self._job(params.task_id)
        if job.task.status != "working":
            raise MCPError(code=types.INVALID_PARAMS, message=f"Cannot cancel task: already {job.task.status}")
        await self._moved(job, "cancelled")
        return wire(job.task)
