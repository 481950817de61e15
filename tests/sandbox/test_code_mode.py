"""Code mode through a real gateway and real Docker: a script calls the caller's tools as the `tools`
package, and every call it makes passes the gateway's pipeline."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from docker import DockerClient
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError

from gateway.auth.identity import Identity
from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.pipeline.approvals import Status
from gateway.sandbox.sandboxes import sandbox_scope
from gateway.service import Gateway
from tests.sandbox.conftest import IMAGE, WAIT
from tests.sandbox.test_gateway_sandbox import approve, containers, text_of
from tests.support.access import CALLERS, KEYS, access_config, http_client
from tests.support.harness import REPO, http_gateway, make_config
from tests.support.skills import write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

# A script's deadline here: short, so that the runaway script's test waits little.
DEADLINE = 8.0
ANALYST = Identity("alice", "analyst", "stdio")


def code_mode_config(root: Path) -> GatewayConfig:
    """Three host servers (calc, echo, sqlite) and the files server per session; roles that differ
    in what they see, their budget and code mode; one extended tool, carried by the skill `schema`."""
    python = {"command": sys.executable, "cwd": str(REPO)}
    servers: dict[str, Any] = {
        "calc": {**python, "args": ["-m", "servers.calc"]},
        "echo": {**python, "args": ["-m", "servers.echo"]},
        "sqlite": {
            **python,
            "args": ["-m", "servers.sqlite", "--database", str(root / "shop.db")],
            "tools": {"describe_table": {"layer": "extended"}},
        },
        "files": {**python, "args": ["-m", "servers.files", "--root", "${WORKSPACE}"], "scope": "session"},
    }
    everything = {"allow": ["*"], "deny": ["files__delete_file"]}
    roles = {
        "analyst": everything,
        "metered": {**everything, "budget": {"max_calls_per_session": 3}},
        "plain": {**everything, "code_mode": False},
    }
    write_skill(root / "skills", "schema", "sqlite__describe_table")
    return make_config(
        root,
        servers,
        sections={"roles": roles},
        skill_dirs=[str(root / "skills")],
        sandbox_image=IMAGE,
        sandbox_warm=1,
        sandbox_session_warm=0,
        code_mode=True,
        code_mode_deadline=DEADLINE,
        stdio_caller="alice",
        stdio_role="analyst",
    )


Running = tuple[Gateway, DockerClient, str]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one gateway serves every test."""
    return "asyncio"


@pytest.fixture(scope="module")
async def running(docker_client: DockerClient, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    """One gateway in code mode; when it closes, none of its containers may remain."""
    config = code_mode_config(tmp_path_factory.mktemp("codemode"))
    scope = sandbox_scope(config.settings)
    async with Gateway(config) as gateway:
        # Every server listed before the first script, whose stubs are made from what is listed.
        await gateway.wait_for_upstreams(gateway.upstreams.values())
        assert gateway.sandboxes.availability()[0]
        yield gateway, docker_client, scope
    assert containers(docker_client, scope) == {}


@pytest.fixture
def gateway(running: Running) -> Iterator[Gateway]:
    """The gateway, its local client back to the analyst after each test."""
    yield running[0]
    running[0].local_identity = ANALYST


async def decline(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person behind the client, who declines every high-risk call."""
    return types.ElicitResult(action="decline")


@asynccontextmanager
async def session(
    gateway: Gateway, role: str = "analyst", *, asks: bool = True, callback: Any = approve
) -> AsyncIterator[Client]:
    """A client session with `role`; one whose client `asks` its user answers with `callback`."""
    gateway.local_identity = Identity("alice", role, "stdio")
    async with Client(build_server(gateway), mode="legacy", elicitation_callback=callback if asks else None) as client:
        yield client


async def run_code(client: Client, code: str) -> types.CallToolResult:
    """One Run_Code call, bounded in time."""
    with anyio.fail_after(WAIT):
        return await client.call_tool("Run_Code", {"code": code})


async def audit_rows(gateway: Gateway, limit: int = 50) -> list[Any]:
    """The newest audit rows, oldest first."""
    return list(reversed(await gateway.audit.recent(limit=limit)))


THREE_SERVERS = """
from tools import calc, echo, sqlite
sqlite.execute(sql="CREATE TABLE IF NOT EXISTS item (name TEXT, price REAL)")
sqlite.execute(sql="DELETE FROM item")
for name, price in [("pen", 1.5), ("ink", 4.0), ("pad", 2.5)]:
    sqlite.execute(sql="INSERT INTO item VALUES (?, ?)", params=[name, price])
rows = sqlite.query(sql="SELECT name, price FROM item ORDER BY price")["rows"]
total = calc.evaluate(expression=" + ".join(str(row[1]) for row in rows))
print(echo.echo(text=f"{len(rows)} items"))
{"total": total, "cheapest": rows[0][0]}
"""


async def test_a_script_calls_tools_of_three_servers_and_only_its_output_returns(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(client, THREE_SERVERS)
    assert not result.is_error, text_of(result)
    printed, value = text_of(result).rsplit("\n", 1)
    assert printed == "3 items"
    assert json.loads(value)["cheapest"] == "pen"
    assert "8" in json.dumps(json.loads(value)["total"])


async def test_every_inner_call_is_audited_under_the_scripts_request_id(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(
            client, "from tools import calc, echo\ncalc.evaluate(expression='6*7')\necho.echo(text='x')"
        )
    assert not result.is_error, text_of(result)
    rows = await audit_rows(gateway, 3)
    outer = rows[-1]
    assert outer.tool == "Run_Code" and outer.outcome == "ok" and outer.parent_request_id == ""
    children = rows[:-1]
    assert [row.tool for row in children] == ["calc__evaluate", "echo__echo"]
    assert {row.parent_request_id for row in children} == {outer.request_id}
    assert {(row.caller, row.session) for row in children} == {(outer.caller, outer.session)}
    assert len({row.request_id for row in rows}) == 3


async def test_stubs_are_typed_functions_with_the_tools_descriptions(gateway: Gateway) -> None:
    code = (
        "import inspect, tools\n"
        "from tools import sqlite\n"
        "print(tools.__doc__)\n"
        "print(inspect.signature(sqlite.query))\n"
        "returned = sqlite.query.__annotations__['return']\n"
        "print(sorted(returned.__required_keys__), returned.__annotations__['row_count'].__name__)\n"
        "print(type(sqlite.query(sql='SELECT 1')))\n"
        "try:\n"
        "    tools.call('Run_Code', {'code': '1'})\n"
        "except tools.ToolRefused as error:\n"
        "    print(error)\n"
        "sqlite.query.__doc__"
    )
    async with session(gateway) as client:
        text = text_of(await run_code(client, code))
    assert "tools.calc:" in text and "  evaluate(): " in text
    assert (
        "(sql: str, *, params: list[typing.Any] | dict[str, typing.Any] | None = None) -> tools.sqlite.QueryResult"
        in text
    )
    assert "['columns', 'row_count', 'rows', 'truncated', 'truncated_by'] int" in text
    assert "<class 'dict'>" in text
    assert "No tool named 'Run_Code'" in text
    assert "Tool: sqlite__query" in text


async def test_a_hidden_tool_is_unknown_inside_a_script(gateway: Gateway) -> None:
    code = (
        "import tools\n"
        "print(hasattr(tools.files, 'delete_file'), hasattr(tools.files, 'read_file'))\n"
        "try:\n"
        "    tools.call('files__delete_file', {'path': 'x'})\n"
        "except tools.ToolRefused as error:\n"
        "    print(error)\n"
        "try:\n"
        "    tools.call('files__nothing_like_it', {})\n"
        "except tools.ToolRefused as error:\n"
        "    print(error)\n"
    )
    async with session(gateway) as client:
        text = text_of(await run_code(client, code))
    assert text.splitlines() == [
        "False True",
        "No tool named 'files__delete_file'",
        "No tool named 'files__nothing_like_it'",
    ]
    rows = await audit_rows(gateway, 3)
    assert [(row.tool, row.outcome) for row in rows[:2]] == [
        ("files__delete_file", "unknown_tool"),
        ("files__nothing_like_it", "unknown_tool"),
    ]


ESCAPE = r"""
import json, os, socket
def attempt(action):
    try:
        return action()
    except OSError as error:
        return error.strerror
def connect():
    socket.create_connection(("192.0.2.1", 80), timeout=2).close()
    return "connected"
def listing(path):
    return lambda: sorted(os.listdir(path))
mounts = [line.split()[1] for line in open("/proc/self/mounts")]
found = {
    "uid": os.getuid(),
    "network": attempt(connect),
    "workspace": os.path.exists("/workspace"),
    "data": attempt(listing(DATA)),
    "workspaces": attempt(listing(WORKSPACES)),
    "mounts": [point for point in mounts if point.startswith(("/workspace", DATA))],
}
json.dumps(found)
"""


async def test_a_script_reaches_neither_the_network_nor_the_gateways_files_nor_any_workspace(
    gateway: Gateway,
) -> None:
    data = gateway.data_dir
    async with session(gateway) as client:
        # The session's files server made its workspace: there is one on the host to look for.
        await client.call_tool("files__write_file", {"path": "mine.txt", "content": "secret"})
        code = f"DATA = {str(data)!r}\nWORKSPACES = {str(data / 'workspaces')!r}\n" + ESCAPE
        result = await run_code(client, code)
    found = json.loads(text_of(result))
    assert found == {
        "uid": 65534 if found["uid"] == 65534 else found["uid"],
        "network": "Network is unreachable",
        "workspace": False,
        "data": "No such file or directory",
        "workspaces": "No such file or directory",
        "mounts": [],
    }
    assert found["uid"] != 0


async def test_the_channel_carries_tool_calls_and_nothing_else(gateway: Gateway) -> None:
    # The runner's end of the channel is the first descriptor it duplicated (3); a script may find it.
    code = 'import os\nos.write(3, b\'{"read": "/data"}\\n\')\nimport time\ntime.sleep(30)\n'
    async with session(gateway) as client:
        result = await run_code(client, code)
    assert result.is_error
    assert text_of(result).splitlines()[0] == "The script's runner sent something the gateway does not understand"


async def test_a_syntax_error_names_the_scripts_line(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(client, "x = 1\nprint(x +)\n")
    assert result.is_error
    assert text_of(result).splitlines()[0] == "The script has a syntax error at line 2: invalid syntax: print(x +)"


async def test_an_exception_names_the_scripts_line_and_no_frame_of_the_gateway(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(client, "print('before')\ndef half(n):\n    return n / 0\nhalf(4)\n")
    text = text_of(result)
    assert result.is_error
    assert text.splitlines()[:3] == [
        "The script raised an exception at line 3: return n / 0: ZeroDivisionError: division by zero",
        "It printed before that:",
        "before",
    ]
    assert "Traceback" not in text and "gateway/" not in text and "scriptrunner" not in text


async def test_a_tool_error_inside_a_script_names_the_line_and_the_tools_error(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(client, "from tools import calc\ncalc.evaluate(expression='1/0')\n")
    text = text_of(result)
    assert result.is_error
    first = text.splitlines()[0]
    assert first.startswith("A tool call failed at line 2: calc.evaluate(expression='1/0'): ToolError: ")
    assert "zero" in first.lower()


async def test_sys_exit_ends_a_script_early_with_what_it_printed(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(client, "import sys\nprint('enough')\nsys.exit(3)\nprint('never')\n")
    assert not result.is_error and text_of(result) == "enough"


async def test_a_script_past_its_deadline_is_stopped_with_a_short_message(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(client, "from tools import echo\necho.echo(text='once')\nwhile True:\n    pass\n")
        after = await run_code(client, "1 + 1")
    assert result.is_error
    assert text_of(result).splitlines()[0] == (
        f"The script ran past its {DEADLINE:g} s deadline and was stopped after 1 tool calls"
    )
    assert text_of(after) == "2"


async def test_the_loop_limit_trips_inside_a_script(gateway: Gateway) -> None:
    code = (
        "import tools\n"
        "for n in range(10):\n"
        "    try:\n"
        "        tools.echo.echo(text='same')\n"
        "    except tools.ToolRefused as error:\n"
        "        print(n, str(error).splitlines()[0])\n"
        "        break\n"
    )
    async with session(gateway) as client:
        text = text_of(await run_code(client, code))
    number, message = text.split(" ", 1)
    assert int(number) + 1 == gateway.config.settings.loop_repeat_limit
    assert message.startswith("Refused: this is the same call to 'echo__echo'")


async def test_the_roles_budget_trips_inside_a_script(gateway: Gateway) -> None:
    code = (
        "import tools\n"
        "done = 0\n"
        "try:\n"
        "    for n in range(10):\n"
        "        tools.calc.evaluate(expression=f'{n}+1')\n"
        "        done += 1\n"
        "except tools.ToolRefused as error:\n"
        "    print(done, type(error).__name__)\n"
    )
    async with session(gateway, "metered") as client:
        text = text_of(await run_code(client, code))
    assert text == "3 ToolRefused"
    rows = await audit_rows(gateway, 5)
    assert [row.outcome for row in rows[-5:-1]] == ["ok", "ok", "ok", "refused:budget"]


async def test_a_high_risk_call_in_a_script_asks_the_clients_user_and_a_decline_stops_only_that_call(
    gateway: Gateway,
) -> None:
    code = (
        "import tools\n"
        "try:\n"
        "    tools.sqlite.execute(sql='DROP TABLE IF EXISTS item')\n"
        "except tools.ToolRefused as error:\n"
        "    print(str(error).splitlines()[0])\n"
        "tools.echo.echo(text='after')\n"
    )
    async with session(gateway, callback=decline) as client:
        text = text_of(await run_code(client, code))
    assert text.splitlines() == ["The user declined the call to 'sqlite__execute'; it did not run.", "after"]
    rows = await audit_rows(gateway, 3)
    assert [(row.tool, row.outcome) for row in rows] == [
        ("sqlite__execute", "refused:declined"),
        ("echo__echo", "ok"),
        ("Run_Code", "ok"),
    ]


async def test_a_high_risk_call_in_a_script_is_parked_then_runs_once_after_approval(gateway: Gateway) -> None:
    code = (
        "import tools\n"
        "try:\n"
        "    tools.sqlite.execute(sql='CREATE TABLE IF NOT EXISTS parked (n INTEGER)')\n"
        "    print('ran')\n"
        "except tools.ToolError as error:\n"
        "    print(str(error).splitlines()[0])\n"
    )
    async with session(gateway, asks=False) as client:
        first = text_of(await run_code(client, code))
        assert first.startswith("Waiting for approval ")
        approval_id = first.split()[3].rstrip(":")
        assert gateway.approvals.get(approval_id) is not None
        gateway.approvals.decide(approval_id, True, "a person")
        second = text_of(await run_code(client, code))
        third = text_of(await run_code(client, code))
    assert second == "ran"
    assert third.startswith("Waiting for approval ") and approval_id not in third
    used = gateway.approvals.get(approval_id)
    assert used is not None and used.status == Status.USED
    rows = list(reversed(await gateway.audit.recent(limit=3, tool="sqlite__execute")))
    assert [row.outcome for row in rows] == ["refused:awaiting_approval", "ok", "refused:awaiting_approval"]


async def test_a_skills_extended_tool_is_refused_in_a_script_until_the_skill_is_loaded(gateway: Gateway) -> None:
    code = (
        "import tools\n"
        "tools.sqlite.execute(sql='CREATE TABLE IF NOT EXISTS item (name TEXT, price REAL)')\n"
        "try:\n"
        "    print([column['name'] for column in tools.sqlite.describe_table(table='item')['columns']])\n"
        "except tools.ToolRefused as error:\n"
        "    print(str(error).splitlines()[0])\n"
    )
    async with session(gateway) as client:
        before = text_of(await run_code(client, code))
        with anyio.fail_after(WAIT):
            loaded = await client.call_tool("Load_Skill", {"name": "schema"})
        assert not loaded.is_error, text_of(loaded)
        after = text_of(await run_code(client, code))
    assert "belongs to the skill schema, which is not active" in before
    assert after == "['name', 'price']"


async def test_a_script_killed_inside_its_container_ends_with_a_short_message(gateway: Gateway) -> None:
    async with session(gateway) as client:
        result = await run_code(client, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert result.is_error
    assert text_of(result).splitlines()[0] == (
        "The script's process ended without a result: it was killed, most likely by the sandbox's memory or "
        "process limit"
    )


async def test_a_role_with_code_mode_off_neither_lists_nor_runs_code(gateway: Gateway) -> None:
    async with session(gateway, "plain") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        with anyio.fail_after(WAIT), pytest.raises(MCPError, match="Unknown tool: 'Run_Code'"):
            await client.call_tool("Run_Code", {"code": "1"})
    assert "Run_Code" not in names and "calc__evaluate" in names
    async with session(gateway) as client:
        assert "Run_Code" in {tool.name for tool in (await client.list_tools()).tools}


async def test_over_http_in_both_eras_a_script_runs_as_the_authenticated_caller(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    python = {"command": sys.executable, "cwd": str(REPO)}
    servers = {"calc": {**python, "args": ["-m", "servers.calc"]}, "echo": {**python, "args": ["-m", "servers.echo"]}}
    roles = {
        "admin": {"allow": ["*"]},
        "analyst": {"allow": ["*"]},
        "intern": {"allow": ["calc__*"], "code_mode": False},
    }
    config = access_config(tmp_path, servers, roles=roles, sandbox_image=IMAGE, sandbox_warm=1, code_mode=True)
    code = (
        "from tools import calc, echo\n"
        "help(calc.evaluate)\n"
        "echo.echo(text=str(calc.evaluate(expression='6*7')['result']))"
    )
    async with http_gateway(config) as (gateway, url):
        for mode in ("legacy", "2026-07-28"):
            async with http_client(url, KEYS["analyst"], mode=mode) as client:
                with anyio.fail_after(WAIT):
                    result = await client.call_tool("Run_Code", {"code": code})
            text = text_of(result)
            assert not result.is_error, text
            assert "evaluate(expression: str) -> tools.calc.EvaluateResult" in text and "Tool: calc__evaluate" in text
            assert text.endswith("\n42")
            rows = await audit_rows(gateway, 3)
            assert [row.tool for row in rows] == ["calc__evaluate", "echo__echo", "Run_Code"]
            assert {row.caller for row in rows} == {f"api_key:{CALLERS['analyst']}"}
            assert {row.parent_request_id for row in rows[:2]} == {rows[2].request_id}
            async with http_client(url, KEYS["intern"], mode=mode) as client:
                assert "Run_Code" not in {tool.name for tool in (await client.list_tools()).tools}
    assert containers(docker_client, sandbox_scope(config.settings)) == {}
