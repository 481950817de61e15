"""The command line as a person runs it, each command a process of its own: actions posted without a
body, no line logged per request, `sandbox build` behind the global options, help that says where a
command goes, and `check` on a disabled server; and the admin API's bodyless actions, which a
cross-site form still cannot send."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from mcp import Client

from gateway.config.loading import parse_config
from tests.gateway.test_admin_cli import config as admin_config
from tests.support.access import KEYS
from tests.support.harness import REPO, http_gateway, toy_stdio
from tests.support.launches import launches
from tests.support.skills import text

pytestmark = pytest.mark.anyio


async def cli(*args: str, key: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m gateway ARGS` in a process of its own, with `key` in GATEWAY_API_KEY."""
    environment = {name: value for name, value in os.environ.items() if name != "GATEWAY_API_KEY"}
    environment.update(env)
    if key is not None:
        environment["GATEWAY_API_KEY"] = key
    finished = await anyio.run_process([sys.executable, "-m", "gateway", *args], cwd=REPO, env=environment, check=False)
    return subprocess.CompletedProcess(
        finished.args, finished.returncode, finished.stdout.decode(), finished.stderr.decode()
    )


async def test_servers_restart_from_the_command_line_restarts_the_server(tmp_path: Path) -> None:
    async with http_gateway(admin_config(tmp_path)) as (_, url):
        restarted = await cli("servers", "restart", "calc", "--url", url, key=KEYS["admin"])

    assert restarted.returncode == 0, restarted.stderr
    assert "calc: ready" in restarted.stderr
    assert restarted.stdout.splitlines()[1].split()[:2] == ["calc", "ready"]


async def test_a_command_against_a_running_gateway_logs_no_line_per_request(tmp_path: Path) -> None:
    async with http_gateway(admin_config(tmp_path)) as (_, url):
        listed = await cli("servers", "list", "--url", url, key=KEYS["admin"])
        told = await cli("--log-level", "DEBUG", "servers", "list", "--url", url, key=KEYS["admin"])

    assert listed.returncode == 0
    assert listed.stderr == ""
    assert "HTTP Request: GET" in told.stderr


async def test_sandbox_build_after_a_global_option_says_docker_is_unreachable_without_a_traceback() -> None:
    built = await cli("--log-level", "WARNING", "sandbox", "build", DOCKER_HOST="unix:///nonexistent/docker.sock")

    assert built.returncode == 1
    assert "Docker is not reachable" in built.stderr
    assert "Traceback" not in built.stderr


async def test_the_approvals_help_says_that_without_config_it_asks_the_running_gateway() -> None:
    helped = await cli("approvals", "--help")

    assert helped.returncode == 0
    assert "embedded defaults" not in helped.stdout
    assert "default: ask the running gateway" in " ".join(helped.stdout.split())


async def test_check_tells_a_disabled_server_apart_from_a_failure(tmp_path: Path) -> None:
    document = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "servers": {"calc": toy_stdio("calc"), "spare": {**toy_stdio("spare"), "enabled": False}},
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(document))

    checked = await cli("check", "--config", str(path))

    assert checked.returncode == 0, checked.stdout
    assert "  [off] spare (stdio): disabled, not started" in checked.stdout.splitlines()
    assert "FAIL" not in checked.stdout


def open_config(tmp_path: Path) -> Any:
    """Authentication off, admin_without_auth on, and a high-risk local tool."""
    document = {
        "gateway": {"data_dir": str(tmp_path / "data"), "admin_without_auth": True},
        "servers": {"calc": toy_stdio("calc")},
        "local_tools": ["tests.support.launches"],
    }
    return parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)


async def test_an_action_may_be_posted_without_a_body_but_not_from_a_page_without_json(tmp_path: Path) -> None:
    async with http_gateway(open_config(tmp_path)) as (_, url), httpx2.AsyncClient(base_url=url) as http:
        bare = await http.post("/api/v1/servers/calc/restart")
        from_page = await http.post("/api/v1/servers/calc/restart", headers={"Origin": url})
        from_page_as_json = await http.post(
            "/api/v1/servers/calc/restart", headers={"Origin": url, "Content-Type": "application/json"}
        )
        from_a_form = await http.post("/api/v1/servers/calc/restart", headers={"Origin": url}, data={"x": "1"})

    assert bare.status_code == 202, bare.text
    assert from_page.status_code == 400
    assert from_page_as_json.status_code == 202
    assert from_a_form.status_code == 400


async def test_with_admin_without_auth_an_approval_is_decided_over_http(tmp_path: Path) -> None:
    log = tmp_path / "launches.log"
    arguments = {"log": str(log), "target": "moon"}
    async with (
        http_gateway(open_config(tmp_path)) as (_, url),
        httpx2.AsyncClient(base_url=url) as http,
        Client(f"{url}/mcp") as client,
    ):
        parked = await client.call_tool("local__launch", arguments)
        assert parked.is_error and parked.meta is not None, text(parked)
        approval = parked.meta["io.mcp-gateway/approval"]["id"]
        decided = await http.post(f"/api/v1/approvals/{approval}/approve")
        ran = await client.call_tool("local__launch", arguments)

    assert decided.status_code == 200, decided.text
    assert decided.json()["approval"]["decided_by"] == "api:local:local"
    assert not ran.is_error, text(ran)
    assert launches(log) == ["moon"]
