"""Changing a server while it is called loses no call: a restart drains the old process, an edit that
needs a new connection makes it before it breaks the old one, and one that needs none keeps it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway.service import Gateway
from gateway.upstreams.connection import State
from tests.support.harness import REPO, gateway_client, make_config
from tests.support.waiting import Inbox, tried_to_connect

pytestmark = pytest.mark.anyio

# A stdio server starts in a second or two; a loaded machine may take much longer.
JOIN_LIMIT = 60.0
# Far beyond every wait below: a call that met it froze until its deadline.
CALL_TIMEOUT = 300


def worker(marks: Path, *extra: str) -> dict[str, Any]:
    """The config entry of the marking worker server (tests.support.worker)."""
    return {"command": sys.executable, "args": ["-m", "tests.support.worker", str(marks), *extra], "cwd": str(REPO)}


def text(result: types.CallToolResult) -> str:
    """The text of a successful one-text result."""
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def marks_of(path: Path) -> list[tuple[str, str]]:
    """Each call the worker started: (its process id, what it did)."""
    if not path.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in path.read_text().splitlines()]  # type: ignore[misc]


async def ready(gateway: Gateway) -> None:
    """Wait until every server has tried once to connect; each is ready."""
    await tried_to_connect(gateway)
    assert all(status.state == State.READY for status in gateway.servers.statuses()), gateway.servers.statuses()


async def calls_during(client: Client, change: Any) -> list[str]:
    """Calls of `worker__count` one after another, from before `change` is made until five after it
    is done; their answers."""
    answers: list[str] = []
    started, done = anyio.Event(), anyio.Event()

    async def calling() -> None:
        after = 0
        while after < 5:
            # Counted among those after the change only when sent after it was done.
            sent_after = done.is_set()
            answers.append(text(await client.call_tool("worker__count", {"n": len(answers)})))
            started.set()
            after += sent_after

    with anyio.fail_after(JOIN_LIMIT * 2):
        async with anyio.create_task_group() as group:
            group.start_soon(calling)
            await started.wait()
            await change()
            done.set()
    return answers


async def test_a_restart_lets_calls_in_flight_finish_on_the_old_process_and_sends_new_ones_to_the_new(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    config = make_config(tmp_path, {"worker": worker(marks)}, call_timeout=CALL_TIMEOUT)
    held: list[str] = []
    holding: Inbox[str] = Inbox()
    async with gateway_client(config) as (gateway, client):
        await ready(gateway)
        old = text(await client.call_tool("worker__count", {"n": -1})).split()[0]

        async def hold(label: str) -> None:
            async def progress(progress: float, total: float | None, message: str | None) -> None:
                await holding.put(label)

            arguments = {"label": label, "seconds": 2}
            held.append(text(await client.call_tool("worker__hold", arguments, progress_callback=progress)))

        with anyio.fail_after(JOIN_LIMIT * 2):
            async with anyio.create_task_group() as group:
                for label in "abcde":
                    group.start_soon(hold, label)
                await holding.until(lambda: len(set(holding)) == 5, "the five held calls started")
                await gateway.servers.restart("worker")
                # Sent while the new process starts: it waits for it, within its deadline.
                after = text(await client.call_tool("worker__count", {"n": -1}))
    assert sorted(held) == [f"held {label} by {old}" for label in "abcde"]
    new, count = after.split()
    assert new != old and count == "1"
    started = marks_of(marks)
    assert sorted(what for _, what in started) == ["count 1", "count 1", *(f"hold {label}" for label in "abcde")]


async def test_an_edit_that_needs_no_new_connection_applies_to_the_one_the_server_has(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    config = make_config(tmp_path, {"worker": worker(marks)}, call_timeout=CALL_TIMEOUT)
    edited = make_config(
        tmp_path,
        {"worker": {**worker(marks), "timeout": 20, "tags": ["edited"], "risk": "low", "layer": "extended"}},
        call_timeout=CALL_TIMEOUT,
    )
    async with gateway_client(config) as (gateway, client):
        await ready(gateway)
        answers = await calls_during(client, lambda: gateway.reloader.reload(edited))
        tool = gateway.catalog.tool("worker__count")
    # One process answered every call, counting on: it was never reconnected.
    assert len({answer.split()[0] for answer in answers}) == 1
    assert [answer.split()[1] for answer in answers] == [str(n) for n in range(1, len(answers) + 1)]
    assert tool is not None and tool.tags == {"edited"} and tool.risk == "low" and tool.timeout == 20


async def test_an_edit_that_needs_a_new_connection_starts_it_beside_the_old_one_and_no_call_fails(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    config = make_config(tmp_path, {"worker": worker(marks)}, call_timeout=CALL_TIMEOUT)
    edited = make_config(tmp_path, {"worker": worker(marks, "--edited")}, call_timeout=CALL_TIMEOUT)
    async with gateway_client(config) as (gateway, client):
        await ready(gateway)
        answers = await calls_during(client, lambda: gateway.reloader.reload(edited))
    # Every call answered: the old process until the new one took over, the new one from then on.
    processes = list(dict.fromkeys(answer.split()[0] for answer in answers))
    assert len(processes) == 2
    assert [answer.split()[0] for answer in answers[-5:]] == [processes[1]] * 5


async def test_a_tags_only_change_of_a_registered_server_keeps_its_connection(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    config = make_config(tmp_path, {}, call_timeout=CALL_TIMEOUT)
    async with gateway_client(config) as (gateway, client):
        await gateway.servers.add({"name": "worker", **worker(marks)})
        await ready(gateway)
        answers = await calls_during(client, lambda: gateway.servers.change("worker", {"tags": ["patched"]}))
        tool = gateway.catalog.tool("worker__count")
    assert len({answer.split()[0] for answer in answers}) == 1
    assert [answer.split()[1] for answer in answers] == [str(n) for n in range(1, len(answers) + 1)]
    assert tool is not None and tool.tags == {"patched"}
