"""Task-augmented calls as the gateway keeps them: each client session's tasks, under ids of the gateway's own.

A client that asks for a call to run as a task gets a task whose id the gateway minted: an
unguessable token, mapped to the server that runs the task and the id that server gave it. A
session sees only the tasks it created; any other id, another session's included, is unknown to
it. A call that did not become a task on a server (the pipeline refused it, or its source runs
no tasks) becomes a task of the gateway's own, already finished, whose result is the call's.
Pure: no I/O; the clock is passed in.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import mcp_types as types

from gateway.catalog.tools import ToolRecord
from gateway.clients.session import Closer, SessionContext
from gateway.errors import ProtocolError, clip

TASK_NOTE = "gateway.task"
"""The pipeline note of a call that is to run as a task (a `TaskOrder`)."""
RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The `_meta` key naming the task a message belongs to."""
BOOK_KEY = "gateway.clients.tasks"


class UnknownTaskError(ProtocolError):
    """No task of that id belongs to the session asking."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"Unknown task: {clip(task_id)!r}")


@dataclass(slots=True)
class TaskOrder:
    """A client's request that its call run as a task; the pipeline's terminal fills in `created`."""

    metadata: types.TaskMetadata
    created: types.Task | None = None
    """The task as the server that runs it created it; None while the call has not reached it."""

    def placed(self, task: types.Task) -> types.CallToolResult:
        """Record the server's task; what the pipeline carries back in its place (never shown to a client)."""
        self.created = task
        return types.CallToolResult(content=[types.TextContent(text="task created")])


@dataclass(slots=True)
class TaskEntry:
    """One task of one session: where it runs, and the last state the gateway saw of it."""

    id: str
    session: SessionContext
    tool: ToolRecord
    upstream_id: str | None
    """The id the server gave the task; None for a task of the gateway's own."""
    task: types.Task
    result: types.CallToolResult | None = None
    """The result of a task of the gateway's own."""

    @property
    def server(self) -> str:
        """The server that runs the task."""
        return self.tool.source

    @property
    def running(self) -> bool:
        """Whether its server runs it still, as last seen."""
        return self.upstream_id is not None and self.task.status in ("working", "input_required")


@dataclass
class TaskBook:
    """Every session's tasks, by the gateway's ids; `wall_clock` (epoch seconds) dates the gateway's
    own tasks, `token` mints ids."""

    wall_clock: Callable[[], float]
    token: Callable[[], str] = field(default=lambda: secrets.token_urlsafe(24))
    _entries: dict[str, TaskEntry] = field(default_factory=dict)
    abandon: Callable[[TaskEntry], Awaitable[None]] | None = None
    """Cancels on its server a task still running when its session ends: no client can ask for it
    any more. Set by the facade, which reaches the upstreams."""

    def add(self, session: SessionContext, tool: ToolRecord, task: types.Task) -> TaskEntry:
        """Keep the server's new `task` of `tool` for `session`, under a fresh id."""
        entry = TaskEntry(self.token(), session, tool, task.task_id, task)
        entry.task = task.model_copy(update={"task_id": entry.id})
        return self._keep(entry)

    def finished(self, session: SessionContext, tool: ToolRecord, result: types.CallToolResult) -> TaskEntry:
        """A task of the gateway's own for a call that ended without becoming a task on a server:
        refused by the pipeline, or run by a source that runs no tasks. Failed or completed."""
        now = datetime.fromtimestamp(self.wall_clock(), UTC).isoformat()
        message = None
        if result.is_error:
            message = next((block.text for block in result.content if isinstance(block, types.TextContent)), None)
        task_id = self.token()
        status: types.TaskStatus = "failed" if result.is_error else "completed"
        task = types.Task(
            task_id=task_id, status=status, status_message=message, created_at=now, last_updated_at=now, ttl=None
        )
        return self._keep(TaskEntry(task_id, session, tool, None, task, result))

    def _keep(self, entry: TaskEntry) -> TaskEntry:
        self._entries[entry.id] = entry
        entry.session.state.setdefault(BOOK_KEY, []).append(entry.id)
        if len(entry.session.state[BOOK_KEY]) == 1:
            entry.session.on_close(self._closer(entry.session))
        return entry

    def _closer(self, session: SessionContext) -> Closer:
        async def close() -> None:
            for task_id in session.state.pop(BOOK_KEY, []):
                entry = self._entries.pop(task_id, None)
                if entry is not None and entry.running and self.abandon is not None:
                    await self.abandon(entry)

        return close

    def get(self, session: SessionContext, task_id: str) -> TaskEntry:
        """The session's task `task_id`; another session's is as unknown as one that never was."""
        entry = self._entries.get(task_id)
        if entry is None or entry.session is not session:
            raise UnknownTaskError(task_id)
        return entry

    def of(self, session: SessionContext) -> list[TaskEntry]:
        """The session's tasks, oldest first."""
        return [self._entries[task_id] for task_id in session.state.get(BOOK_KEY, []) if task_id in self._entries]

    def forget(self, entry: TaskEntry) -> None:
        """Drop a task its server no longer knows."""
        self._entries.pop(entry.id, None)
        ids: list[str] = entry.session.state.get(BOOK_KEY, [])
        if entry.id in ids:
            ids.remove(entry.id)

    def running_on(self, server: str, upstream_id: str) -> list[TaskEntry]:
        """The tasks `server` knows as `upstream_id` (one per instance of a server run per session)."""
        return [e for e in self._entries.values() if e.server == server and e.upstream_id == upstream_id]

    @staticmethod
    def seen(entry: TaskEntry, task: types.Task) -> types.Task:
        """The server's latest state of the task under the gateway's id, kept as the last seen."""
        entry.task = types.Task.model_validate({**task.model_dump(), "task_id": entry.id})
        return entry.task


def as_gateway_s(meta: Mapping[str, Any] | None, entry: TaskEntry) -> dict[str, Any] | None:
    """The `_meta` of a request a server sends about its task `entry`, naming the task by the
    gateway's id, as the client knows it; None when `meta` names no task of the server's."""
    related = (meta or {}).get(RELATED_TASK)
    if not isinstance(related, Mapping) or related.get("taskId") != entry.upstream_id:
        return None
    return {**(meta or {}), RELATED_TASK: {**related, "taskId": entry.id}}


def task_wire(task: types.Task) -> dict[str, Any]:
    """A task as JSON: `ttl` stays even when null (unlimited), as the protocol requires."""
    return {**task.model_dump(by_alias=True, mode="json", exclude_none=True), "ttl": task.ttl}


def with_related(result: types.CallToolResult, task_id: str) -> types.CallToolResult:
    """A task's result naming the task it belongs to by the gateway's id."""
    meta = {**(result.meta or {}), RELATED_TASK: {"taskId": task_id}}
    return result.model_copy(update={"meta": meta})
