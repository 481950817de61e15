"""A gateway in front of the OAuth-protected notes server (`tests.support.oauthserver`), two users
with API keys, and a user's Connect on the connections page driven as a browser would drive it."""

from __future__ import annotations

import html
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2

from gateway.config.model import GatewayConfig
from gateway.service import Gateway
from gateway.upstreams.connection import State
from tests.support.access import access_config
from tests.support.harness import http_gateway
from tests.support.oauthserver import Provider, notes_server
from tests.support.webclient import web_client

KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef", "ada": "ada-key-0123456789abcdef"}
ROLES = {"alice": "user", "bob": "user", "ada": "admin"}


class WallClock:
    """The gateway's wall clock, which a test moves on instead of waiting."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def grant_config(tmp_path: Path, url: str, oauth: Mapping[str, Any]) -> GatewayConfig:
    """Callers alice, bob (users) and ada (an admin) with API keys, and the notes server at `url`
    reached with each one's grant, the gateway's client at its authorization server being `oauth`."""
    auth = {"api_keys": [{"caller": name, "role": ROLES[name], "key": key} for name, key in KEYS.items()]}
    roles = {"user": {"allow": ["*"]}, "admin": {"allow": ["*"], "admin": True}}
    return access_config(tmp_path, {"notes": {"url": url, "oauth": dict(oauth)}}, roles=roles, auth=auth)


@asynccontextmanager
async def grant_gateway(
    tmp_path: Path, *, oauth: Mapping[str, Any] | None = None
) -> AsyncIterator[tuple[Provider, Gateway, str, WallClock]]:
    """The notes server, and a gateway that reaches it with each user's grant, served over HTTP;
    with `oauth` (a configured client), the server offers no dynamic registration."""
    clock = WallClock()
    async with (
        notes_server(registration=oauth is None) as (provider, url),
        http_gateway(grant_config(tmp_path, url, oauth or {}), wall_clock=clock) as (
            gateway,
            base,
        ),
    ):
        gateway.grants.public_url = base
        yield provider, gateway, base, clock


async def connect(base: str, user: str, provider: Provider) -> str:
    """`user` connects the notes server on the connections page, as a browser would: Connect, the
    provider's sign-in and consent, back to the gateway. The page they land on."""
    async with web_client(base) as web:
        signed = await web.sign_in(KEYS[user])
        assert signed.status_code == 303, signed.text[:2000]
        started = await web.submit("/connections", "/connections/notes/connect")
        assert started.status_code == 200, started.text[:2000]
        authorize = html.unescape(started.text.split('http-equiv="refresh" content="0;url=', 1)[1].split('"', 1)[0])
        assert authorize.startswith(provider.issuer), authorize
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            to_signin = await browser.get(authorize)
            assert to_signin.status_code == 302, to_signin.text
            page = await browser.get(to_signin.headers["location"])
            pending = page.text.split('name="pending" value="', 1)[1].split('"', 1)[0]
            back = await browser.post(f"{provider.issuer}/signin", data={"pending": pending, "user": user})
        callback = back.headers["location"]
        assert callback.startswith(f"{base}/connections/callback?"), callback
        landed = await web.get(callback.removeprefix(base))
        assert landed.status_code == 303, landed.text[:2000]
        shown = await web.get(landed.headers["location"])
        return shown.text


async def until_ready(gateway: Gateway, name: str) -> None:
    """Wait until the shared connection of server `name` is ready (it lists with a connected user's grant)."""
    upstream = gateway.upstreams[name]
    with anyio.fail_after(30):
        while upstream.status().state != State.READY:
            await anyio.sleep(0.02)
