"""A real gateway served over HTTP with roles and API keys, and clients of its admin API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.config.model import GatewayConfig
from gateway.config.registration import RegistrationPolicy
from gateway.service import Gateway
from tests.support.access import KEYS, access_config, auth_section, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.toy import build_server as toy

ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["toy__*", "other__*"], "deny": [{"risk": "high"}]},
    "intern": {"allow": ["toy__echo", "toy__add"]},
}
ADMIN, ANALYST, INTERN = KEYS["admin"], KEYS["analyst"], KEYS["intern"]
Served = Callable[..., AbstractAsyncContextManager[tuple[Gateway, str]]]


def api_config(tmp_path: Path, **options: Any) -> GatewayConfig:
    """Two toy servers (`toy`, and `other` with a tag), the three roles, and `options` as extra sections."""
    servers = {"toy": toy_entry(), "other": toy_entry(tags=["weather"], layer="extended")}
    registration = options.pop("registration", None)
    config = access_config(tmp_path, servers, roles=options.pop("roles", ROLES), auth=auth_section(), **options)
    if registration is not None:
        config = replace(config, registration=RegistrationPolicy(**registration))
    return config


@pytest.fixture
def served(tmp_path: Path) -> Served:
    """`served(config=None)`: the gateway over real HTTP, both toy servers reached in memory."""

    @asynccontextmanager
    async def serve(config: GatewayConfig | None = None) -> AsyncIterator[tuple[Gateway, str]]:
        transports = in_memory({"toy": toy("toy"), "other": toy("other")})
        async with http_gateway(config or api_config(tmp_path), transports=transports) as (gateway, url):
            yield gateway, url

    return serve


@asynccontextmanager
async def api(url: str, key: str | None) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client of the admin API presenting `key` (none when None)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        yield http
