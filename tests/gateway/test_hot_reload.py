"""Hot reload: an edited config file (watched, or on SIGHUP) applies live; a broken one is refused."""

from __future__ import annotations

import logging
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client._memory import InMemoryTransport

from gateway.config.loading import load_config, parse_config
from gateway.config.model import GatewayConfig
from gateway.upstreams.connection import State
from gateway.upstreams.transports import TransportFactory
from tests.support.access import KEYS, auth_section, token_for
from tests.support.harness import (
    REPO,
    collector,
    gateway_client,
    http_gateway,
    in_memory,
    serving_url,
    toy_stdio,
    until_told_of,
)
from tests.support.skills import write_skill
from tests.support.toy import build_server as toy
from tests.support.waiting import Lines, containing, logged

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
        await until_told_of(client, received, "beta__echo")
        result = await client.call_tool("beta__echo", {"text": "reloaded"})
        assert result.content[0].text == "reloaded"  # type: ignore[union-attr]
        assert [(status.name, status.source) for status in gateway.servers.statuses()] == [
            ("alpha", "file"),
            ("beta", "file"),
        ]


async def test_a_broken_edit_is_refused_with_its_path_and_serving_goes_on(tmp_path: Path) -> None:
    operated = {"admin_without_auth": True}
    path = write(tmp_path / "gateway.yaml", document(tmp_path, {"alpha": {"command": "unused"}}, gateway=operated))
    transports = in_memory({"alpha": toy("alpha")})
    async with (
        http_gateway(load_config(path), transports=transports) as (_, url),
        httpx2.AsyncClient(base_url=url, timeout=30) as http,
        Client(f"{url}/mcp", mode="legacy") as client,
    ):
        with logged() as log:
            broken = {"alpha": {"command": "unused"}, "web": {"url": "ftp://example.org/mcp"}}
            write(path, document(tmp_path, broken, gateway=operated))
            refused = await log.until(containing("configuration not reloaded"), "the reload's refusal")
            assert "servers.web.url" in refused and "http://" in refused
            told = (await http.get("/api/v1/servers")).json()
            assert any("servers.web.url" in line for line in told["reload_errors"])
            assert [server["name"] for server in told["servers"]] == ["alpha"]
            result = await client.call_tool("alpha__echo", {"text": "still here"})
            assert result.content[0].text == "still here"  # type: ignore[union-attr]
            # The next valid edit applies and clears the errors.
            write(path, document(tmp_path, {}, gateway=operated))
            await log.until(containing("configuration reloaded from"), "the reload of the valid edit")
        assert (await http.get("/api/v1/servers")).json() == {"servers": [], "reload_errors": [], "restart_needed": []}


async def test_a_reload_removes_changes_and_keeps_servers_as_the_file_says(tmp_path: Path) -> None:
    servers = {"alpha": {"command": "unused"}, "beta": {"command": "unused"}, "gamma": {"command": "unused"}}
    connections: Counter[str] = Counter()

    def counted(name: str) -> TransportFactory:
        server = toy(name)

        def connect() -> InMemoryTransport:
            connections[name] += 1
            return InMemoryTransport(server)

        return connect

    operated = {"admin_without_auth": True}
    before = parsed(tmp_path, document(tmp_path, servers, gateway=operated))
    edited = {"alpha": servers["alpha"], "beta": {"command": "unused", "tags": ["new"]}}
    after = parsed(tmp_path, document(tmp_path, edited, gateway=operated))
    async with (
        http_gateway(before, transports={name: counted(name) for name in servers}) as (gateway, url),
        httpx2.AsyncClient(base_url=url, timeout=30) as http,
        Client(f"{url}/mcp", mode="legacy") as client,
    ):
        assert {"alpha__echo", "beta__echo", "gamma__echo"} <= {tool.name for tool in (await client.list_tools()).tools}
        await gateway.reloader.reload(after)
        listed = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        servers_now = (await http.get("/api/v1/servers")).json()["servers"]
        tagged = (await http.get("/api/v1/tools", params={"tag": "new"})).json()["tools"]
        answer = await client.call_tool("alpha__echo", {"text": "kept"})
    assert "alpha__echo" in listed and not any(name.startswith("gamma__") for name in listed)
    assert [server["name"] for server in servers_now] == ["alpha", "beta"]
    assert {tool["server"] for tool in tagged} == {"beta"} and "beta__echo" in {tool["name"] for tool in tagged}
    assert answer.content[0].text == "kept"  # type: ignore[union-attr]
    # Neither alpha (unchanged) nor beta (a tag, which its connection takes live) connected again.
    assert connections == {"alpha": 1, "beta": 1, "gamma": 1}


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
    command = [sys.executable, "-m", "gateway", "--log-level", "INFO", "serve", "--config", str(path), "--port", "0"]
    said, log = Lines(), Lines()
    async with (
        await anyio.open_process(command, cwd=REPO) as process,
        anyio.create_task_group() as group,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        assert process.stdout is not None and process.stderr is not None
        group.start_soon(said.read, process.stdout)
        group.start_soon(log.read, process.stderr)
        url = await serving_url(said)
        write(path, document(tmp_path, {"late": toy_stdio("late")}))
        process.send_signal(signal.SIGHUP)
        await log.until(containing("SIGHUP: reloading the configuration"), "the word that SIGHUP reloads")
        await log.until(containing("upstream late ready"), "the server the reload added, ready")
        servers = (await http.get(f"{url}/readyz")).json()["servers"]
        assert process.returncode is None
        process.terminate()
    assert servers["late"]["state"] == State.READY


async def test_a_reload_replaces_the_file_s_groups_and_keeps_those_added_through_the_api(tmp_path: Path) -> None:
    servers = {"alpha": {"command": "unused"}, "beta": {"command": "unused"}}
    before = document(tmp_path, servers, groups={"a": {"allow": ["alpha__*"]}, "gone": {"allow": ["*"]}})
    transports = in_memory({name: toy(name) for name in servers})
    async with gateway_client(parsed(tmp_path, before), transports=transports) as (gateway, _):
        await gateway.groups.add({"name": "mine", "allow": ["beta__echo"]})

        after = document(tmp_path, servers, groups={"a": {"allow": ["beta__*"]}})
        await gateway.reloader.reload(parsed(tmp_path, after))

        assert [group.name for group in gateway.groups.all()] == ["a", "mine"]
        assert {tool.source for tool in gateway.groups.tools("a", None)} == {"beta"}
        assert [tool.name for tool in gateway.groups.tools("mine", None)] == ["beta__echo"]
