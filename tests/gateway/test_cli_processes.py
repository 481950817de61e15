"""The command line as a person runs it, each command a process of its own: no line logged per
request, `sandbox build` behind the global options, help that says where a command goes, and
`check` on a disabled server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml

from tests.gateway.test_admin_cli import config as admin_config
from tests.support.access import KEYS
from tests.support.harness import REPO, http_gateway, toy_stdio

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
