"""Tests for the HTTP edge of authentication: 401 challenges, identities on requests, RFC 9728 metadata."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway.auth.apikeys import hash_key
from gateway.auth.authenticator import Authenticator
from gateway.auth.middleware import AuthMiddleware, metadata_route
from gateway.auth.settings import AuthSettings

KEY = "alice-key-0123456789abcdef"
KEYS = {"api_keys": [{"caller": "alice", "role": "admin", "key_sha256": hash_key(KEY)}]}
BARE_CHALLENGE = 'Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"'


def auth_settings(section: Any) -> AuthSettings:
    """Settings from an `auth` section."""
    return AuthSettings.from_config(section, source_file="gateway.yaml")


async def whoami(request: Request) -> Response:
    """What the protected app sees: the identity and whether the Authorization header is still there."""
    identity = getattr(request.state, "identity", None)
    seen = None if identity is None else {"caller": identity.caller, "role": identity.role, "method": identity.method}
    return JSONResponse({"identity": seen, "authorization": "authorization" in request.headers})


@pytest.fixture
def client_for() -> Iterator[Any]:
    """Builds a TestClient for a tiny app (/mcp, /mcp/sub, /mcpx, /healthz) behind the middleware."""
    clients: list[TestClient] = []

    def build(section: Any) -> TestClient:
        authenticator = Authenticator(auth_settings(section))
        routes = [Route(path, whoami, methods=["GET", "POST"]) for path in ("/mcp", "/mcp/sub", "/mcpx", "/healthz")]
        app = Starlette(routes=[*routes, metadata_route(authenticator)])
        app.add_middleware(AuthMiddleware, authenticator=authenticator)
        clients.append(TestClient(app))
        return clients[-1]

    yield build
    for client in clients:
        client.close()


def test_a_request_without_credentials_gets_a_challenge_naming_the_metadata(client_for: Any) -> None:
    response = client_for(KEYS).post("/mcp")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == BARE_CHALLENGE
    assert response.json()["error"] == "unauthorized"


def test_a_bad_key_gets_an_invalid_token_challenge_that_does_not_echo_it(client_for: Any) -> None:
    wrong = "not-the-right-key-at-all-42"
    response = client_for(KEYS).post("/mcp", headers={"Authorization": f"Bearer {wrong}"})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge == BARE_CHALLENGE + ', error="invalid_token", error_description="unknown API key"'
    assert response.json() == {"error": "invalid_token", "error_description": "unknown API key"}
    assert wrong not in response.text


def test_a_malformed_header_gets_an_invalid_request_challenge(client_for: Any) -> None:
    response = client_for(KEYS).post("/mcp", headers={"Authorization": f"Basic {KEY}"})
    assert response.status_code == 401
    assert 'error="invalid_request"' in response.headers["www-authenticate"]


def test_two_authorization_headers_are_refused(client_for: Any) -> None:
    headers = [("Authorization", f"Bearer {KEY}"), ("Authorization", "Bearer other-key-0123456789")]
    response = client_for(KEYS).post("/mcp", headers=headers)
    assert response.status_code == 401
    assert response.json()["error_description"] == "send one Authorization header, not several"


def test_a_good_key_reaches_the_app_with_the_identity_and_the_header_kept(client_for: Any) -> None:
    response = client_for(KEYS).post("/mcp/sub", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200
    assert response.json() == {
        "identity": {"caller": "alice", "role": "admin", "method": "api_key"},
        "authorization": True,
    }


def test_paths_outside_the_protected_prefixes_pass_without_credentials(client_for: Any) -> None:
    client = client_for(KEYS)
    for path in ("/healthz", "/mcpx"):
        response = client.get(path)
        assert response.status_code == 200
        assert response.json()["identity"] is None


def test_without_auth_every_request_is_the_local_caller(client_for: Any) -> None:
    response = client_for({"anonymous_role": "guest"}).post("/mcp", headers={"Authorization": "Bearer whatever-1234"})
    assert response.json()["identity"] == {"caller": "local", "role": "guest", "method": "local"}


def test_the_challenge_uses_the_configured_resource_url_and_scopes(client_for: Any) -> None:
    section = {**KEYS, "resource_url": "https://gw.example/tools/mcp", "scopes_supported": ["mcp:tools"]}
    challenge = client_for(section).post("/mcp").headers["www-authenticate"]
    expected = 'resource_metadata="https://gw.example/.well-known/oauth-protected-resource/tools/mcp"'
    assert challenge == f'Bearer {expected}, scope="mcp:tools"'


def test_the_metadata_document_is_served_at_both_well_known_paths(client_for: Any) -> None:
    section = {**KEYS, "authorization_servers": ["https://issuer.example"], "scopes_supported": ["mcp:tools"]}
    client = client_for(section)
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        response = client.get(path)
        assert response.status_code == 200
        assert response.json() == {
            "resource": "http://testserver/mcp",
            "authorization_servers": ["https://issuer.example"],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["mcp:tools"],
        }
    assert client.get("/.well-known/oauth-protected-resource/other").status_code == 404
    assert client.get("/.well-known/oauth-protected-resourcemcp").status_code == 404


def test_the_metadata_names_the_configured_resource_and_omits_what_is_not_configured(client_for: Any) -> None:
    client = client_for({**KEYS, "resource_url": "https://gw.example/mcp"})
    assert client.get("/.well-known/oauth-protected-resource/mcp").json() == {
        "resource": "https://gw.example/mcp",
        "bearer_methods_supported": ["header"],
    }


@asynccontextmanager
async def served(app: Starlette) -> AsyncIterator[str]:
    """`app` served by uvicorn on loopback; yields its MCP URL."""
    # A socket already listening queues connections until uvicorn accepts them: nothing to wait for.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    with listener:
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve, [listener])
            try:
                yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
            finally:
                server.should_exit = True


@pytest.mark.anyio
async def test_an_mcp_tool_sees_the_identity_of_an_sdk_client_over_http() -> None:
    mcp = MCPServer("who")

    @mcp.tool()
    async def whoami(ctx: Context) -> str:
        request = ctx.request_context.request
        assert isinstance(request, Request)
        identity = request.state.identity
        return json.dumps([identity.caller, identity.role])

    app = mcp.streamable_http_app(json_response=True)
    app.add_middleware(AuthMiddleware, authenticator=Authenticator(auth_settings(KEYS)))
    async with served(app) as url:
        headers = {"Authorization": f"Bearer {KEY}"}
        async with httpx2.AsyncClient(headers=headers) as http:
            with anyio.fail_after(10):
                async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                    result = await client.call_tool("whoami", {})
        assert json.loads(result.content[0].text) == ["alice", "admin"]  # type: ignore[union-attr]
        async with httpx2.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401
