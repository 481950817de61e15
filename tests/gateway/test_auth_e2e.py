"""Authentication through a real gateway over HTTP: API keys, HS256 and RS256 JWTs, 401 challenges,
the resource metadata, and the client's credential never travelling on to an upstream."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.auth.settings import AuthSettings
from gateway.clients.session import state_key
from gateway.config.model import GatewayConfig
from gateway.errors import ConfigError
from gateway.upstreams.transports import TransportFactory
from tests.support.access import (
    AUDIENCE,
    CALLERS,
    ISSUER,
    KEYS,
    access_config,
    auth_section,
    http_client,
    recorded_headers,
    recording_upstream,
    sign,
    token_for,
    toy_entry,
)
from tests.support.harness import http_gateway, in_memory
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

INTERN_TOOLS = {"toy__echo", "toy__add"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _config(tmp_path: Path, **auth: object) -> GatewayConfig:
    return access_config(tmp_path, {"toy": toy_entry()}, auth=auth_section(**auth))


def _transports() -> dict[str, TransportFactory]:
    return in_memory({"toy": toy("toy")})


async def _tool_names(url: str, token: str, mode: str = "legacy") -> set[str]:
    async with http_client(url, token, mode=mode) as client:
        return {tool.name for tool in (await client.list_tools()).tools if "__" in tool.name}


async def _post(url: str, authorization: str | None) -> httpx2.Response:
    headers = dict(MCP_HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    async with httpx2.AsyncClient() as http:
        return await http.post(f"{url}/mcp", json=LIST_TOOLS, headers=headers)


def _challenge(response: httpx2.Response) -> str:
    assert response.status_code == 401
    challenge: str = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    return challenge


async def test_a_request_without_credentials_is_challenged_to_the_resource_metadata(tmp_path: Path) -> None:
    async with http_gateway(_config(tmp_path), transports=_transports()) as (_, url):
        response = await _post(url, None)
        challenge = _challenge(response)
        assert f'resource_metadata="{url}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert "error=" not in challenge
        async with httpx2.AsyncClient() as http:
            metadata = (await http.get(f"{url}/.well-known/oauth-protected-resource/mcp")).json()
    assert metadata == {
        "resource": f"{url}/mcp",
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
    }


@pytest.mark.parametrize(
    ("make_credential", "reason"),
    [
        (lambda: "wrong-key-0123456789abcdef", "unknown API key"),
        (lambda: token_for("eve", "admin", lifetime=-120), "expired"),
        (lambda: token_for("eve", "admin", iss="https://other-issuer.test"), "not issued by"),
        (lambda: token_for("eve", "admin", aud="another-service"), "not meant for this gateway"),
        (lambda: sign({"iss": ISSUER, "aud": AUDIENCE, "sub": "eve", "role": "admin", "exp": time.time() + 300},
                      secret="another-secret-of-at-least-thirty-two-chars"), "signature"),
        (lambda: token_for("eve", "nobody-knows-this-role"), "names no configured role"),
    ],
    ids=["wrong-key", "expired", "issuer", "audience", "hs256-signature", "unknown-role"],
)  # fmt: skip
async def test_a_bad_credential_is_refused_with_401_naming_the_failed_check(
    tmp_path: Path, make_credential: Callable[[], str], reason: str
) -> None:
    # Made when the test runs: a token made at collection would expire in a long run and fail for that.
    credential = make_credential()
    async with http_gateway(_config(tmp_path), transports=_transports()) as (_, url):
        response = await _post(url, f"Bearer {credential}")
    challenge = _challenge(response)
    assert 'error="invalid_token"' in challenge
    assert reason in response.json()["error_description"]
    assert credential not in challenge + response.text


async def test_an_rs256_token_signed_by_another_key_is_refused(tmp_path: Path) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "eve", "role": "admin", "exp": time.time() + 300}
    async with http_gateway(_config(tmp_path), transports=_transports()) as (_, url):
        response = await _post(url, f"Bearer {sign(claims, algorithm='RS256', key=stranger)}")
    assert "signature" in _challenge(response)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_api_keys_and_jwts_of_both_algorithms_sign_in_with_their_role(tmp_path: Path, mode: str) -> None:
    async with http_gateway(_config(tmp_path), transports=_transports()) as (gateway, url):
        by_key = await _tool_names(url, KEYS["intern"], mode)
        by_hs256 = await _tool_names(url, token_for("hana", "intern"), mode)
        by_rs256 = await _tool_names(url, token_for("rui", "intern", algorithm="RS256"), mode)
        admin = await _tool_names(url, token_for("root", "admin", algorithm="RS256"), mode)
        callers = {entry.caller for entry in await gateway.audit.recent(50)}
    assert by_key == by_hs256 == by_rs256 == INTERN_TOOLS
    assert admin > INTERN_TOOLS
    jwt_callers = {state_key("jwt", ISSUER, name) for name in ("hana", "rui", "root")}
    assert callers <= {state_key("api_key", CALLERS["intern"])} | jwt_callers


async def test_the_role_comes_from_the_configured_claim(tmp_path: Path) -> None:
    jwt_block = {**auth_section()["jwt"], "role_claim": "realm_access.roles", "caller_claim": "email"}
    config = _config(tmp_path, jwt=jwt_block)
    token = token_for(
        "ignored-sub", "admin", email="ivy@example.test", realm_access={"roles": ["unknown", "intern", "admin"]}
    )
    async with http_gateway(config, transports=_transports()) as (gateway, url), http_client(url, token) as client:
        names = {tool.name for tool in (await client.list_tools()).tools if "__" in tool.name}
        (session,) = gateway.sessions.live()
    assert names == INTERN_TOOLS
    # The caller claim names the caller; the key also says which issuer vouched for it.
    assert (session.caller, session.role) == (state_key("jwt", ISSUER, "ivy@example.test"), "intern")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_caller_whose_token_now_names_another_role_gets_that_role(tmp_path: Path, mode: str) -> None:
    async with http_gateway(_config(tmp_path), transports=_transports()) as (_, url):
        assert await _tool_names(url, token_for("sam", "admin"), mode) > INTERN_TOOLS
        assert await _tool_names(url, token_for("sam", "intern"), mode) == INTERN_TOOLS


async def test_the_client_credential_never_reaches_an_upstream(tmp_path: Path) -> None:
    log = tmp_path / "headers.jsonl"
    async with recording_upstream(log) as upstream_url:
        servers = {"remote": {"url": upstream_url, "headers": {"X-Upstream-Credential": "configured-for-remote"}}}
        config = access_config(tmp_path, servers)
        token = token_for("ada", "admin", algorithm="RS256")
        async with http_gateway(config) as (_, url):
            for credential in (KEYS["admin"], token):
                for mode in ("legacy", "2026-07-28"):
                    async with http_client(url, credential, mode=mode) as client:
                        result = await client.call_tool("remote__echo", {"text": "hello"})
                        assert not result.is_error
                        await client.read_resource("remote+toy://readme")
    seen = recorded_headers(log)
    assert len(seen) >= 4
    assert all(headers.get("x-upstream-credential") == "configured-for-remote" for headers in seen)
    for headers in seen:
        assert "authorization" not in headers
        for value in headers.values():
            assert KEYS["admin"] not in value and token not in value


async def test_a_secret_written_in_the_wrong_place_is_not_repeated_in_the_config_error(tmp_path: Path) -> None:
    secret = "plain-key-put-where-a-hash-belongs"
    auth = auth_section(api_keys=[{"caller": "ada", "role": "admin", "key_sha256": secret}])
    with pytest.raises(ConfigError) as raised:
        AuthSettings.from_config(auth, source_file=str(tmp_path / "gateway.yaml"), known_roles=["admin"])
    assert "auth.api_keys[0].key_sha256: must be 64 hex digits" in str(raised.value)
    assert secret not in str(raised.value)


async def test_an_anonymous_role_lets_requests_without_credentials_in_but_never_bad_ones(tmp_path: Path) -> None:
    config = _config(tmp_path, anonymous_role="intern")
    async with http_gateway(config, transports=_transports()) as (_, url):
        async with http_client(url, None) as client:
            names = {tool.name for tool in (await client.list_tools()).tools if "__" in tool.name}
        refused = await _post(url, "Bearer wrong-key-0123456789abcdef")
    assert names == INTERN_TOOLS
    assert 'error="invalid_token"' in _challenge(refused)
