"""What a server definition that arrives through the API may hold of the gateway's secrets: none of
its environment, only the secrets the operator offers to registrations; and what the API, the web
page and the registration store show of a registered server's credentials: never a value."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.config.loading import parse_config
from gateway.config.model import GatewayConfig
from tests.api.conftest import ADMIN, ROLES, api
from tests.api.test_changes import send, until_offered
from tests.support.access import auth_section, recorded_headers, recording_upstream
from tests.support.harness import http_gateway, toy_stdio
from tests.support.webclient import web_client

pytestmark = pytest.mark.anyio

JWT_SECRET = "the-gateway-s-own-jwt-secret-0123456789"
OFFERED = "ghp_offered-to-registrations-0123456789"
PRIVATE = "sk_for-the-file-s-servers-only-0123456789"
LITERAL = "literal-header-credential-0123456789"
LOCAL = "http://127.0.0.1:9/mcp"
REGISTRATION = {
    "allow_urls": ["http://127.0.0.1:*/mcp"],
    "allow_commands": [sys.executable],
    "sandbox_stdio": False,
}


def secrets_config(tmp_path: Path, **document: Any) -> GatewayConfig:
    """No servers, the admin API open to admins for local URLs and this Python, and `document`'s sections."""
    data: dict[str, Any] = {
        "gateway": {"data_dir": str(tmp_path / "data"), "restart_backoff_initial": 0.05},
        "auth": auth_section(),
        "roles": ROLES,
        "registration": REGISTRATION,
        "secrets": {
            "github_token": {"value": "${OFFERED_TOKEN}", "registrations": True},
            "private": {"value": PRIVATE},
        },
        **document,
    }
    environ = {"JWT_SECRET": JWT_SECRET, "OFFERED_TOKEN": OFFERED}
    return parse_config(data, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path, environ=environ)


async def test_a_registration_naming_the_gateway_s_environment_is_refused_and_the_server_gets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JWT_SECRET", JWT_SECRET)
    log = tmp_path / "headers.jsonl"
    async with (
        recording_upstream(log, "leak") as listener,
        http_gateway(secrets_config(tmp_path)) as (gateway, url),
    ):
        leak = {"name": "leak", "url": listener, "headers": {"X-Leak": "${JWT_SECRET}"}}
        refused = await send(url, ADMIN, "POST", "/api/v1/servers", leak)
        stored = gateway.registrations.entries("server")
    assert refused.status_code == 422, refused.text
    [problem] = refused.json()["problems"]
    assert problem["path"] == "servers.leak.headers.X-Leak" and "${secret:NAME}" in problem["problem"]
    assert stored == {} and JWT_SECRET not in refused.text
    assert not any(JWT_SECRET in value for headers in recorded_headers(log) for value in headers.values())


ENVIRONMENT_BODIES: list[tuple[dict[str, Any], str]] = [
    ({"name": "x", "url": LOCAL, "headers": {"K": "${JWT_SECRET:-none}"}}, "servers.x.headers.K"),
    ({"name": "x", **toy_stdio("x"), "env": {"K": "${env:JWT_SECRET}"}}, "servers.x.env.K"),
    ({"name": "x", **toy_stdio("x", "--token", "${JWT_SECRET}")}, "servers.x.args[5]"),
    ({"name": "x", **toy_stdio("x"), "cwd": "${HOME}"}, "servers.x.cwd"),
    (
        {"mcpServers": {"x": {"url": LOCAL, "headers": {"K": "${JWT_SECRET}"}}}},
        "servers.x.headers.K",
    ),
    (
        {
            "name": "io.example/x",
            "remotes": [
                {
                    "type": "streamable-http",
                    "url": LOCAL,
                    "headers": [{"name": "K", "value": "${JWT_SECRET}"}],
                }
            ],
        },
        "servers.x.headers.K",
    ),
    (
        {
            "name": "io.example/x",
            "packages": [
                {
                    "registryType": "pypi",
                    "identifier": "x",
                    "environmentVariables": [{"name": "K", "value": "${JWT_SECRET}", "isSecret": True}],
                }
            ],
        },
        "servers.x.env.K",
    ),
]


@pytest.mark.parametrize(("body", "path"), ENVIRONMENT_BODIES)
async def test_no_form_of_registration_body_reads_the_gateway_s_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], path: str
) -> None:
    monkeypatch.setenv("JWT_SECRET", JWT_SECRET)
    # A pypi package runs `uvx`: allowed here, so that what is judged is the body's variables.
    uvx = tmp_path / "bin" / "uvx"
    uvx.parent.mkdir()
    uvx.write_text("#!/bin/sh\n")
    uvx.chmod(0o755)
    monkeypatch.setenv("PATH", f"{uvx.parent}:{os.environ['PATH']}")
    registration = {**REGISTRATION, "allow_commands": [sys.executable, "uvx"]}
    async with http_gateway(secrets_config(tmp_path, registration=registration)) as (gateway, url):
        refused = await send(url, ADMIN, "POST", "/api/v1/servers", body)
        stored = gateway.registrations.entries("server")
    assert refused.status_code == 422, refused.text
    assert path in [problem["path"] for problem in refused.json()["problems"]]
    assert stored == {}


async def test_a_secret_offered_to_registrations_reaches_the_server_and_the_api_shows_only_its_name(
    tmp_path: Path,
) -> None:
    log = tmp_path / "headers.jsonl"
    async with (
        recording_upstream(log, "gh") as listener,
        http_gateway(secrets_config(tmp_path)) as (gateway, url),
    ):
        body = {"name": "gh", "url": listener, "headers": {"Authorization": "Bearer ${secret:github_token}"}}
        added = await send(url, ADMIN, "POST", "/api/v1/servers", body)
        await until_offered(gateway, url, "gh__echo")
        listing = await send(url, ADMIN, "GET", "/api/v1/servers")
        detail = await send(url, ADMIN, "GET", "/api/v1/servers/gh")
        async with web_client(url) as web:
            await web.sign_in(ADMIN)
            page = await web.get("/servers/rows")
    assert added.status_code == 201, added.text
    assert {"authorization": f"Bearer {OFFERED}"}.items() <= recorded_headers(log)[-1].items()
    assert detail.json()["server"]["headers"] == {"Authorization": "***${secret:github_token}"}
    assert "${secret:github_token}" in page.text
    for answer in (added.text, listing.text, detail.text, page.text):
        assert OFFERED not in answer


@pytest.mark.parametrize("name", ["private", "nothing"])
async def test_a_secret_not_offered_to_registrations_is_refused_naming_it(tmp_path: Path, name: str) -> None:
    async with http_gateway(secrets_config(tmp_path)) as (_, url):
        body = {"name": "x", "url": LOCAL, "headers": {"K": f"${{secret:{name}}}"}}
        refused = await send(url, ADMIN, "POST", "/api/v1/servers", body)
    assert refused.status_code == 422, refused.text
    [problem] = refused.json()["problems"]
    assert problem["path"] == "servers.x.headers.K"
    assert f"no secret named '{name}' is offered to registrations" in problem["problem"]
    assert PRIVATE not in refused.text


async def test_a_registered_literal_credential_is_masked_stored_encrypted_and_still_sent_after_a_restart(
    tmp_path: Path,
) -> None:
    log = tmp_path / "headers.jsonl"
    config = secrets_config(tmp_path)
    async with recording_upstream(log, "remote") as listener:
        async with http_gateway(config) as (gateway, url):
            body = {"name": "remote", "url": listener, "headers": {"X-Api-Key": LITERAL}}
            added = await send(url, ADMIN, "POST", "/api/v1/servers", body)
            await until_offered(gateway, url, "remote__echo")
            shown = await send(url, ADMIN, "GET", "/api/v1/servers/remote")
        stored = b"".join(path.read_bytes() for path in config.settings.data_dir.glob("registrations.db*"))
        log.unlink()
        async with http_gateway(config) as (gateway, url):
            await until_offered(gateway, url, "remote__echo")
            async with api(url, ADMIN) as http:
                listing = await http.get("/api/v1/servers")
    assert added.status_code == 201, added.text
    assert shown.json()["server"]["headers"] == {"X-Api-Key": "***"} and LITERAL not in shown.text
    assert LITERAL.encode() not in stored and b"X-Api-Key" not in stored
    assert recorded_headers(log)[0]["x-api-key"] == LITERAL
    assert [row["headers"] for row in listing.json()["servers"]] == [{"X-Api-Key": "***"}]


async def test_a_change_naming_the_gateway_s_environment_is_refused_and_leaves_the_entry_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JWT_SECRET", JWT_SECRET)
    async with http_gateway(secrets_config(tmp_path)) as (gateway, url):
        body = {"name": "x", "url": LOCAL, "headers": {"K": "${secret:github_token}"}}
        added = await send(url, ADMIN, "POST", "/api/v1/servers", body)
        refused = await send(url, ADMIN, "PATCH", "/api/v1/servers/x", {"headers": {"K": "${JWT_SECRET}"}})
        stored = gateway.registrations.entries("server")
    assert added.status_code == 201, added.text
    assert refused.status_code == 422, refused.text
    assert [problem["path"] for problem in refused.json()["problems"]] == ["servers.x.headers.K"]
    assert stored == {"x": {"url": LOCAL, "headers": {"K": "${secret:github_token}"}}}
