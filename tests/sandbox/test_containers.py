"""One-shot hardened containers: what the payload cannot do, and what we report about it."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from docker import DockerClient

from gateway.config.limits import SandboxLimits
from gateway.sandbox.containers import RunResult, run_once
from gateway.sandbox.hardening import MiB
from tests.sandbox.conftest import IMAGE, LABELS, WAIT, make_workspace

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def run_python(
    client: DockerClient, code: str, limits: SandboxLimits | None = None, workspace: Path | None = None
) -> RunResult:
    with anyio.fail_after(WAIT):
        command = ["python3", "-c", code]
        return await run_once(client, IMAGE, command, b"", limits or SandboxLimits(), workspace, labels=LABELS)


async def test_stdin_reaches_the_process_and_stdout_comes_back(docker_client: DockerClient) -> None:
    with anyio.fail_after(WAIT):
        command = ["python3", "-c", "import sys; print(sys.stdin.read()[::-1])"]
        result = await run_once(docker_client, IMAGE, command, b"olleh", SandboxLimits(), None, labels=LABELS)
    assert (result.stdout, result.exit_code, result.timed_out, result.truncated) == (b"hello\n", 0, False, False)


async def test_network_connection_attempt_fails(docker_client: DockerClient) -> None:
    code = """
import socket
print(sorted(name for _, name in socket.if_nameindex()))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    print("connected")
except OSError as error:
    print("refused", error.errno)
"""
    result = await run_python(docker_client, code)
    assert result.stdout.decode().splitlines() == ["['lo']", "refused 101"]


async def test_writing_outside_tmpfs_fails(docker_client: DockerClient) -> None:
    code = """
for path in ["/etc/evil", "/opt/site/evil.py", "/opt/gateway/servers/evil.py", "/root/evil", "/evil"]:
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError as error:
        print("refused", path, error.errno)
open("/tmp/fine", "w").write("x")
print("tmp ok")
"""
    lines = (await run_python(docker_client, code)).stdout.decode().splitlines()
    assert lines[-1] == "tmp ok"
    assert [line.split()[0] for line in lines[:-1]] == ["refused"] * 5


async def test_fork_bomb_is_contained_and_the_host_stays_healthy(docker_client: DockerClient) -> None:
    bomb = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    started = time.monotonic()
    result = await run_python(docker_client, bomb, SandboxLimits(pids=32, deadline=3.0))
    assert result.timed_out and result.exit_code == 137
    assert time.monotonic() - started < 30
    # The host can still start processes, and the next sandbox runs normally.
    with anyio.fail_after(5):
        assert (await anyio.run_process(["true"])).returncode == 0
    counted = """
import os, time
children = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError:
    print(children)
"""
    # The snippet ends by itself once a fork is refused; the deadline only guards against a hang.
    result = await run_python(docker_client, counted, SandboxLimits(pids=32, deadline=30.0))
    assert 0 < int(result.stdout) < 32


async def test_memory_hog_is_killed_and_reported(docker_client: DockerClient) -> None:
    result = await run_python(docker_client, "s = 'x' * (400 * 2**20)", SandboxLimits(memory=128 * MiB, tmpfs=16 * MiB))
    assert result.oom_killed
    assert result.exit_code == 137
    assert not result.timed_out


async def test_infinite_loop_is_killed_at_the_deadline(docker_client: DockerClient) -> None:
    started = time.monotonic()
    result = await run_python(docker_client, "while True: pass", SandboxLimits(deadline=1.5))
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code == 137
    assert 1.5 <= elapsed < 15  # start-up and removal included, on a possibly busy host


async def test_ten_megabytes_of_output_arrive_truncated(docker_client: DockerClient) -> None:
    code = "import sys; sys.stdout.write('x' * 10_000_000)"
    result = await run_python(docker_client, code, SandboxLimits(max_output=1 * MiB))
    assert result.truncated
    assert result.stdout == b"x" * MiB


async def test_process_runs_as_non_root_without_capabilities(docker_client: DockerClient) -> None:
    code = """
import os
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(os.getuid(), os.getgid(), status["CapEff"].strip(), status["NoNewPrivs"].strip(), status["Seccomp"].strip())
"""
    result = await run_python(docker_client, code)
    assert result.stdout.decode().split() == ["65534", "65534", "0000000000000000", "1", "2"]


async def test_workspace_is_the_only_host_directory_and_others_stay_invisible(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    mine, theirs = make_workspace(tmp_path, "mine"), make_workspace(tmp_path, "theirs")
    (mine / "mine.marker").write_text("mine")
    (theirs / "theirs.marker").write_text("theirs")
    code = """
import os
found = []
for top in ["/"]:
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        found += [os.path.join(root, f) for f in files if f.endswith(".marker")]
print(sorted(found))
virtual = {"proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "overlay"}
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    fstype = fields[fields.index("-") + 1]
    if fstype not in virtual:
        print(fields[4], fields[5].split(",")[0])
open("/workspace/written", "w").write("from inside")
"""
    result = await run_python(docker_client, code, workspace=mine)
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "['/workspace/mine.marker']"
    host_mounts = dict(line.split() for line in lines[1:])
    # Docker's own per-container files and its init binary come from the host too, read-only.
    assert {path for path, mode in host_mounts.items() if mode == "rw"} == {"/workspace"}
    assert set(host_mounts) <= {
        "/workspace",
        "/etc/resolv.conf",
        "/etc/hostname",
        "/etc/hosts",
        "/usr/sbin/docker-init",
    }
    assert (mine / "written").read_text() == "from inside"
