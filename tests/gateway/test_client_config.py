"""`client-config` and the web page's Connect snippets connect when authentication and roles are on:
each client's snippet sends the key as that client's own reference to it, never the key, and the
stdio command carries the caller and role."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from tests.support.access import CALLERS, KEYS, ROLES, access_config, auth_section, http_client, toy_entry
from tests.support.harness import REPO, http_gateway, in_memory, run_cli, toy_stdio, until_listed
from tests.support.toy import build_server as toy
from tests.support.webclient import web_client

ANALYST = KEYS["analyst"]
# How each client fills in the reference its snippet holds: its environment, or a prompted input.
FILLED_IN = {
    "claude-code": ("${GATEWAY_API_KEY}", ANALYST),
    "cursor": ("${env:GATEWAY_API_KEY}", ANALYST),
    "vscode": ("${input:gateway-api-key}", ANALYST),
}


def write_config(tmp_path: Path, *, auth: bool) -> Path:
    """A gateway file with roles, a toy stdio server, and API keys when `auth`."""
    data: dict[str, Any] = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "servers": {"toy": toy_stdio()},
        "roles": ROLES,
    }
    if auth:
        data["auth"] = auth_section()
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def header_of(client: str, snippet: dict[str, Any]) -> str:
    """The Authorization header `client` sends for its snippet, the key filled in as it fills it in."""
    servers = snippet["servers" if client == "vscode" else "mcpServers"]
    [server] = servers.values()
    reference, key = FILLED_IN[client]
    header: str = server["headers"]["Authorization"]
    assert header == f"Bearer {reference}"
    if client == "vscode":
        # VS Code asks for the input once, masked, and keeps it encrypted.
        assert snippet["inputs"] == [
            {"type": "promptString", "id": "gateway-api-key", "description": "MCP gateway API key", "password": True}
        ]
    return header.replace(reference, key)


async def lists_toy_tools(url: str, header: str) -> set[str]:
    """The tools a client sending the header `header` to the gateway at `url` is offered."""
    scheme, token = header.split(" ", 1)
    assert scheme == "Bearer"
    async with http_client(url, token) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["claude-code", "vscode", "cursor"])
async def test_client_config_over_http_with_auth_on_sends_the_key_by_the_client_s_own_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], client: str
) -> None:
    config_path = write_config(tmp_path, auth=True)
    config = access_config(tmp_path, {"toy": toy_entry()})
    async with http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url):
        code, out, _ = run_cli(capsys, "client-config", "--config", str(config_path), "--client", client, "--url", url)
        assert code == 0 and ANALYST not in out
        snippet = json.loads(out)
        with anyio.fail_after(60):
            assert "toy__echo" in await lists_toy_tools(url, header_of(client, snippet))


def test_client_config_over_stdio_with_roles_and_no_role_is_refused_naming_the_roles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "client-config", "--config", str(write_config(tmp_path, auth=True)))
    assert (code, out) == (2, "")
    assert "has roles (admin, analyst, intern)" in err and "give --role" in err


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["claude-desktop", "claude-code", "vscode", "cursor"])
async def test_client_config_over_stdio_launches_the_gateway_as_the_given_caller_and_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], client: str
) -> None:
    config = write_config(tmp_path, auth=True)
    stdio = [] if client == "claude-desktop" else ["--stdio"]
    args = ["--config", str(config), "--client", client, *stdio, "--caller", "ann", "--role", "intern"]
    code, out, _ = run_cli(capsys, "client-config", *args)
    assert code == 0
    [server] = json.loads(out)["servers" if client == "vscode" else "mcpServers"].values()
    assert server["args"][-4:] == ["--caller", "ann", "--role", "intern"]
    if client != "claude-desktop":
        return
    # Launched as the client launches it, the gateway offers the role's tools, not only the meta-tools.
    params = StdioServerParameters(command=server["command"], args=server["args"], cwd=str(REPO))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as mcp:
            await until_listed(mcp, "toy__echo")
            names = {tool.name for tool in (await mcp.list_tools(cache_mode="refresh")).tools}
    assert {"toy__echo", "toy__add"} <= names and "toy__increment" not in names


@pytest.mark.anyio
async def test_the_connect_page_s_snippets_carry_the_key_reference_and_the_reader_s_role(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()})
    async with (
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url),
        web_client(url) as page,
    ):
        await page.sign_in(ANALYST)
        text = html.unescape((await page.get("/connect")).text)
        snippets = [json.loads(block) for block in re.findall(r'<pre id="snippet-1-\d">(.*?)</pre>', text, re.S)]
        assert ANALYST not in text
        by_client = {
            "claude-desktop": snippets[0],
            "claude-code": snippets[1],
            "vscode": snippets[2],
            "cursor": snippets[3],
        }
        [stdio] = by_client["claude-desktop"]["mcpServers"].values()
        assert stdio["args"][-4:] == ["--caller", CALLERS["analyst"], "--role", "analyst"]
        with anyio.fail_after(60):
            for client in ("claude-code", "vscode", "cursor"):
                assert "toy__echo" in await lists_toy_tools(url, header_of(client, by_client[client]))
