"""Tests for the Python runner with harmless snippets in local child processes."""

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from servers.python import build_server

REPO = Path(__file__).resolve().parents[2]


async def run(arguments: dict[str, object], limit: float = 30, max_output_bytes: int = 1000) -> CallToolResult:
    """Call run_python on an in-memory server, bounded so a stuck child fails the test."""
    with anyio.fail_after(limit + 5):
        async with Client(build_server(timeout=limit, max_output_bytes=max_output_bytes)) as client:
            return await client.call_tool("run_python", arguments)


async def assert_gone(pid: int) -> None:
    """Wait, bounded, until a killed process has exited: SIGKILL is delivered asynchronously."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        # A pidfd turns readable when its process exits, child of ours or not.
        with anyio.fail_after(10):
            await anyio.wait_readable(descriptor)
    finally:
        os.close(descriptor)


@pytest.mark.anyio
async def test_run_python_returns_stdout_stderr_and_exit_code() -> None:
    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)"
    result = await run({"code": code})
    assert not result.is_error
    assert result.structured_content == {
        "stdout": "out\n",
        "stderr": "err\n",
        "exit_code": 3,
        "timed_out": False,
        "stdout_cut_bytes": 0,
        "stderr_cut_bytes": 0,
    }
    assert result.content[0].text == "exit code 3\n--- stdout ---\nout\n\n--- stderr ---\nerr\n"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_stdin_reaches_the_snippet() -> None:
    result = await run({"code": "import sys; print(sys.stdin.read().upper())", "stdin": "shout"})
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "SHOUT\n"


@pytest.mark.anyio
async def test_snippet_runs_in_an_empty_temporary_directory_without_the_server_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SERVER_SECRET", "s3cret")
    code = "import os; print(sorted(os.listdir('.'))); print(os.environ.get('SERVER_SECRET'))"
    result = await run({"code": code})
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "['snippet.py']\nNone\n"


@pytest.mark.anyio
async def test_timeout_kills_the_child_and_its_process_group() -> None:
    code = (
        "import subprocess, sys, time\n"
        "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "import os; print(os.getpid(), helper.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    started = anyio.current_time()
    result = await run({"code": code, "timeout": 5})
    # Killed at its timeout rather than left to sleep out its 60 s; the rest is a busy machine's margin.
    assert anyio.current_time() - started < 30
    assert result.structured_content is not None
    assert result.structured_content["timed_out"] is True
    assert result.structured_content["exit_code"] == -9
    assert "timed out after 5 s" in result.content[0].text  # type: ignore[union-attr]
    child, grandchild = (int(pid) for pid in result.structured_content["stdout"].split())
    await assert_gone(child)
    await assert_gone(grandchild)


@pytest.mark.anyio
async def test_background_processes_do_not_outlive_the_call() -> None:
    code = (
        "import subprocess, sys\n"
        "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(helper.pid)\n"
    )
    started = anyio.current_time()
    result = await run({"code": code})
    # The call does not wait for the helper's 60 s sleep; the rest is a busy machine's margin.
    assert anyio.current_time() - started < 30
    assert result.structured_content is not None
    assert result.structured_content["timed_out"] is False
    await assert_gone(int(result.structured_content["stdout"]))


@pytest.mark.anyio
async def test_output_past_the_cap_keeps_the_head_and_says_how_much_was_cut() -> None:
    result = await run({"code": "print('a' * 100 + 'b' * 5000)"}, max_output_bytes=100)
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "a" * 100 + "\n[... 5001 more bytes cut]"
    assert result.structured_content["stdout_cut_bytes"] == 5001


@pytest.mark.anyio
async def test_a_timeout_over_the_server_limit_is_refused() -> None:
    result = await run({"code": "print(1)", "timeout": 60}, limit=2)
    assert result.is_error
    assert "over this server's limit of 2 s" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_run_python_is_annotated_destructive_and_open_world_and_says_sandbox_only() -> None:
    async with Client(build_server()) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.name == "run_python"
    assert tool.annotations is not None
    assert tool.annotations.destructive_hint is True
    assert tool.annotations.open_world_hint is True
    assert tool.annotations.read_only_hint is False
    assert tool.description is not None and "only run inside a sandbox" in tool.description


@pytest.mark.anyio
async def test_python_server_answers_over_stdio_as_a_subprocess() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "servers.python", "--timeout", "10"], cwd=REPO)
    with anyio.fail_after(30):
        async with Client(params) as client:
            result = await client.call_tool("run_python", {"code": "print(6 * 7)"})
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "42\n"
