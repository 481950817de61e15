"""Upstream processes end with the gateway that started them, even one killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import anyio
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from gateway.upstreams.children import watched
from tests.support.harness import REPO, until_listed
from tests.support.waiting import LIMIT

pytestmark = pytest.mark.anyio

STUBBORN = [sys.executable, "-m", "tests.support.stubborn"]


def write_config(tmp_path: Path) -> Path:
    """A gateway with the stubborn upstream and the local test tools, its data under `tmp_path`."""
    path = tmp_path / "gateway.yaml"
    config = {
        "gateway": {"data_dir": str(tmp_path / "data"), "call_timeout": 10},
        "servers": {"stubborn": {"command": STUBBORN[0], "args": STUBBORN[1:], "cwd": str(REPO)}},
        "local_tools": ["tests.support.localfns"],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def gateway_process(config: Path, env: dict[str, str] | None = None) -> StdioServerParameters:
    """`python -m gateway stdio --config <config>` run from the repository."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "stdio", "--config", str(config)], cwd=str(REPO), env=env
    )


# The gateway's PATH without `setpriv` and `timeout`: its servers run under the Python launcher.
WITHOUT_SYSTEM_WATCHER = {**os.environ, "PATH": ""}
WATCHERS = pytest.mark.parametrize("env", [None, WITHOUT_SYSTEM_WATCHER], ids=["setpriv and timeout", "the launcher"])


def stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first), or none once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return []


def identity(pid: int) -> tuple[int, str]:
    """The pid with its start time: a process, even after its pid is reused."""
    return pid, stat(pid)[19]


def alive(process: tuple[int, str]) -> bool:
    """Whether that very process still runs (a zombie has ended)."""
    fields = stat(process[0])
    return bool(fields) and fields[0] != "Z" and fields[19] == process[1]


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and stat(int(name))[1:2] == [str(pid)]]


async def until_ended(processes: list[tuple[int, str]]) -> None:
    """Wait until none of `processes` runs: a process's pidfd becomes readable when it ends."""
    with anyio.move_on_after(LIMIT):
        for process in processes:
            try:
                pidfd = os.pidfd_open(process[0])
            except ProcessLookupError:
                continue
            try:
                # Opened on that very process, or on one that took its pid after it ended.
                if alive(process):
                    await anyio.wait_readable(pidfd)
            finally:
                os.close(pidfd)
        return
    raise AssertionError(f"still running after {LIMIT:g} s: {[p for p in processes if alive(p)]}")


def text(result: types.CallToolResult) -> str:
    """The text of a one-text result."""
    content = result.content[0]
    assert isinstance(content, types.TextContent), result
    return content.text


@contextmanager
def killed_after(processes: list[tuple[int, str]]) -> Iterator[None]:
    """Kill whatever of `processes` is still running on the way out, so that a failure leaks nothing."""
    try:
        yield
    finally:
        for process in processes:
            if alive(process):
                with suppress(ProcessLookupError):
                    os.kill(process[0], signal.SIGKILL)


@WATCHERS
async def test_an_upstream_that_outlives_its_input_dies_with_a_gateway_killed_with_sigkill(
    tmp_path: Path, env: dict[str, str] | None
) -> None:
    config = write_config(tmp_path)
    family: list[tuple[int, str]] = []
    with killed_after(family):
        with anyio.fail_after(60):
            async with Client(gateway_process(config, env)) as client:
                await until_listed(client, "stubborn__family")
                gateway = int(text(await client.call_tool("local__process_id", {})))
                family.extend(
                    identity(int(pid)) for pid in text(await client.call_tool("stubborn__family", {})).split()
                )
                os.kill(gateway, signal.SIGKILL)
        await until_ended(family)


async def test_a_gateway_ends_what_a_previous_one_left_on_its_data_dir_and_nothing_else(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    mark = "MCP_GATEWAY_DATA_DIR"

    def stubborn(data_dir: Path) -> subprocess.Popen[bytes]:
        env = {**os.environ, mark: str(data_dir)}
        return subprocess.Popen(
            STUBBORN, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )

    left, unrelated = stubborn(tmp_path / "data"), stubborn(tmp_path / "elsewhere")
    try:
        for process in (left, unrelated):
            assert process.stderr is not None
            # Said on its stderr once its helper runs: a blocking read, in a worker thread.
            with anyio.fail_after(LIMIT):
                said = await anyio.to_thread.run_sync(process.stderr.readline, abandon_on_cancel=True)
            assert b"helper" in said and children_of(process.pid), said
        leftovers = [identity(pid) for pid in [left.pid, *children_of(left.pid)]]
        bystanders = [identity(pid) for pid in [unrelated.pid, *children_of(unrelated.pid)]]

        with anyio.fail_after(60):
            async with Client(gateway_process(config)) as client:
                await until_ended(leftovers)
                await until_listed(client, "stubborn__family")
                assert text(await client.call_tool("stubborn__family", {}))
        assert all(alive(process) for process in bystanders)
    finally:
        for process in (left, unrelated):
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            if process.stderr is not None:
                process.stderr.close()


async def test_two_stdio_gateways_on_one_data_dir_serve_side_by_side_without_ending_each_other_s_servers(
    tmp_path: Path,
) -> None:
    # As a desktop client opening a second window: a second `gateway stdio` on the default data directory.
    config = write_config(tmp_path)
    family: list[tuple[int, str]] = []
    with killed_after(family), anyio.fail_after(90):
        async with Client(gateway_process(config)) as first:
            await until_listed(first, "stubborn__family")
            family.extend(identity(int(pid)) for pid in text(await first.call_tool("stubborn__family", {})).split())
            async with Client(gateway_process(config)) as second:
                await until_listed(second, "stubborn__family")
                assert text(await second.call_tool("stubborn__family", {}))
                assert all(alive(process) for process in family)
                again = await first.call_tool("stubborn__family", {})
    assert [identity(int(pid)) for pid in text(again).split()] == family


def launch(gateway: int, *command: str, env: dict[str, str] | None = None) -> int:
    """Run `command` under its watcher (the launcher without `setpriv` and `timeout` on the PATH of
    `env`), told that `gateway` is its parent; its exit code."""
    with pytest.MonkeyPatch.context() as patch:
        if env is not None:
            patch.setenv("PATH", env["PATH"])
        program, args = watched(gateway, list(command))
    # Started in the tests' own process group: each watcher leaves it before it could kill its group.
    return subprocess.run([program, *args], check=False).returncode


@WATCHERS
def test_the_watcher_runs_the_command_and_exits_as_it_did(env: dict[str, str] | None) -> None:
    assert launch(os.getpid(), "/bin/sh", "-c", "exit 3", env=env) == 3
    # The launcher exits with the shell's code for a killed command; `timeout` dies of the same signal.
    killed = launch(os.getpid(), "/bin/sh", "-c", "kill -TERM $$", env=env)
    assert killed == (128 + signal.SIGTERM if env else -signal.SIGTERM)


@WATCHERS
def test_the_watcher_starts_nothing_once_the_gateway_is_gone(tmp_path: Path, env: dict[str, str] | None) -> None:
    started = tmp_path / "started"
    # Its parent is not the gateway it was told of: the gateway died before it could be watched.
    assert launch(1, "/usr/bin/touch", str(started), env=env) != 0
    assert not started.exists()


def test_the_system_watcher_runs_no_python() -> None:
    program, args = watched(os.getpid(), ["/bin/true"])
    assert Path(program).name == "setpriv"
    assert sys.executable not in args
