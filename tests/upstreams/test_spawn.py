"""A server started by `spawn` behaves as an anyio process: pipes both ways, its exit code, closing."""

from __future__ import annotations

import os
import signal
import sys

import anyio
import pytest

from gateway.upstreams.spawn import spawn

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(sys.platform != "linux", reason="pidfds are Linux's")]


async def test_what_is_written_to_a_spawned_process_comes_back_and_its_exit_code_is_seen() -> None:
    process = spawn(["cat"], dict(os.environ), sys.stderr, None)
    with anyio.fail_after(30):
        await process.stdin.send(b"hello\n" * 20000)
        received = b""
        while len(received) < 120000:
            received += await process.stdout.receive()
        await process.stdin.aclose()
        with pytest.raises(anyio.EndOfStream):
            await process.stdout.receive()
        assert await process.wait() == 0
    assert received == b"hello\n" * 20000
    assert process.returncode == 0
    await process.aclose()


async def test_a_write_the_pipe_takes_at_once_lets_no_other_task_run() -> None:
    process = spawn(["cat"], dict(os.environ), sys.stderr, None)
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(other)
            await process.stdin.send(b"hello\n")
            assert ran == []
        assert await process.stdout.receive() == b"hello\n"
        await process.aclose()
    assert ran == ["other"]


async def test_a_spawned_process_leads_a_process_group_of_its_own_and_reports_the_signal_that_ended_it() -> None:
    process = spawn(["sleep", "60"], dict(os.environ), sys.stderr, None)
    assert os.getpgid(process.pid) == process.pid
    os.killpg(process.pid, signal.SIGKILL)
    with anyio.fail_after(30):
        assert await process.wait() == -signal.SIGKILL
    await process.aclose()


async def test_closing_a_pipe_wakes_the_task_reading_it() -> None:
    process = spawn(["sleep", "60"], dict(os.environ), sys.stderr, None)
    outcome: list[type[BaseException]] = []

    async def read() -> None:
        try:
            await process.stdout.receive()
        except anyio.ClosedResourceError as error:
            outcome.append(type(error))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            await anyio.wait_all_tasks_blocked()
            await process.stdout.aclose()
        process.kill()
        await process.aclose()
    assert outcome == [anyio.ClosedResourceError]


def test_a_command_that_does_not_exist_fails_at_the_spawn() -> None:
    with pytest.raises(FileNotFoundError):
        spawn(["/nonexistent/server"], dict(os.environ), sys.stderr, None)
