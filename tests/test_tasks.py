"""The task book: each session's tasks under fresh ids of the gateway's own, seen by that session alone."""

from __future__ import annotations

import mcp_types as types
import pytest

from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext
from gateway.clients.tasks import TaskBook, UnknownTaskError, with_related

pytestmark = pytest.mark.anyio

TOOL = ToolRecord(name="jobs__slow", source="jobs", original_name="slow")


def session(name: str) -> SessionContext:
    return SessionContext(name, name, "http", created_at=0.0, last_seen=0.0)


def upstream_task(task_id: str, status: types.TaskStatus = "working") -> types.Task:
    return types.Task(task_id=task_id, status=status, created_at="2026-01-01T00:00:00Z", last_updated_at="x", ttl=None)


def test_a_task_gets_a_fresh_unguessable_id_that_maps_to_the_server_s() -> None:
    book = TaskBook(lambda: 0.0)
    first = book.add(session("a"), TOOL, upstream_task("1"))
    second = book.add(session("a"), TOOL, upstream_task("1"))
    assert first.id != second.id and len(first.id) >= 24 and first.task.task_id == first.id
    assert (first.server, first.upstream_id) == ("jobs", "1")


def test_another_session_s_task_is_as_unknown_as_one_that_never_was() -> None:
    book = TaskBook(lambda: 0.0)
    owner, other = session("a"), session("b")
    entry = book.add(owner, TOOL, upstream_task("1"))
    assert book.get(owner, entry.id) is entry
    with pytest.raises(UnknownTaskError) as foreign:
        book.get(other, entry.id)
    with pytest.raises(UnknownTaskError) as unknown:
        book.get(other, "nope")
    assert foreign.value.message == unknown.value.message.replace("nope", entry.id)
    assert book.of(other) == [] and book.of(owner) == [entry]


async def test_a_session_s_tasks_end_with_it() -> None:
    book = TaskBook(lambda: 0.0)
    owner = session("a")
    entry = book.add(owner, TOOL, upstream_task("1"))
    await owner.close()
    assert book.running_on("jobs", "1") == []
    with pytest.raises(UnknownTaskError):
        book.get(owner, entry.id)


def test_a_call_that_did_not_become_a_task_is_a_finished_task_of_the_gateway_s_own() -> None:
    book = TaskBook(lambda: 1_767_225_600.0)
    refused = types.CallToolResult(content=[types.TextContent(text="Refused: budget")], is_error=True)
    failed = book.finished(session("a"), TOOL, refused)
    done = book.finished(session("a"), TOOL, types.CallToolResult(content=[]))
    assert (failed.task.status, failed.task.status_message, failed.upstream_id) == ("failed", "Refused: budget", None)
    assert failed.task.created_at == "2026-01-01T00:00:00+00:00" and failed.result is refused
    assert done.task.status == "completed"


def test_the_server_s_latest_state_is_kept_under_the_gateway_s_id() -> None:
    book = TaskBook(lambda: 0.0)
    entry = book.add(session("a"), TOOL, upstream_task("1"))
    seen = book.seen(entry, upstream_task("1", "completed"))
    assert (seen.task_id, seen.status) == (entry.id, "completed") and entry.task is seen
    related = with_related(types.CallToolResult(content=[], _meta={"x": 1}), entry.id)
    assert related.meta == {"x": 1, "io.modelcontextprotocol/related-task": {"taskId": entry.id}}
