"""A real OpenID provider for the identity tests: `oidc-provider` from npm, run by `oidc_provider.mjs`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2

from tests.support.node import NODE_PREFIX, require_node_package

SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
AUDIENCE = "http://gateway.test/mcp"
MACHINE_CLIENTS = {"RS256": "svc-rs256", "PS256": "svc-ps256", "ES256": "svc-es256", "EdDSA": "svc-eddsa"}
"""The provider's machine client that gets tokens signed with each algorithm."""
WEB_CLIENT = "gateway-web"
WEB_SECRET = "secret-gateway-web"


class OpenIdProvider:
    """A running provider: its issuer URL, tokens on request, and its test controls."""

    def __init__(self, process: subprocess.Popen[str], issuer: str) -> None:
        self.process = process
        self.issuer = issuer

    async def token(self, client: str = "svc-rs256", *, audience: str = AUDIENCE) -> str:
        """A JWT access token for `audience` by the client-credentials grant."""
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                f"{self.issuer}/token",
                data={"grant_type": "client_credentials", "resource": audience, "scope": "mcp"},
                auth=(client, f"secret-{client}"),
            )
        response.raise_for_status()
        token: str = response.json()["access_token"]
        return token

    async def rotate(self) -> None:
        """Replace every signing key by a new one; the old keys are no longer published."""
        await self._control("rotate")

    async def break_keys(self, broken: bool = True) -> None:
        """Make the JWKS endpoint answer 500 (or answer again)."""
        await self._control("break" if broken else "mend")

    async def redirect_to(self, uri: str) -> None:
        """Register `uri` as the browser client's redirect URI."""
        await self._control("redirect", {"uri": uri})

    async def _control(self, action: str, params: dict[str, str] | None = None) -> None:
        async with httpx2.AsyncClient() as http:
            (await http.post(f"{self.issuer}/_control/{action}", params=params)).raise_for_status()

    def stop(self) -> None:
        """The provider goes down."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextmanager
def openid_provider() -> Iterator[OpenIdProvider]:
    """A provider on a free loopback port, stopped afterwards; skipped (failed under CI) without Node."""
    require_node_package("oidc-provider")
    env = {**os.environ, "AUDIENCE": AUDIENCE}
    process = subprocess.Popen(
        ["node", str(SCRIPT), str(NODE_PREFIX)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    provider = None
    try:
        assert process.stdout is not None
        # The first line says it listens; the process ending first ends the test with its reason.
        line = process.stdout.readline()
        assert line, f"the OpenID provider exited with {process.wait()}"
        provider = OpenIdProvider(process, json.loads(line)["issuer"])
        yield provider
    finally:
        if provider is not None:
            provider.stop()
        else:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
