"""Hot reload: an edited config file (watched, or on SIGHUP) applies live; a broken one is refused."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from mcp import Client

from gateway.config.loading import load_config, parse_config
from gateway.config.model import GatewayConfig
from gateway.upstreams.connection import State
from tests.support.access import KEYS, auth_section, token_for
from tests.support.harness import (
    REPO,
    collector,
    free_port,
    gateway_client,
    http_gateway,
    in_memory,
    told_tools_changed,
    toy_stdio,
)
from tests.support.probe import wait_until
from tests.support.skills import write_skill
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

# The watcher waits for edits to settle; a loaded machine may take long to notice and apply them.
RELOAD_LIMIT = 30.0


def document(tmp_path: Path, servers: dict[str, Any], **sections: Any) -> dict[str, Any]:
    """A config file's content, its data under `tmp_path`."""
    gateway = {"data_dir": str(tmp_path / "data"), "restart_backoff_initial": 0.05, **sections.pop("gateway", {})}
    return {"gateway": gateway, "servers": servers, **sections}


def write(path: Path, content: dict[str, Any]) -> Path:
    """Write `content` as the YAML config file at `path`."""
    path.write_text(yaml.safe_dump(content), encoding="utf-8")
    return path


def parsed(tmp_path: Path, content: dict[str, Any]) -> GatewayConfig:
    """`content` validated as the file at tmp_path/gateway.yaml would be."""
    return parse_config(content, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)


async def test_an_edit_of_the_watched_config_file_adds_a_server_live(tmp_path: Path) -> None:
    path = write(tmp_path / "gateway.yaml", document(tmp_path, {"alpha": {"command": "unused"}}))
    received, handle = collector()
    transports = in_memory({"alpha": toy("alpha"), "beta": toy("beta")})
    async with (
        http_gateway(load_config(path), transports=transports) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy", message_handler=handle) as client,
    ):
        await client.list_tools()
        write(path, document(tmp_path, {"alpha": {"command": "unused"}, "beta": {"command": "unused"}}))
        await wait_until(lambda: gateway.catalog.tool("beta__echo") is not None, limit=RELOAD_LIMIT)
        await wait_until(lambda: told_tools_changed(received))
        result = await client.call_tool("beta__echo", {"text": "reloaded"})
        assert result.content[0].text == "reloaded"  # type: ignore[union-attr]
        assert [(status.name, status.source) for status in gateway.servers.statuses()] == [
            ("alpha", "file"),
            ("beta", "file"),
        ]


async def test_a_broken_edit_is_refused_with_its_path_and_serving_goes_on(tmp_path: Path) -> None:
    path = write(tmp_path / "gateway.yaml", document(tmp_path, {"alpha": {"command": "unused"}}))
    transports = in_memory({"alpha": toy("alpha")})
    async with (
        http_gateway(load_config(path), transports=transports) as (gateway, url),
        Client(f"{url}/mcp", mode="legacy") as client,
    ):
        write(path, document(tmp_path, {"alpha": {"command": "unused"}, "web": {"url": "ftp://example.org/mcp"}}))
        await wait_until(lambda: bool(gateway.reloader.reload_errors), limit=RELOAD_LIMIT)
        assert any("servers.web.url" in line and "http://" in line for line in gateway.reloader.reload_errors)
        assert [status.name for status in gateway.servers.statuses()] == ["alpha"]
        result = await client.call_tool("alpha__echo", {"text": "still here"})
        assert result.content[0].text == "still here"  # type: ignore[union-attr]
        # The next valid edit applies and clears the errors.
        write(path, document(tmp_path, {}))
        await wait_until(
            lambda: not gateway.reloader.reload_errors and not gateway.servers.statuses(), limit=RELOAD_LIMIT
        )


async def test_a_reload_removes_changes_and_keeps_servers_as_the_file_says(tmp_path: Path) -> None:
    servers = {"alpha": {"command": "unused"}, "beta": {"command": "unused"}, "gamma": {"command": "unused"}}
    transports = in_memory({name: toy(name) for name in servers})
    async with gateway_client(parsed(tmp_path, document(tmp_path, servers)), transports=transports) as (gateway, _):
        await wait_until(lambda: gateway.catalog.tool("gamma__echo") is not None)
        kept = gateway.upstreams["alpha"]
        edited = {"alpha": servers["alpha"], "beta": {"command": "unused", "tags": ["new"]}}
        await gateway.reloader.reload(parsed(tmp_path, document(tmp_path, edited)))
        assert gateway.upstreams["alpha"] is kept
        assert "gamma" not in gateway.upstreams and gateway.catalog.tool("gamma__echo") is None
        await wait_until(lambda: getattr(gateway.catalog.tool("beta__echo"), "tags", None) == frozenset({"new"}))


async def test_a_reload_applies_roles_and_skills_and_names_what_needs_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "first", "alpha__echo")
    servers = {"alpha": {"command": "unused"}}
    roles = {"ops": {"allow": ["*"]}}
    before = document(tmp_path, servers, roles=roles, gateway={"skill_dirs": [str(skills)]})
    transports = in_memory({"alpha": toy("alpha")})
    async with gateway_client(parsed(tmp_path, before), transports=transports) as (gateway, _):
        assert gateway.skills.names == ["first"]
        assert gateway.policy.budget("ops") is None
        write_skill(skills, "second", "alpha__add")
        after = document(
            tmp_path,
            servers,
            roles={"ops": {"allow": ["*"], "budget": {"calls_per_minute": 5}}},
            gateway={"skill_dirs": [str(skills)], "call_timeout": 5},
        )
        with caplog.at_level(logging.WARNING):
            await gateway.reloader.reload(parsed(tmp_path, after))
        assert gateway.skills.names == ["first", "second"]
        budget = gateway.policy.budget("ops")
        assert budget is not None and budget.calls_per_minute == 5
        assert "gateway.call_timeout changed; it applies only after a restart" in caplog.text
        assert gateway.config.settings.call_timeout == 60


async def test_a_reload_applies_roles_to_tokens_and_the_registration_section_and_says_what_waits_for_a_restart(
    tmp_path: Path,
) -> None:
    roles: dict[str, Any] = {
        "admin": {"allow": ["*"], "admin": True},
        "analyst": {"allow": []},
        "intern": {"allow": []},
    }
    servers = {"alpha": {"command": "unused"}}
    before = document(tmp_path, servers, roles=roles, auth=auth_section())
    after = document(
        tmp_path,
        servers,
        roles={**roles, "auditor": {"allow": ["alpha__*"]}},
        auth=auth_section(),
        registration={"allow_commands": [sys.executable], "sandbox_stdio": False},
        gateway={"call_timeout": 5},
    )
    admin = {"Authorization": f"Bearer {KEYS['admin']}"}
    auditor = {"Authorization": f"Bearer {token_for('dana', 'auditor')}"}
    fresh = {"name": "fresh", **toy_stdio("fresh")}
    transports = in_memory({"alpha": toy("alpha")})
    async with (
        http_gateway(parsed(tmp_path, before), transports=transports) as (gateway, url),
        httpx2.AsyncClient(base_url=url, timeout=30) as http,
    ):
        unknown_role = await http.get("/api/v1/tools", headers=auditor)
        not_allowed = await http.post("/api/v1/servers", json=fresh, headers=admin)
        await gateway.reloader.reload(parsed(tmp_path, after))
        known_role = await http.get("/api/v1/tools", headers=auditor)
        registered = await http.post("/api/v1/servers", json=fresh, headers=admin)
        ready = await http.get("/readyz", headers=admin)
        listed = await http.get("/api/v1/servers", headers=admin)
    assert unknown_role.status_code == 401 and not_allowed.status_code == 403
    assert known_role.status_code == 200, known_role.text
    assert {tool["name"] for tool in known_role.json()["tools"]} >= {"alpha__echo"}
    assert registered.status_code == 201, registered.text
    assert ready.json()["restart_needed"] == ["gateway.call_timeout"]
    assert listed.json()["restart_needed"] == ["gateway.call_timeout"]


async def test_sighup_reloads_a_serving_gateway_instead_of_ending_it(tmp_path: Path) -> None:
    path = write(tmp_path / "gateway.yaml", document(tmp_path, {}))
    port = free_port()
    command = [sys.executable, "-m", "gateway", "--log-level", "INFO", "serve", "--config", str(path)]
    base = f"http://127.0.0.1:{port}"
    with anyio.fail_after(60):
        async with await anyio.open_process([*command, "--port", str(port)], cwd=REPO) as process:
            async with httpx2.AsyncClient() as http:
                while True:
                    try:
                        await http.get(f"{base}/healthz")
                        break
                    except httpx2.ConnectError:
                        await anyio.sleep(0.05)
                write(path, document(tmp_path, {"late": toy_stdio("late")}))
                process.send_signal(signal.SIGHUP)

                async def servers() -> dict[str, Any]:
                    body: dict[str, Any] = (await http.get(f"{base}/readyz")).json()
                    return body.get("servers", {})

                while (await servers()).get("late", {}).get("state") != State.READY:
                    await anyio.sleep(0.1)
                assert process.returncode is None
            process.terminate()
            assert process.stderr is not None
            stderr = b"".join([chunk async for chunk in process.stderr]).decode()
            await process.wait()
    assert "SIGHUP: reloading the configuration" in stderr


async def test_a_reload_replaces_the_file_s_groups_and_keeps_those_added_through_the_api(tmp_path: Path) -> None:
    servers = {"alpha": {"command": "unused"}, "beta": {"command": "unused"}}
    before = document(tmp_path, servers, groups={"a": {"allow": ["alpha__*"]}, "gone": {"allow": ["*"]}})
    transports = in_memory({name: toy(name) for name in servers})
    async with gateway_client(parsed(tmp_path, before), transports=transports) as (gateway, _):
        await wait_until(lambda: gateway.catalog.tool("beta__echo") is not None)
        await gateway.groups.add({"name": "mine", "allow": ["beta__echo"]})

        after = document(tmp_path, servers, groups={"a": {"allow": ["beta__*"]}})
        await gateway.reloader.reload(parsed(tmp_path, after))

        assert [group.name for group in gateway.groups.all()] == ["a", "mine"]
        assert {tool.source for tool in gateway.groups.tools("a", None)} == {"beta"}
        assert [tool.name for tool in gateway.groups.tools("mine", None)] == ["beta__echo"]
