"""A real gateway over HTTP taking tokens of a real OpenID provider: an SDK client's calls, the
resource metadata naming the provider, and `/readyz` telling admins when its keys cannot be fetched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from gateway.config.model import GatewayConfig
from tests.gateway.test_cli_processes import cli
from tests.support.access import CALLERS, KEYS, ROLES, access_config, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.oidc import AUDIENCE, openid_provider
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path, issuer: str) -> GatewayConfig:
    auth: dict[str, Any] = {
        "resource_url": AUDIENCE,
        "api_keys": [{"caller": CALLERS["admin"], "role": "admin", "key": KEYS["admin"]}],
        "jwt": {
            "issuer": issuer,
            "role_rules": [{"claim": "groups", "value": "ops", "role": "analyst"}, {"role": "intern"}],
        },
    }
    roles = {**ROLES, "admin": {**ROLES["admin"], "admin": True}}
    return access_config(tmp_path, {"toy": toy_entry()}, auth=auth, roles=roles)


async def test_an_sdk_client_with_a_provider_token_gets_the_tools_of_the_role_its_groups_give(tmp_path: Path) -> None:
    with openid_provider() as provider:
        config = _config(tmp_path, provider.issuer)
        async with http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url):
            async with http_client(url, await provider.token("svc-rs256")) as client:  # group ops: analyst
                analyst = {tool.name for tool in (await client.list_tools()).tools if "__" in tool.name}
                echoed = await client.call_tool("toy__echo", {"text": "hi"})
            async with http_client(url, await provider.token("svc-eddsa")) as client:  # group staff: intern
                intern = {tool.name for tool in (await client.list_tools()).tools if "__" in tool.name}
            async with httpx2.AsyncClient() as http:
                metadata = (await http.get(f"{url}/.well-known/oauth-protected-resource/mcp")).json()
    assert intern == {"toy__echo", "toy__add"} and intern < analyst
    assert not echoed.is_error
    assert metadata["authorization_servers"] == [provider.issuer] and metadata["resource"] == AUDIENCE


async def test_readyz_tells_admins_that_the_providers_keys_cannot_be_fetched(tmp_path: Path) -> None:
    with openid_provider() as provider:
        token = await provider.token()
        await provider.break_keys()
        config = _config(tmp_path, provider.issuer)
        gateway = http_gateway(config, transports=in_memory({"toy": toy("toy")}))
        async with gateway as (_, url), httpx2.AsyncClient() as http:
            refused = await http.post(f"{url}/mcp", json={}, headers={"Authorization": f"Bearer {token}"})
            ready = await http.get(f"{url}/readyz", headers={"Authorization": f"Bearer {KEYS['admin']}"})
    assert refused.status_code == 401
    assert "cannot verify tokens" in refused.json()["error_description"]
    assert "Traceback" not in refused.text
    detail = ready.json()["identity_provider"]
    assert detail["issuer"] == provider.issuer and detail["keys"] == []
    assert "answered HTTP 500" in detail["error"]


async def test_check_shows_the_caller_role_and_rule_a_sample_token_gets_and_why_another_is_refused(
    tmp_path: Path,
) -> None:
    with openid_provider() as provider:
        document = {
            "gateway": {"data_dir": str(tmp_path / "data"), "find_tools_model": "none"},
            "servers": {},
            "roles": {"analyst": {"allow": ["*"]}, "intern": {"allow": []}},
            "auth": {
                "resource_url": AUDIENCE,
                "jwt": {
                    "issuer": provider.issuer,
                    "role_rules": [{"claim": "groups", "value": "ops", "role": "analyst"}, {"role": "intern"}],
                },
            },
        }
        path = tmp_path / "gateway.yaml"
        path.write_text(yaml.safe_dump(document))
        token = await provider.token("svc-rs256")
        accepted = await cli("check", "--config", str(path), "--token", token)
        foreign = await provider.token("svc-rs256", audience="http://elsewhere.test/mcp")
        refused = await cli("check", "--config", str(path), "--token", foreign)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert f"  [ok] issuer {provider.issuer}: keys " in accepted.stdout
    assert (
        "  [ok] token: caller 'svc-rs256', role 'analyst' "
        "(by auth.jwt.role_rules[0]: 'groups' holding 'ops' gives 'analyst')" in accepted.stdout.splitlines()
    )
    assert token not in accepted.stdout + accepted.stderr
    assert refused.returncode == 1
    assert "  [FAIL] token refused: the token is not meant for this gateway" in refused.stdout
    assert "Traceback" not in refused.stdout + refused.stderr


async def test_the_web_sign_in_with_a_provider_down_says_so_and_offers_api_keys(tmp_path: Path) -> None:
    with openid_provider() as provider:
        issuer = provider.issuer
    section: dict[str, Any] = {
        "resource_url": AUDIENCE,
        "api_keys": [{"caller": CALLERS["admin"], "role": "admin", "key": KEYS["admin"]}],
        "jwt": {"issuer": issuer},
        "web_signin": {"client_id": "gateway-web"},
    }
    config = access_config(tmp_path, {"toy": toy_entry()}, auth=section)
    async with (
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url),
        httpx2.AsyncClient() as http,
    ):
        started = await http.get(f"{url}/signin/oidc?next=/audit")
    assert started.status_code == 503
    assert f"The identity provider {issuer} cannot be reached now; sign in with an API key" in started.text
    assert "Traceback" not in started.text
