"""Callers for access tests: role configs, API keys, signed JWTs, authenticated HTTP clients, and an
upstream that records the request headers it receives (run as `python -m tests.support.access`)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.config.loading import parse_config
from gateway.config.model import GatewayConfig
from tests.support.harness import REPO, free_port
from tests.support.toy import build_server as toy
from tests.support.waiting import Lines, containing

ISSUER = "https://issuer.test"
AUDIENCE = "mcp-gateway-test"
HS256_SECRET = "a-test-signing-secret-of-forty-characters"
KEYS = {
    "admin": "admin-key-0123456789abcdef",
    "analyst": "analyst-key-0123456789abcdef",
    "intern": "intern-key-0123456789abcdef",
}
CALLERS = {"admin": "ada", "analyst": "ann", "intern": "ian"}
ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"]},
    "analyst": {"allow": ["toy__*"], "deny": [{"risk": "high"}]},
    "intern": {"allow": ["toy__echo", "toy__add"]},
}
# The toy tools every access test exposes: `crash` ends the process that serves it, so it stays off,
# and two tools are high-risk so that confirmation and risk rules have something to act on.
TOY_TOOLS: dict[str, Any] = {"crash": {"enabled": False}, "increment": {"risk": "high"}, "fail": {"risk": "high"}}


@cache
def rsa_key() -> rsa.RSAPrivateKey:
    """The issuer's RSA signing key (made once per test process: generating one takes a while)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key: rsa.RSAPrivateKey | None = None) -> str:
    """The PEM text of the public half of `key` (default: the issuer's)."""
    public = (key or rsa_key()).public_key()
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def sign(
    claims: Mapping[str, Any],
    *,
    algorithm: str = "HS256",
    key: rsa.RSAPrivateKey | None = None,
    secret: str = HS256_SECRET,
) -> str:
    """A JWT over `claims`, signed with the test secret (HS256) or the issuer's RSA key (RS256)."""
    signing_key: Any = secret if algorithm == "HS256" else (key or rsa_key())
    return jwt.encode(dict(claims), signing_key, algorithm=algorithm)


def token_for(sub: str, role: Any, *, algorithm: str = "HS256", lifetime: float = 300, **claims: Any) -> str:
    """A current JWT from the test issuer for this gateway, naming `sub` and `role`."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "role": role, "iat": now, "exp": now + int(lifetime)}
    return sign({**body, **claims}, algorithm=algorithm)


def auth_section(**overrides: Any) -> dict[str, Any]:
    """An `auth` section accepting the three role keys and HS256 and RS256 tokens from the test issuer."""
    keys = [{"caller": CALLERS[role], "role": role, "key": key} for role, key in KEYS.items()]
    jwt_block = {"issuer": ISSUER, "audience": AUDIENCE, "hs256_secret": HS256_SECRET, "rs256_public_key": public_pem()}
    return {"api_keys": keys, "jwt": jwt_block, **overrides}


def access_config(
    tmp_path: Path,
    servers: Mapping[str, Any],
    *,
    roles: Mapping[str, Any] | None = ROLES,
    auth: Mapping[str, Any] | None = None,
    confirmation: Mapping[str, Any] | None = None,
    groups: Mapping[str, Any] | None = None,
    **settings: Any,
) -> GatewayConfig:
    """A validated config with roles, authentication (default: `auth_section()`), confirmation settings and groups."""
    data: dict[str, Any] = {
        "gateway": {"data_dir": str(tmp_path / "data"), "restart_backoff_initial": 0.05, **settings},
        "servers": dict(servers),
        "auth": dict(auth) if auth is not None else auth_section(),
    }
    if roles is not None:
        data["roles"] = dict(roles)
    if confirmation is not None:
        data["confirmation"] = dict(confirmation)
    if groups is not None:
        data["groups"] = dict(groups)
    return parse_config(data, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)


def toy_entry(**options: Any) -> dict[str, Any]:
    """The config entry of a toy server whose transport the test supplies in memory."""
    return {"command": "unused", "tools": TOY_TOOLS, **options}


@asynccontextmanager
async def http_client(
    url: str, token: str | None = None, *, mode: str = "legacy", path: str = "/mcp", **options: Any
) -> AsyncIterator[Client]:
    """An SDK client of the gateway at `url` (its endpoint `path`: `/mcp`, or a group's `/mcp/g/<name>`)
    presenting `Authorization: Bearer <token>` (none when None)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10, read=30)) as http:
        transport = streamable_http_client(f"{url}{path}", http_client=http)
        # No response cache: every listing must reach the gateway and show what this caller sees now.
        async with Client(transport, mode=mode, cache=None, **options) as client:
            yield client


class HeaderRecorder:
    """ASGI middleware writing each HTTP request's headers to a file, one JSON object a line."""

    def __init__(self, app: ASGIApp, log: Path) -> None:
        self._app = app
        self._log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
            with self._log.open("a", encoding="utf-8") as log:
                log.write(json.dumps(headers) + "\n")
        await self._app(scope, receive, send)


def recorded_headers(log: Path) -> list[dict[str, str]]:
    """Every request's headers the recording upstream saw, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


@asynccontextmanager
async def recording_upstream(log: Path, name: str = "remote") -> AsyncIterator[str]:
    """A toy server over streamable HTTP in its own process, logging request headers to `log`; yields
    its URL once it listens."""
    port = free_port()
    command = [sys.executable, "-m", "tests.support.access", "--name", name, "--port", str(port), "--log", str(log)]
    said = Lines()
    async with (
        await anyio.open_process(command, cwd=REPO, stdout=subprocess.DEVNULL) as process,
        anyio.create_task_group() as group,
    ):
        assert process.stderr is not None
        group.start_soon(said.read, process.stderr)
        try:
            await said.until(containing("Uvicorn running on"), "the recording upstream's word that it listens")
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            with anyio.fail_after(10):
                await process.wait()


def main() -> None:
    """Serve a toy server over streamable HTTP, recording every request's headers."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.access")
    parser.add_argument("--name", default="remote")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    app = HeaderRecorder(toy(args.name).streamable_http_app(), args.log)
    # At info, uvicorn says when it listens; no line per request.
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="info", access_log=False)


if __name__ == "__main__":
    main()
