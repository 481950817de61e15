"""The Docker sandbox behind a real gateway: isolation, limits, per-session servers, failing closed, leftovers."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from docker import DockerClient
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext

from gateway.config.loading import load_config
from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.sandbox.sandboxes import sandbox_scope
from gateway.sandbox.source import LABEL_SESSION
from gateway.sandbox.sweeper import scope_filter
from gateway.service import Gateway
from gateway.upstreams.volumes import mounted_under
from gateway.upstreams.workspaces import SPARES
from tests.sandbox.conftest import COUNTER_SERVER, IMAGE, WAIT
from tests.support.harness import REPO, make_config, until_listed
from tests.support.metrics import growth, parse
from tests.support.waiting import logged, poll_until

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

# A snippet's deadline: a cold start takes about a second on a quiet host, this is over ten times that.
DEADLINE = 30.0
# The runaway-code tool's own deadline, small so that its test waits little: it only has to be passed.
RUNAWAY_DEADLINE = 3.0
# A kill and removal take well under a second on a quiet host; the runaway test allows ten times a loaded start.
KILL_GRACE = 30.0
PYTHON = ["python3", "-m", "servers.python"]
# The counter server travels in its command line: the image holds only the bundled servers.
COUNTER = ["python3", "-c", COUNTER_SERVER.read_text()]
DISCOVERY = "discovery/counter"


def sandboxed_servers() -> dict[str, Any]:
    """The python runner sandboxed per call, the files server per session, the counter sandboxed per session."""
    host_python = {"command": sys.executable, "args": ["-m", "servers.python"], "cwd": str(REPO)}
    return {
        "python": {
            **host_python,
            "tools": {
                "run_python": {
                    "risk": "high",
                    "sandbox": {
                        "mode": "per-call",
                        "command": PYTHON,
                        "deadline": DEADLINE,
                        "memory": "128m",
                        "tmpfs": "16m",
                    },
                }
            },
        },
        # The runner keeps up to 20 MB per stream here, so only the sandbox's own output cap stands in the way.
        "uncapped": {
            **host_python,
            "tools": {
                "run_python": {
                    "risk": "low",
                    "sandbox": {
                        "mode": "per-call",
                        "command": [*PYTHON, "--max-output-bytes", "20000000"],
                        "deadline": DEADLINE,
                        "max_output_bytes": 65536,
                    },
                }
            },
        },
        "runaway": {
            **host_python,
            "tools": {
                "run_python": {
                    "risk": "low",
                    "sandbox": {"mode": "per-call", "command": PYTHON, "deadline": RUNAWAY_DEADLINE},
                }
            },
        },
        "files": {
            "command": sys.executable,
            "args": ["-m", "servers.files", "--root", "${WORKSPACE}"],
            "cwd": str(REPO),
            "scope": "session",
            "risk": "medium",
        },
        "counter": {"command": COUNTER[0], "args": COUNTER[1:], "sandbox": {"mode": "per-session", "command": COUNTER}},
    }


def sandboxed_config(root: Path, **settings: Any) -> GatewayConfig:
    """The gateway configuration of these tests, its data under `root`."""
    return make_config(root, sandboxed_servers(), **{"sandbox_image": IMAGE, **settings})


async def approve(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person behind the client, who approves every high-risk call."""
    return types.ElicitResult(action="accept", content={"approve": True})


def containers(client: DockerClient, scope: str) -> dict[str, dict[str, str]]:
    """Our containers of one gateway's scope, running or not: id -> labels."""
    # One listing call: containers removed meanwhile cannot fail a later lookup.
    found = client.api.containers(all=True, filters={"label": scope_filter(scope)})
    return {str(entry["Id"]): dict(entry["Labels"]) for entry in found}


def session_containers(client: DockerClient, scope: str) -> set[str]:
    """The containers of a scope that are not the listing (discovery) container of the counter."""
    return {cid for cid, labels in containers(client, scope).items() if labels.get(LABEL_SESSION) != DISCOVERY}


def text_of(result: types.CallToolResult) -> str:
    """Every text block of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def run(client: Client, code: str, tool: str = "python__run_python") -> types.CallToolResult:
    """One sandboxed snippet through the gateway (its confirmation approved), bounded in time."""
    with anyio.fail_after(WAIT):
        return await client.call_tool(tool, {"code": code})


def stdout_of(result: types.CallToolResult) -> str:
    """What a snippet printed, failing with the whole result when it did not run."""
    assert not result.is_error and result.structured_content is not None, text_of(result)
    stdout: str = result.structured_content["stdout"]
    return stdout


Sandboxed = tuple[Gateway, DockerClient, str]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one gateway serves every test that can share it."""
    return "asyncio"


@pytest.fixture(scope="module")
async def sandboxed(docker_client: DockerClient, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sandboxed]:
    """One gateway over the sandboxed servers; when it closes, none of its containers may remain."""
    # Session containers start on first use here, so that each test sees only its own sessions'
    # (tests/sandbox/test_warm_sessions.py covers those started ahead).
    config = sandboxed_config(tmp_path_factory.mktemp("sandboxed"), sandbox_warm=1, sandbox_session_warm=0)
    scope = sandbox_scope(config.settings)
    async with Gateway(config) as gateway:
        assert {status.name: status.error for status in gateway.servers.statuses()} == dict.fromkeys(
            ("python", "uncapped", "runaway", "files", "counter")
        )
        assert gateway.sandboxes.availability()[0]
        yield gateway, docker_client, scope
    assert containers(docker_client, scope) == {}


@asynccontextmanager
async def session(gateway: Gateway) -> AsyncIterator[Client]:
    """A client session of its own (the handshake era, so it ends when the client disconnects)."""
    async with Client(build_server(gateway), mode="legacy", elicitation_callback=approve) as client:
        yield client


@pytest.fixture
async def client(sandboxed: Sandboxed) -> AsyncIterator[Client]:
    """A fresh session; once it ended, every container it used is gone (only the listing container stays)."""
    gateway, docker_client, scope = sandboxed
    async with session(gateway) as fresh:
        yield fresh
    await poll_until(lambda: not session_containers(docker_client, scope), "the session's containers to go")


PROBE = r"""
import json, os, socket

def attempt(action):
    try:
        action()
    except OSError as error:
        return error.strerror
    return "ok"

def connect():
    socket.create_connection(("192.0.2.1", 80), timeout=2).close()

def write(path):
    return lambda: open(path, "w").write("probe")

print(json.dumps({
    "uid": os.getuid(),
    "network": attempt(connect),
    "root": attempt(write("/escape.txt")),
    "etc": attempt(write("/etc/escape.txt")),
    "usr": attempt(write("/usr/lib/python3.11/escape.py")),
    "tmp": attempt(write("/tmp/scratch.txt")),
    "workspace": attempt(write("/workspace/probe.txt")),
}))
"""


async def test_python_runs_as_nobody_without_network_and_writes_only_to_tmp_and_workspace(
    sandboxed: Sandboxed, client: Client
) -> None:
    gateway, _, _ = sandboxed
    seen = json.loads(stdout_of(await run(client, PROBE)))
    assert seen == {
        "uid": 65534,
        "network": "Network is unreachable",
        "root": "Read-only file system",
        "etc": "Read-only file system",
        "usr": "Read-only file system",
        "tmp": "ok",
        "workspace": "ok",
    }
    [written] = gateway.workspaces.root.rglob("probe.txt")
    assert (written.read_text(), written.stat().st_uid) == ("probe", 65534)
    assert not (REPO / "escape.txt").exists()


async def test_the_session_workspace_is_shared_with_its_files_server_and_hidden_from_other_sessions(
    sandboxed: Sandboxed, client: Client
) -> None:
    gateway, _, _ = sandboxed
    root = gateway.workspaces.root
    code = f"""
import os
open('/workspace/note.txt', 'w').write('from the sandbox')
print(os.path.exists({str(root)!r}))
"""
    assert stdout_of(await run(client, code)) == "False\n"
    read = await client.call_tool("files__read_file", {"path": "note.txt"})
    assert read.structured_content is not None and read.structured_content["content"] == "from the sandbox"
    [on_host] = root.rglob("note.txt")
    assert on_host.parent.parent.parent == root  # <root>/<caller>/<session>/note.txt
    async with session(gateway) as other:
        listed = await other.call_tool("files__list_directory", {"path": "."})
        seen = await run(other, "import os; print(os.listdir('/workspace'), open('/proc/self/mountinfo').read())")
    assert listed.structured_content is not None and listed.structured_content["entries"] == []
    entries, mounts = stdout_of(seen).split(" ", 1)
    assert entries == "[]"
    # The only host directory the other session's container may write is its own, empty workspace.
    assert list(host_writable(mounts)) == ["/workspace"]
    assert on_host.parent.name not in mounts


# Kernel and memory file systems: writable, but no host directory behind them.
VIRTUAL = {"proc", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "sysfs", "overlay"}


def host_writable(mountinfo: str) -> dict[str, str]:
    """Mount point -> source directory of every writable mount that a host disk backs (from /proc/self/mountinfo)."""
    found = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if fields and fields[5].split(",")[0] == "rw" and fields[fields.index("-") + 1] not in VIRTUAL:
            found[fields[4]] = fields[3]
    return found


# Every process forks until a fork is refused (or a second passed), so the bomb ends soon after the limit.
FORK_BOMB = r"""
import os, time
first, failures = os.getpid(), 0
stop = time.monotonic() + 1
while time.monotonic() < stop and not failures:
    try:
        os.fork()
    except OSError:
        failures += 1
if os.getpid() == first:
    print("forks refused:", failures > 0, flush=True)
os._exit(0)
"""


async def test_each_sandbox_run_is_counted_by_outcome_and_timed(sandboxed: Sandboxed, client: Client) -> None:
    gateway, _, _ = sandboxed
    _, before = parse((await gateway.metrics.exposition()).decode())
    assert stdout_of(await run(client, "print('counted')")) == "counted\n"
    _, after = parse((await gateway.metrics.exposition()).decode())
    assert growth(before, after, "gateway_sandbox_runs_total", outcome="ok") == 1
    assert growth(before, after, "gateway_sandbox_run_duration_seconds_count") == 1
    assert growth(before, after, "gateway_sandbox_run_duration_seconds_sum") > 0


async def test_a_fork_bomb_hits_the_process_limit_and_the_gateway_keeps_serving(client: Client) -> None:
    assert stdout_of(await run(client, FORK_BOMB)) == "forks refused: True\n"
    assert stdout_of(await run(client, "print('still here')")) == "still here\n"


async def test_a_memory_hog_is_killed_and_reported(client: Client) -> None:
    result = await run(client, "hog = []\nwhile True:\n    hog.append(bytearray(16 * 2**20))")
    assert result.structured_content is not None, text_of(result)
    assert result.structured_content["exit_code"] == -signal.SIGKILL
    assert "killed by signal Killed (out of memory or another limit)" in text_of(result)
    assert stdout_of(await run(client, "print('still here')")) == "still here\n"


async def test_an_endless_loop_is_killed_at_the_deadline(client: Client) -> None:
    started = time.monotonic()
    result = await run(client, "while True:\n    pass", tool="runaway__run_python")
    elapsed = time.monotonic() - started
    assert result.is_error
    assert f"ran past its {RUNAWAY_DEADLINE:g} s deadline" in text_of(result)
    assert RUNAWAY_DEADLINE <= elapsed < RUNAWAY_DEADLINE + KILL_GRACE


async def test_ten_megabytes_of_output_arrive_cut_to_size(client: Client) -> None:
    result = await run(client, "import sys; sys.stdout.write('x' * 10_000_000)")
    text = text_of(result)
    assert not result.is_error
    assert "more bytes cut" in text  # the runner keeps the head of each stream
    assert "omitted" in text  # the gateway shapes what is left to its result budget
    assert len(text) < 10_000


async def test_a_reply_over_the_sandbox_output_cap_is_an_error_that_says_so(client: Client) -> None:
    result = await run(client, "import sys; sys.stdout.write('x' * 10_000_000)", tool="uncapped__run_python")
    assert result.is_error
    assert "sent a message over" in text_of(result)
    assert len(text_of(result)) < 10_000


async def test_a_per_session_server_keeps_state_per_session_and_its_container_ends_with_it(
    sandboxed: Sandboxed, client: Client
) -> None:
    gateway, docker_client, scope = sandboxed

    async def increment(of: Client) -> str:
        with anyio.fail_after(WAIT):
            return text_of(await of.call_tool("counter__increment", {}))

    assert [await increment(client) for _ in range(3)] == ["1", "2", "3"]
    [first] = session_containers(docker_client, scope)
    async with session(gateway) as other:
        assert await increment(other) == "1"
        assert len(session_containers(docker_client, scope) - {first}) == 1
    assert await increment(client) == "4"
    await poll_until(lambda: session_containers(docker_client, scope) == {first}, "the other session's container to go")
    assert containers(docker_client, scope)[first][LABEL_SESSION].endswith("/counter")


async def test_without_the_image_nothing_runs_and_the_call_is_refused_clearly(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config = sandboxed_config(tmp_path, sandbox_image="mcp-gateway-sandbox:absent")
    evidence = tmp_path / "ran-on-the-host"
    async with Gateway(config) as gateway, session(gateway) as client:
        ready, reason = gateway.sandboxes.availability()
        result = await run(client, f"open({str(evidence)!r}, 'w').write('escaped')")
        listed = {tool.name for tool in (await client.list_tools()).tools}
        counter = {status.name: status.state.value for status in gateway.servers.statuses()}["counter"]
    assert not ready
    assert reason == "sandbox image mcp-gateway-sandbox:absent is missing: run `python -m gateway sandbox build`"
    assert result.is_error
    assert "runs only in a Docker sandbox" in text_of(result)
    assert "mcp-gateway-sandbox:absent is missing" in text_of(result)
    assert not evidence.exists()
    # The per-session server is never started on the host instead, not even to list its tools.
    assert counter != "ready"
    assert not any(name.startswith("counter__") for name in listed)
    assert containers(docker_client, sandbox_scope(config.settings)) == {}


CRASH = "import sys\nfor n in range(5):\n    print(f'line {n}', file=sys.stderr)\nsys.exit(3)\n"


async def test_a_sandboxed_server_that_fails_shows_admins_its_last_lines_of_stderr_and_its_log(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    crashing = ["python3", "-c", CRASH]
    servers = {"crashing": {"command": "python3", "args": crashing[1:], "sandbox": {"command": crashing}}}
    config = make_config(tmp_path, servers, sandbox_image=IMAGE)

    def error(gateway: Gateway) -> str:
        return gateway.servers.statuses()[0].error or ""

    async with Gateway(config) as gateway:
        with logged(level=logging.WARNING) as warned:
            await warned.until(lambda line: line.startswith("upstream crashing:") and "stderr" in line, "its failure")
        shown = error(gateway)
    log = tmp_path / "data" / "logs" / "crashing.log"
    assert f"(stderr: line 2 | line 3 | line 4; full log: {log})" in shown
    assert "line 0\nline 1\nline 2\nline 3\nline 4\n" in log.read_text()
    assert containers(docker_client, sandbox_scope(config.settings)) == {}


def stdio_gateway(config_file: Path, pid_file: Path) -> Client:
    """`python -m gateway stdio` as a real child process that writes its pid (exec keeps it)."""
    command = 'echo $$ > "$1" && exec "$2" -m gateway stdio --config "$3"'
    parameters = StdioServerParameters(
        command="sh", args=["-c", command, "sh", str(pid_file), sys.executable, str(config_file)], cwd=str(REPO)
    )
    return Client(parameters, mode="legacy", elicitation_callback=approve)


async def test_containers_of_a_killed_gateway_are_removed_when_it_restarts(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config_file, pid_file = tmp_path / "gateway.yaml", tmp_path / "gateway.pid"
    settings = {"data_dir": str(tmp_path / "data"), "sandbox_warm": 2, "sandbox_image": IMAGE}
    servers = {name: entry for name, entry in sandboxed_servers().items() if name in ("python", "counter")}
    config_file.write_text(yaml.safe_dump({"gateway": settings, "servers": servers}))
    scope = sandbox_scope(load_config(config_file).settings)
    # The listing container, this session's counter, two warm containers for its next call, and,
    # each on a spare workspace for the next session, a counter and a run_python with its two warm ones.
    held = 8
    async with stdio_gateway(config_file, pid_file) as client:
        await until_listed(client, "python__run_python")
        await until_listed(client, "counter__increment")
        assert stdout_of(await run(client, "print(6 * 7)")) == "42\n"
        with anyio.fail_after(WAIT):
            assert text_of(await client.call_tool("counter__increment", {})) == "1"
        await poll_until(lambda: len(_running(docker_client, scope)) == held, f"{held} running containers")
        old = set(containers(docker_client, scope))
        spare_dir = tmp_path / "data" / "workspaces" / SPARES
        old_spares = {path for path in spare_dir.iterdir() if path.is_dir()}
        assert len(old_spares) == 2
        os.kill(int(pid_file.read_text()), signal.SIGKILL)  # no cleanup code of the gateway runs
    assert set(containers(docker_client, scope)) >= old
    async with stdio_gateway(config_file, pid_file) as client:
        assert not set(containers(docker_client, scope)) & old
        assert not any(path.exists() for path in old_spares)
        await until_listed(client, "python__run_python")
        assert stdout_of(await run(client, "print(6 * 7)")) == "42\n"
    await poll_until(lambda: not containers(docker_client, scope), "every container to go")


async def test_a_stdio_gateway_ended_by_sigterm_removes_its_containers_and_spare_workspaces_before_it_exits(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config_file, pid_file = tmp_path / "gateway.yaml", tmp_path / "gateway.pid"
    settings = {"data_dir": str(tmp_path / "data"), "sandbox_image": IMAGE}
    servers = {name: entry for name, entry in sandboxed_servers().items() if name == "counter"}
    config_file.write_text(yaml.safe_dump({"gateway": settings, "servers": servers}))
    scope = sandbox_scope(load_config(config_file).settings)
    workspaces = tmp_path / "data" / "workspaces"
    async with stdio_gateway(config_file, pid_file) as client:
        await until_listed(client, "counter__increment")
        with anyio.fail_after(WAIT):
            assert text_of(await client.call_tool("counter__increment", {})) == "1"
        # A counter started ahead, on a spare workspace, for the next session.
        await poll_until(lambda: any((workspaces / SPARES).glob("*/")), "a spare workspace")
        pid = int(pid_file.read_text())
        # As a client stops a stdio server it launched, stdin left open: only the signal.
        os.kill(pid, signal.SIGTERM)
        await poll_until(lambda: _ended(pid), "the gateway to exit")
    assert not containers(docker_client, scope)
    assert not mounted_under(workspaces) and not any((workspaces / SPARES).glob("*/"))


def _ended(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie its parent has not reaped yet counts)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def _running(client: DockerClient, scope: str) -> list[str]:
    """Ids of the scope's running containers."""
    found = client.api.containers(filters={"label": scope_filter(scope), "status": "running"})
    return [str(entry["Id"]) for entry in found]


async def test_an_inspecting_gateway_leaves_the_containers_of_a_serving_one_alone(
    sandboxed: Sandboxed, client: Client
) -> None:
    gateway, docker_client, scope = sandboxed
    with anyio.fail_after(WAIT):
        assert text_of(await client.call_tool("counter__increment", {})) == "1"
    serving = session_containers(docker_client, scope)
    assert serving
    # What `python -m gateway check` and `catalog` do: start on the same configuration, only to look.
    async with Gateway(gateway.config, serving=False) as inspecting:
        assert inspecting.sandboxes.availability()[0]
    assert session_containers(docker_client, scope) >= serving
    with anyio.fail_after(WAIT):
        assert text_of(await client.call_tool("counter__increment", {})) == "2"
