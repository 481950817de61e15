"""DockerSandbox: per-call and per-session sandboxed MCP servers, failing closed without Docker."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from docker import DockerClient
from mcp import Client
from mcp.types import CallToolResult

from gateway.errors import ToolExecutionError, ToolRefusedError, ToolTimeoutError
from gateway.sandbox import DockerSandbox, SandboxLimits, SandboxUnavailableError
from gateway.upstreams.outputs import OutputValidators
from tests.sandbox.conftest import IMAGE, SCOPE, WAIT, make_workspace, sandbox_ids
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio

ECHO = ["python3", "-m", "servers.echo"]
PYTHON = ["python3", "-m", "servers.python"]
COUNTER = ["python3", "/workspace/counter_server.py"]
REPO = Path(__file__).resolve().parents[2]


def text(result: CallToolResult) -> str:
    assert not result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.docker
async def test_bundled_echo_server_answers_a_per_call_request(sandbox: DockerSandbox) -> None:
    with anyio.fail_after(WAIT):
        result = await sandbox.call_per_call(
            ["python3", "-m", "servers.echo"], "echo", {"text": "hi"}, SandboxLimits(), None
        )
    assert text(result) == "hi"


@pytest.mark.docker
async def test_bundled_python_runner_runs_snippets_as_nobody_on_a_read_only_root(sandbox: DockerSandbox) -> None:
    code = "import os; print(os.getuid()); open('/etc/x', 'w')"
    with anyio.fail_after(WAIT):
        result = await sandbox.call_per_call(
            ["python3", "-m", "servers.python"], "run_python", {"code": code}, SandboxLimits(), None
        )
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "65534\n"
    assert "Read-only file system" in result.structured_content["stderr"]


@pytest.mark.docker
async def test_a_server_that_dies_is_reported_to_the_caller_without_its_stderr_which_goes_to_the_log(
    sandbox: DockerSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    dying = ["python3", "-c", "import sys; sys.exit('boom at start')"]
    with anyio.fail_after(WAIT), pytest.raises(ToolExecutionError, match="sandboxed tool anything failed") as raised:
        await sandbox.call_per_call(dying, "anything", {}, SandboxLimits(), None)
    assert "boom" not in raised.value.message
    assert "server stderr: boom at start" in caplog.text


@pytest.mark.docker
async def test_per_call_containers_start_fresh_each_time(sandbox: DockerSandbox, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "calls")
    with anyio.fail_after(WAIT):
        counts = [
            text(await sandbox.call_per_call(COUNTER, "increment", {}, SandboxLimits(), workspace)) for _ in range(3)
        ]
        who = text(await sandbox.call_per_call(COUNTER, "whoami", {}, SandboxLimits(), workspace))
    assert counts == ["1", "1", "1"]
    assert who == "65534 /workspace"


@pytest.mark.docker
async def test_session_keeps_state_across_calls_but_not_across_sessions(sandbox: DockerSandbox, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "session")
    with anyio.fail_after(WAIT):
        async with Client(sandbox.session_transport("one", COUNTER, SandboxLimits(), workspace)) as first:
            assert [text(await first.call_tool("increment", {})) for _ in range(3)] == ["1", "2", "3"]
            async with Client(sandbox.session_transport("two", COUNTER, SandboxLimits(), workspace)) as second:
                assert text(await second.call_tool("increment", {})) == "1"
            assert text(await first.call_tool("increment", {})) == "4"
            await sandbox.close_session("one")


@pytest.mark.docker
async def test_idle_sessions_are_closed(sandbox: DockerSandbox, tmp_path: Path, docker_client: DockerClient) -> None:
    workspace = make_workspace(tmp_path, "idle")
    transport = sandbox.session_transport("idle", COUNTER, SandboxLimits(), workspace)
    with anyio.fail_after(WAIT):
        async with Client(transport) as client:
            await client.call_tool("increment", {})
            container = transport.container_id
            assert await sandbox.close_idle(transport.last_activity + 1) == 0
            assert await sandbox.close_idle(transport.last_activity + sandbox.session_idle + 1) == 1
            # The removal is queued: a call made before it lands would still be answered.
            await poll_until(
                lambda: anyio.to_thread.run_sync(lambda: container not in sandbox_ids(docker_client)),
                "the idle session's container to go",
            )
            with pytest.raises(Exception):  # noqa: B017 - any failure will do: the container is gone
                await client.call_tool("increment", {})


@pytest.mark.docker
async def test_call_past_its_deadline_times_out(sandbox: DockerSandbox, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "slow")
    with anyio.fail_after(WAIT), pytest.raises(ToolTimeoutError, match="deadline"):
        await sandbox.call_per_call(COUNTER, "wait", {"seconds": 30}, SandboxLimits(deadline=2.0), workspace)


async def test_unreachable_docker_gives_a_clear_error(tmp_path: Path) -> None:
    sandbox = DockerSandbox(IMAGE, docker_url=f"unix://{tmp_path}/no-docker.sock")
    ok, reason = sandbox.available()
    assert not ok
    assert reason.startswith("Docker is not reachable: ")
    with anyio.fail_after(10), pytest.raises(SandboxUnavailableError, match="Docker is not reachable") as caught:
        await sandbox.call_per_call(ECHO, "echo", {"text": "x"}, SandboxLimits(), None)
    assert isinstance(caught.value, ToolRefusedError)
    await sandbox.close()


async def test_a_session_without_docker_is_refused_when_it_connects(tmp_path: Path) -> None:
    sandbox = DockerSandbox(IMAGE, docker_url=f"unix://{tmp_path}/no-docker.sock")
    transport = sandbox.session_transport("s1", ECHO, SandboxLimits(), None)
    with anyio.fail_after(10), pytest.raises(SandboxUnavailableError, match="Docker is not reachable"):
        async with Client(transport):
            pass
    await sandbox.close()


@pytest.mark.docker
async def test_missing_image_gives_a_clear_error_with_the_build_command(docker_client: DockerClient) -> None:
    sandbox = DockerSandbox("mcp-gateway-sandbox:no-such-tag")
    ok, reason = sandbox.available()
    assert not ok
    assert reason == "sandbox image mcp-gateway-sandbox:no-such-tag is missing: run `python -m gateway sandbox build`"
    with anyio.fail_after(10), pytest.raises(SandboxUnavailableError, match="is missing"):
        await sandbox.call_per_call(ECHO, "echo", {"text": "x"}, SandboxLimits(), None)
    await sandbox.close()


@pytest.mark.docker
async def test_nothing_remains_after_the_gateway_is_killed_and_restarted(docker_client: DockerClient) -> None:
    script = f"""
import anyio
from gateway.sandbox import DockerSandbox, SandboxLimits
async def main():
    box = DockerSandbox({IMAGE!r}, warm_size=2, scope={SCOPE!r})
    await box.prewarm(["python3", "-m", "servers.echo"], SandboxLimits(), None)
    print("ready", flush=True)
    await anyio.sleep(60)
anyio.run(main)
"""
    gateway = await anyio.open_process([sys.executable, "-c", script], cwd=REPO)
    try:
        assert gateway.stdout is not None
        with anyio.fail_after(WAIT):
            assert (await gateway.stdout.receive()).startswith(b"ready")
    finally:
        gateway.kill()  # SIGKILL: no cleanup code of the gateway runs
        with anyio.fail_after(10):
            await gateway.wait()
    assert len(sandbox_ids(docker_client)) == 2
    restarted = DockerSandbox(IMAGE, scope=SCOPE)
    with anyio.fail_after(WAIT):
        assert await restarted.sweep_leftovers() == 2
    assert sandbox_ids(docker_client) == set()
    await restarted.close()


def test_a_sandboxed_result_is_held_to_its_tool_s_output_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    check = OutputValidators().check
    check("count", schema, types.CallToolResult(content=[], structured_content={"n": 3}))
    with pytest.raises(ToolExecutionError, match="did not return structured content"):
        check("count", schema, types.CallToolResult(content=[]))
    with pytest.raises(ToolExecutionError, match="Invalid structured content returned by tool count"):
        check("count", schema, types.CallToolResult(content=[], structured_content={"n": "three"}))
