"""The command line against a running gateway over real HTTP with real API keys: `servers`, `catalog`
and `approvals` go through the admin API, and what the gateway refuses is told in its own words."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from gateway.cli.main import main
from gateway.config.loading import parse_config
from gateway.config.model import GatewayConfig
from tests.support.access import KEYS, auth_section
from tests.support.harness import free_port, http_gateway, toy_stdio

pytestmark = pytest.mark.anyio

ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["calc__*"]},
    "intern": {"allow": ["calc__*"]},
}


def config(tmp_path: Path) -> GatewayConfig:
    """A gateway with keys, an admin role, and a registration policy that allows this Python."""
    data = {
        "gateway": {"data_dir": str(tmp_path / "data"), "restart_backoff_initial": 0.05},
        "servers": {"calc": toy_stdio("calc")},
        "auth": auth_section(),
        "roles": ROLES,
        "registration": {"allow_commands": [sys.executable], "sandbox_stdio": False},
    }
    return parse_config(data, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)


@asynccontextmanager
async def running(tmp_path: Path) -> AsyncIterator[str]:
    """The gateway's base URL while it serves."""
    async with http_gateway(config(tmp_path)) as (_, url):
        yield url


def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, key: str | None, *args: str) -> Any:
    """Run the command line with `key` in GATEWAY_API_KEY; its exit code, stdout and stderr."""
    if key is None:
        monkeypatch.delenv("GATEWAY_API_KEY", raising=False)
    else:
        monkeypatch.setenv("GATEWAY_API_KEY", key)
    with pytest.raises(SystemExit) as exited:
        main(["--log-level", "WARNING", *args])
    out, err = capsys.readouterr()
    code = exited.value.code
    return (code if isinstance(code, int) else 1), out, err


async def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, key: str | None, *args: str) -> Any:
    # The command line is synchronous: it runs in a thread while the gateway serves in this loop.
    return await anyio.to_thread.run_sync(partial(cli, capsys, monkeypatch, key, *args))


def entry_file(tmp_path: Path, name: str) -> Path:
    """A registration body in the gateway's own form, as a YAML file."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **toy_stdio(name)}))
    return path


async def test_an_admin_adds_lists_disables_and_removes_a_server_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path) as url:
        admin = partial(run, capsys, monkeypatch, KEYS["admin"])

        code, out, err = await admin("servers", "add", str(entry_file(tmp_path, "extra")), "--url", url)
        assert code == 0, err
        assert "extra: ready" in err
        assert "extra" in out and "ready" in out

        code, out, _ = await admin("servers", "list", "--json", "--url", url)
        listed = {server["name"]: server for server in json.loads(out)}
        assert listed["extra"]["source"] == "api"
        assert listed["calc"]["source"] == "file"

        code, out, _ = await admin("catalog", "--server", "extra", "--json", "--url", url)
        tools = json.loads(out)["tools"]
        assert tools and all(tool["server"] == "extra" for tool in tools)

        code, out, _ = await admin("servers", "disable", "extra", "--url", url)
        assert code == 0
        assert "disabled" in out

        code, out, _ = await admin("servers", "remove", "extra", "--url", url)
        assert (code, out.strip()) == (0, "extra removed")
        code, out, _ = await admin("servers", "list", "--json", "--url", url)
        assert "extra" not in {server["name"] for server in json.loads(out)}


async def test_the_catalog_command_filters_the_running_gateway_s_tools_as_the_caller_may_see_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path) as url:
        code, out, err = await run(capsys, monkeypatch, KEYS["intern"], "catalog", "--q", "echo", "--url", url)

    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("NAME")
    names = [line.split()[0] for line in lines[1:]]
    assert "calc__echo" in names and "calc__add" not in names


async def test_a_caller_who_is_not_an_admin_is_told_the_gateway_refused_the_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path) as url:
        code, _, err = await run(
            capsys, monkeypatch, KEYS["intern"], "servers", "add", str(entry_file(tmp_path, "x")), "--url", url
        )

    assert code == 1
    assert "(HTTP 403)" in err


async def test_an_invalid_registration_is_refused_with_the_path_of_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = tmp_path / "bad.json"
    body.write_text(json.dumps({"name": "bad", "url": 42}))
    async with running(tmp_path) as url:
        code, _, err = await run(capsys, monkeypatch, KEYS["admin"], "servers", "add", str(body), "--url", url)

    assert code == 1
    assert "(HTTP 422)" in err
    assert "url" in err


async def test_without_a_key_the_command_line_says_which_variable_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path) as url:
        code, _, err = await run(capsys, monkeypatch, None, "servers", "list", "--url", url)

    assert code == 1
    assert "GATEWAY_API_KEY" in err


async def test_approvals_are_listed_from_the_running_gateway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path) as url:
        code, out, err = await run(capsys, monkeypatch, KEYS["admin"], "approvals", "list", "--json", "--url", url)

    assert (code, json.loads(out)) == (0, []), err


def test_a_gateway_that_is_not_running_is_named_with_how_to_start_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = cli(capsys, monkeypatch, KEYS["admin"], "servers", "list", "--url", url)

    assert code == 1
    assert f"cannot reach the gateway at {url}" in err
    assert "python -m gateway serve" in err


def test_filters_with_an_offline_catalog_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"gateway": {"data_dir": str(tmp_path / "data")}, "servers": {}}))

    code, _, err = cli(capsys, monkeypatch, None, "catalog", "--config", str(path), "--tag", "x")

    assert code == 2
    assert "--tag" in err
