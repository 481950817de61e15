"""Code mode over stdio: a real `python -m gateway stdio` process, reached by the SDK client over its
stdin and stdout, runs a script whose tool calls the audit trail files under the script's call."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
import yaml
from docker import DockerClient

from gateway.config.loading import load_config
from gateway.sandbox.sandboxes import sandbox_scope
from tests.sandbox.conftest import IMAGE, WAIT
from tests.sandbox.test_gateway_sandbox import containers, stdio_gateway, text_of
from tests.support.harness import REPO, until_listed
from tests.support.waiting import poll_until

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

SCRIPT = """
from tools import calc, echo
answer = calc.evaluate(expression='6*7')
print(calc.evaluate.__annotations__['return'].__name__, sorted(answer))
echo.echo(text=f"answer {answer['result']}")
"""


async def test_over_stdio_a_script_calls_two_tools_and_the_audit_names_its_run_code_call_as_their_parent(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config_file, pid_file = tmp_path / "gateway.yaml", tmp_path / "gateway.pid"
    python = {"command": sys.executable, "cwd": str(REPO)}
    servers = {"calc": {**python, "args": ["-m", "servers.calc"]}, "echo": {**python, "args": ["-m", "servers.echo"]}}
    settings = {"data_dir": str(tmp_path / "data"), "sandbox_image": IMAGE, "sandbox_warm": 1, "code_mode": True}
    config_file.write_text(yaml.safe_dump({"gateway": settings, "servers": servers}))
    scope = sandbox_scope(load_config(config_file).settings)
    async with stdio_gateway(config_file, pid_file) as client:
        # The stubs are made from what is listed: both servers first.
        await until_listed(client, "calc__evaluate")
        await until_listed(client, "echo__echo")
        with anyio.fail_after(WAIT):
            result = await client.call_tool("Run_Code", {"code": SCRIPT})
    text = text_of(result)
    assert not result.is_error, text
    assert text == "EvaluateResult ['result']\nanswer 42"

    with anyio.fail_after(WAIT):
        listing = await anyio.run_process(
            [sys.executable, "-m", "gateway", "audit", "--config", str(config_file), "--limit", "3"], cwd=REPO
        )
    rows = {}
    for line in listing.stdout.decode().splitlines():
        fields = line.split()
        after = fields.index("ms")
        tool = next(field for field in fields if field in ("Run_Code", "calc__evaluate", "echo__echo"))
        rows[tool] = (fields[after + 1], fields[after + 2])
    assert set(rows) == {"Run_Code", "calc__evaluate", "echo__echo"}
    script_id, script_parent = rows["Run_Code"]
    assert script_parent == "-" and script_id != "-"
    assert rows["calc__evaluate"][1] == rows["echo__echo"][1] == script_id
    assert rows["calc__evaluate"][0] != rows["echo__echo"][0]
    await poll_until(lambda: not containers(docker_client, scope), "every container of the gateway to go")
