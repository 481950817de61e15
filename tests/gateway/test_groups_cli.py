"""Tool groups on the command line: `stdio --group` in a real process, and `client-config` snippets
read back by the gateway's own client-file reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from gateway.config.loading import parse_config
from gateway.stores import StoreSettings
from gateway.stores.registrations import RegistrationStore
from tests.support.harness import REPO, run_cli, toy_stdio, until_listed

GROUPS = {"adding": {"allow": ["toy__add", "toy__echo"]}}


def write_config(tmp_path: Path) -> Path:
    """A gateway file with one toy stdio server and the group `adding`."""
    path = tmp_path / "gateway.yaml"
    data = {"gateway": {"data_dir": str(tmp_path / "data")}, "servers": {"toy": toy_stdio()}, "groups": GROUPS}
    path.write_text(yaml.safe_dump(data))
    return path


def stdio_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gateway", "--log-level", "WARNING", "stdio", "--config", str(config), *extra]


@pytest.mark.anyio
@pytest.mark.parametrize("group", ["adding", "stored"])
async def test_stdio_with_a_group_serves_only_that_group_s_tools(tmp_path: Path, group: str) -> None:
    config = write_config(tmp_path)
    (tmp_path / "data").mkdir()
    store = RegistrationStore.open(StoreSettings(), tmp_path / "data")
    store.save("group", "stored", {"allow": ["toy__add", "toy__echo"]})
    store.close()
    command = stdio_command(config, "--group", group)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            await until_listed(client, "toy__add")
            names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
            assert {"toy__add", "toy__echo"} <= names
            assert not {"toy__increment", "toy__calls"} & names
            with pytest.raises(MCPError, match="Unknown tool: 'toy__increment'"):
                await client.call_tool("toy__increment", {})


def test_stdio_with_an_unknown_group_exits_2_naming_the_groups(tmp_path: Path) -> None:
    done = subprocess.run(
        stdio_command(write_config(tmp_path), "--group", "nope"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "no group 'nope'" in done.stderr and "adding" in done.stderr


def read_back(tmp_path: Path, snippet: str) -> Any:
    """The one server the gateway's client-file reader finds in a snippet."""
    config = parse_config(json.loads(snippet), source="snippet", base_dir=tmp_path)
    [server] = config.servers
    return server


@pytest.mark.parametrize("client", ["claude-code", "vscode", "cursor"])
@pytest.mark.parametrize(("group", "path"), [(None, "/mcp"), ("adding", "/mcp/g/adding")])
def test_client_config_over_http_reads_back_as_the_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], client: str, group: str | None, path: str
) -> None:
    args = ["client-config", "--client", client, "--url", "https://gw.example:8443/"]
    code, out, _ = run_cli(capsys, *args, *(["--group", group] if group else []))
    server = read_back(tmp_path, out)
    assert code == 0
    assert (server.transport, server.url) == ("http", f"https://gw.example:8443{path}")
    assert server.name == ("gateway" if group is None else f"gateway-{group}")


@pytest.mark.parametrize("client", ["claude-desktop", "claude-code", "vscode", "cursor"])
def test_client_config_over_stdio_reads_back_as_the_gateway_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], client: str
) -> None:
    config = write_config(tmp_path)
    stdio = [] if client == "claude-desktop" else ["--stdio"]
    code, out, _ = run_cli(
        capsys, "client-config", "--config", str(config), "--client", client, "--group", "adding", *stdio
    )
    server = read_back(tmp_path, out)
    assert code == 0
    assert server.transport == "stdio"
    assert [server.command, *server.args] == [
        sys.executable,
        "-m",
        "gateway",
        "stdio",
        "--config",
        str(config),
        "--group",
        "adding",
    ]


def test_client_config_without_options_is_claude_desktop_s_stdio_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "client-config")
    server = read_back(tmp_path, out)
    assert (code, server.name, [server.command, *server.args]) == (
        0,
        "gateway",
        [sys.executable, "-m", "gateway", "stdio"],
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--client", "claude-desktop", "--url", "http://127.0.0.1:8000"], "leave out --url"),
        (["--stdio", "--group", "nope"], "no group 'nope'"),
    ],
)
def test_client_config_refuses_what_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, "client-config", "--config", str(write_config(tmp_path)), *args)
    assert (code, out) == (2, "")
    assert message in err
