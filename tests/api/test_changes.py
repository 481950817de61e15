"""Changing the gateway through the admin API over real HTTP: who may, what bodies are refused and
how, and servers registered, changed, restarted and removed while the gateway serves."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.config.registration import RegistrationPolicy
from gateway.service import Gateway
from tests.api.conftest import ADMIN, ANALYST, INTERN, Served, api, api_config
from tests.support.harness import http_gateway, make_config, toy_stdio
from tests.support.waiting import catalog_until

pytestmark = pytest.mark.anyio

CHANGES = [
    ("POST", "/api/v1/servers"),
    ("PATCH", "/api/v1/servers/toy"),
    ("POST", "/api/v1/servers/toy/restart"),
    ("DELETE", "/api/v1/servers/toy"),
    ("POST", "/api/v1/groups"),
    ("DELETE", "/api/v1/groups/coding"),
    ("GET", "/api/v1/sessions"),
    ("DELETE", "/api/v1/sessions/abc"),
]
ALLOW_PYTHON = {"allow_commands": [sys.executable], "sandbox_stdio": False}


async def send(url: str, key: str | None, method: str, path: str, body: Any = None, **options: Any) -> httpx2.Response:
    """One request as `key`; a body is sent as JSON unless `content` is given."""
    async with api(url, key) as http:
        if body is not None:
            options["json"] = body
        return await http.request(method, path, **options)


@pytest.mark.parametrize(("method", "path"), CHANGES)
async def test_a_caller_without_an_admin_role_is_refused_every_change(served: Served, method: str, path: str) -> None:
    async with served() as (gateway, url):
        refused = [await send(url, key, method, path, {} if method != "GET" else None) for key in (INTERN, ANALYST)]
        statuses = [status.name for status in gateway.servers.statuses()]
    for response in refused:
        assert response.status_code == 403, response.text
        assert "admin" in response.json()["error"]
    assert statuses == ["toy", "other"]


@pytest.mark.parametrize(
    ("path", "needed"),
    [
        ("/api/v1/sessions", "reading the sessions (who is connected, from where) needs an admin role"),
        ("/api/v1/changes", "reading the changed tool definitions needs an admin role"),
    ],
)
async def test_a_read_only_admins_may_make_is_refused_saying_what_reading_needs(
    served: Served, path: str, needed: str
) -> None:
    async with served() as (_, url):
        refused = await send(url, ANALYST, "GET", path)
    assert refused.status_code == 403
    assert refused.json()["error"].startswith(needed) and "changing" not in refused.json()["error"]


async def test_with_authentication_off_changes_are_refused_unless_the_operator_opts_in(tmp_path: Path) -> None:
    body = {"name": "fresh", **toy_stdio("fresh")}
    async with http_gateway(make_config(tmp_path / "a", {})) as (_, url):
        refused = await send(url, None, "POST", "/api/v1/servers", body)
    opted = make_config(tmp_path / "b", {}, admin_without_auth=True)
    opted = replace(opted, registration=RegistrationPolicy(allow_commands=(sys.executable,), sandbox_stdio=False))
    async with http_gateway(opted) as (_, url):
        allowed = await send(url, None, "POST", "/api/v1/servers", body)
    assert refused.status_code == 403 and "admin_without_auth" in refused.json()["error"]
    assert allowed.status_code == 201, allowed.text


MALFORMED: list[tuple[str, dict[str, Any]]] = [
    ("not json", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}),
    ("empty", {"content": b"", "headers": {"Content-Type": "application/json"}}),
    ("array", {"json": [1, 2]}),
    ("null", {"json": None}),
    ("string", {"json": "server"}),
    ("number", {"json": 5}),
    ("huge", {"json": {"name": "x", "command": "x" * (2 << 20)}}),
    ("deep", {"content": b"[" * 100_000 + b"]" * 100_000, "headers": {"Content-Type": "application/json"}}),
    (
        "nested",
        {
            "content": json.dumps(json.loads("[" * 80 + "]" * 80)).encode(),
            "headers": {"Content-Type": "application/json"},
        },
    ),
    ("wrong types", {"json": {"name": 5, "command": ["x"]}}),
    ("wrong field types", {"json": {"name": "x", "args": "a b", "env": [], "enabled": "yes"}}),
    ("mcpServers wrong", {"json": {"mcpServers": []}}),
    ("server.json wrong", {"json": {"name": "io.x/y", "packages": [{"registryType": 1}], "remotes": {}}}),
    ("not json content type", {"content": b"{}", "headers": {"Content-Type": "text/plain"}}),
    ("no content type", {"content": b"{}"}),
    ("unicode", {"content": b"\xff\xfe{", "headers": {"Content-Type": "application/json"}}),
]


@pytest.mark.parametrize(("method", "path"), [("POST", "/api/v1/servers"), ("PATCH", "/api/v1/servers/toy")])
@pytest.mark.parametrize(("label", "request_options"), MALFORMED, ids=[label for label, _ in MALFORMED])
async def test_a_malformed_body_gets_a_4xx_with_a_json_error_never_a_500(
    served: Served, tmp_path: Path, method: str, path: str, label: str, request_options: dict[str, Any]
) -> None:
    config = api_config(tmp_path, registration=ALLOW_PYTHON)
    async with served(config) as (_, url), api(url, ADMIN) as http:
        response = await http.request(method, path, **request_options)
    assert 400 <= response.status_code < 500, response.text
    assert set(response.json()) == {"error", "problems"}


JSON = {"Content-Type": "application/json"}


UNSTARTABLE: list[tuple[str, bytes, str]] = [
    ("an argument", rb'{"name": "x", "command": "python", "args": ["\udfff"]}', "lone surrogate"),
    ("an env value", rb'{"name": "x", "command": "python", "env": {"A": "\ud800"}}', "lone surrogate"),
    ("a key", rb'{"name": "x", "command": "python", "env": {"\ud800": "a"}}', "lone surrogate"),
    ("a duplicate key", b'{"name": "x", "command": "python", "command": "sh"}', "duplicate key 'command'"),
]


@pytest.mark.parametrize(("label", "content", "problem"), UNSTARTABLE, ids=[label for label, _, _ in UNSTARTABLE])
async def test_a_body_holding_what_no_server_could_start_with_is_refused_and_nothing_is_stored(
    served: Served, tmp_path: Path, label: str, content: bytes, problem: str
) -> None:
    config = api_config(tmp_path, registration=ALLOW_PYTHON)
    async with served(config) as (gateway, url), api(url, ADMIN) as http:
        posted = await http.post("/api/v1/servers", content=content, headers=JSON)
        patched = await http.patch("/api/v1/servers/toy", content=content, headers=JSON)
        names = [status.name for status in gateway.servers.statuses()]
    for response in (posted, patched):
        assert response.status_code == 422, response.text
        assert problem in json.dumps(response.json())
    assert names == ["toy", "other"]


async def test_a_method_a_route_does_not_take_is_a_json_405_and_an_unknown_route_a_json_404(served: Served) -> None:
    async with served() as (_, url), api(url, ADMIN) as http:
        put = await http.put("/api/v1/servers", json={})
        unknown = await http.get("/api/v1/nothing/here")
    assert put.status_code == 405 and put.headers["allow"] == "GET, HEAD, POST", put.text
    assert "PUT is not allowed on /api/v1/servers" in put.json()["error"]
    assert unknown.status_code == 404 and unknown.json()["error"] == "no API route /api/v1/nothing/here"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"name": "x", "url": 5}, "servers.x.url"),
        ({"name": "x", "command": "python", "url": "https://a.example.com"}, "servers.x"),
        ({"name": "x", "url": "ftp://a.example.com"}, "servers.x.url"),
        ({"name": "io.x/y", "packages": [{"registryType": 3, "identifier": "y"}]}, "packages[0].registryType"),
        ({"name": "io.x/y", "packages": [{"registryType": "nuget", "identifier": "y"}]}, "packages[0].registryType"),
        ({"mcpServers": {"x": {"command": 1}}}, "mcpServers.x.command"),
    ],
)
async def test_an_invalid_entry_is_a_422_naming_the_path_of_the_problem(
    served: Served, tmp_path: Path, body: dict[str, Any], path: str
) -> None:
    config = api_config(tmp_path, registration={"allow_commands": ["/**"], "allow_urls": ["https://**:*/**"]})
    async with served(config) as (_, url):
        response = await send(url, ADMIN, "POST", "/api/v1/servers", body)
    assert response.status_code == 422, response.text
    assert path in [problem["path"] for problem in response.json()["problems"]]


async def test_a_registration_the_policy_does_not_allow_is_refused_naming_what(served: Served, tmp_path: Path) -> None:
    async with served(api_config(tmp_path, registration={"allow_urls": ["https://*.example.com/**"]})) as (
        gateway,
        url,
    ):
        command = await send(url, ADMIN, "POST", "/api/v1/servers", {"name": "x", "command": "/bin/sh"})
        remote = await send(url, ADMIN, "POST", "/api/v1/servers", {"name": "y", "url": "https://evil.test/mcp"})
        stored = gateway.registrations.entries("server")
    assert command.status_code == remote.status_code == 403
    assert "/bin/sh" in command.json()["error"] and "https://evil.test/mcp" in remote.json()["error"]
    assert stored == {}


def program(path: Path, body: str) -> Path:
    """An executable shell script at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


async def test_a_command_is_judged_and_run_by_the_absolute_path_its_allowed_name_was_found_at(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = program(tmp_path / "bin" / "python", f'exec {sys.executable} "$@"')
    # Another program of the same name, which leaves a mark when it runs.
    elsewhere = program(tmp_path / "evil" / "python", f'touch {tmp_path / "swapped"}; exec {sys.executable} "$@"')
    monkeypatch.setenv("PATH", f"{python.parent}:{os.environ['PATH']}")
    config = api_config(tmp_path, registration={"allow_commands": ["python"], "sandbox_stdio": False})
    async with served(config) as (gateway, url):
        refused = await send(
            url, ADMIN, "POST", "/api/v1/servers", {**toy_stdio("x"), "name": "x", "command": str(elsewhere)}
        )
        # The entry's own PATH leads to the other program: the pinned path runs all the same.
        body = {**toy_stdio("fresh"), "name": "fresh", "command": "python", "env": {"PATH": str(elsewhere.parent)}}
        added = await send(url, ADMIN, "POST", "/api/v1/servers", body)
        await until_offered(gateway, url, "fresh__echo")
        stored = gateway.registrations.entries("server")
    assert refused.status_code == 403 and str(elsewhere) in refused.json()["error"]
    assert added.status_code == 201, added.text
    assert set(stored) == {"fresh"} and stored["fresh"]["command"] == str(python)
    assert not (tmp_path / "swapped").exists()


async def tool_names(url: str, query: str = "") -> list[str]:
    """The tools an admin finds."""
    response = await send(url, ADMIN, "GET", f"/api/v1/tools?limit=500&{query}")
    return [tool["name"] for tool in response.json()["tools"]]


async def until_offered(gateway: Gateway, url: str, name: str, offered: bool = True) -> None:
    """Wait until the catalog has the tool `name` (or, not `offered`, has not), then see that an admin finds it so."""
    what = f"{name} {'in' if offered else 'out of'} the catalog"
    await catalog_until(gateway, lambda: (gateway.catalog.tool(name) is not None) == offered, what)
    assert await _has(url, name) == offered


async def test_a_registered_server_is_changed_restarted_and_removed_live(served: Served, tmp_path: Path) -> None:
    async with served(api_config(tmp_path, registration=ALLOW_PYTHON)) as (gateway, url):
        added = await send(url, ADMIN, "POST", "/api/v1/servers", {"name": "fresh", **toy_stdio("fresh")})
        await until_offered(gateway, url, "fresh__echo")
        intern_sees = await send(url, INTERN, "GET", "/api/v1/servers/fresh")
        disabled = await send(url, ADMIN, "PATCH", "/api/v1/servers/fresh", {"enabled": False})
        await until_offered(gateway, url, "fresh__echo", offered=False)
        enabled = await send(url, ADMIN, "PATCH", "/api/v1/servers/fresh", {"enabled": True})
        await until_offered(gateway, url, "fresh__echo")
        restarted = await send(
            url,
            ADMIN,
            "POST",
            "/api/v1/servers/fresh/restart",
            content=b"{}",
            headers={"Content-Type": "application/json"},
        )
        file_server = await send(url, ADMIN, "DELETE", "/api/v1/servers/toy")
        removed = await send(url, ADMIN, "DELETE", "/api/v1/servers/fresh")
        await until_offered(gateway, url, "fresh__echo", offered=False)
        gone = await send(url, ADMIN, "GET", "/api/v1/servers/fresh")
        stored = gateway.registrations.entries("server")
    assert added.status_code == 201 and added.json()["servers"][0]["name"] == "fresh"
    assert added.json()["servers"][0]["source"] == "api"
    assert intern_sees.status_code == 404
    assert disabled.status_code == 200 and disabled.json()["server"]["state"] == "disabled"
    assert enabled.status_code == 200 and enabled.json()["server"]["enabled"] is True
    assert restarted.status_code == 202
    assert file_server.status_code == 409 and "edit it there" in file_server.json()["error"]
    assert removed.status_code == 204 and gone.status_code == 404 and stored == {}


async def test_a_store_that_cannot_be_written_answers_503_and_leaves_servers_and_groups_as_they_were(
    served: Served, tmp_path: Path
) -> None:
    config = api_config(tmp_path, registration=ALLOW_PYTHON)
    group = {"name": "fresh-only", "allow": [{"server": "fresh"}]}
    async with served(config) as (gateway, url):
        assert (
            await send(url, ADMIN, "POST", "/api/v1/servers", {"name": "fresh", **toy_stdio("fresh")})
        ).status_code == 201
        assert (await send(url, ADMIN, "POST", "/api/v1/groups", group)).status_code == 201
        # Another process holds the write lock of the registrations file past SQLite's busy timeout.
        with closing(sqlite3.connect(config.settings.data_dir / "registrations.db", isolation_level=None)) as holder:
            holder.execute("BEGIN IMMEDIATE")
            refused = [
                await send(url, ADMIN, "POST", "/api/v1/servers", {"name": "late", **toy_stdio("late")}),
                await send(url, ADMIN, "DELETE", "/api/v1/servers/fresh"),
                await send(url, ADMIN, "POST", "/api/v1/groups", {"name": "late", "allow": [{"server": "toy"}]}),
                await send(url, ADMIN, "DELETE", "/api/v1/groups/fresh-only"),
            ]
            holder.execute("ROLLBACK")
        servers = (await send(url, ADMIN, "GET", "/api/v1/servers")).json()["servers"]
        groups = (await send(url, ADMIN, "GET", "/api/v1/groups")).json()["groups"]
        stored = (set(gateway.registrations.entries("server")), set(gateway.registrations.entries("group")))
        again = await send(url, ADMIN, "POST", "/api/v1/servers", {"name": "late", **toy_stdio("late")})
    for response in refused:
        assert response.status_code == 503, response.text
        assert "store" in response.json()["error"]
    assert {row["name"] for row in servers} == {"toy", "other", "fresh"}
    assert {row["name"] for row in groups} >= {"fresh-only"} and "late" not in {row["name"] for row in groups}
    assert stored == ({"fresh"}, {"fresh-only"})
    assert again.status_code == 201, again.text


async def _has(url: str, name: str) -> bool:
    return name in await tool_names(url, "q=echo")


async def test_an_mcp_servers_fragment_registers_every_server_and_a_taken_name_none(
    served: Served, tmp_path: Path
) -> None:
    fragment = {"mcpServers": {"one": toy_stdio("one"), "two": toy_stdio("two")}}
    async with served(api_config(tmp_path, registration=ALLOW_PYTHON)) as (gateway, url):
        added = await send(url, ADMIN, "POST", "/api/v1/servers", fragment)
        taken = await send(
            url, ADMIN, "POST", "/api/v1/servers", {"mcpServers": {"three": toy_stdio(), "toy": toy_stdio()}}
        )
        stored = set(gateway.registrations.entries("server"))
    assert added.status_code == 201 and [row["name"] for row in added.json()["servers"]] == ["one", "two"]
    assert taken.status_code == 409 and stored == {"one", "two"}


async def test_a_patch_is_judged_by_the_registration_policy_like_a_new_registration(
    served: Served, tmp_path: Path
) -> None:
    async with served(api_config(tmp_path, registration=ALLOW_PYTHON)) as (_, url):
        await send(url, ADMIN, "POST", "/api/v1/servers", {"name": "fresh", **toy_stdio("fresh")})
        refused = await send(url, ADMIN, "PATCH", "/api/v1/servers/fresh", {"command": "/bin/sh"})
        missing = await send(url, ADMIN, "PATCH", "/api/v1/servers/nothing", {"enabled": False})
    assert refused.status_code == 403 and "/bin/sh" in refused.json()["error"]
    assert missing.status_code == 404
