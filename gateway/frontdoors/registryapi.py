"""The read side of the MCP Registry API (v0.1): this gateway's endpoints as registry entries.

Clients that browse a registry (VS Code's MCP gallery can be pointed at one) find the gateway
here. A registry lists endpoints, not tools: one entry for the whole gateway (`/mcp`) and one per
tool group (`/mcp/g/<group>`), each a `server.json` whose one `remotes` item is that endpoint's
absolute URL, built from the request's base URL. The routes take the same credentials as `/mcp`;
a group in which the caller's role sees no tool is not listed, and answers 404 like a name that
does not exist. Every entry is the gateway's current version and its latest.

Names are reverse-DNS style: `<gateway.registry_namespace>/gateway` and
`<gateway.registry_namespace>/gateway.<group>` (group names hold no dot, so they never clash).
With authentication on, each remote declares the `Authorization` header its endpoint takes (secret;
required unless an `anonymous_role` lets callers in without it), so a client asks its user for it.
The registry's write side (`POST /v0.1/publish`) is answered with a JSON 501: this registry lists
the gateway's own endpoints, nothing is published to it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import Identity
from gateway.auth.settings import AuthSettings
from gateway.live.groups import LiveGroups

REGISTRY_PATH = "/v0.1"
SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
OFFICIAL = "io.modelcontextprotocol.registry/official"
LATEST = "latest"
DEFAULT_LIMIT = 30
MAX_LIMIT = 100
# The registry's limit on a description.
DESCRIPTION_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One MCP endpoint of the gateway, as a registry entry describes it."""

    name: str
    title: str
    description: str
    path: str


def endpoints(groups: LiveGroups, namespace: str, role: str | None) -> list[Endpoint]:
    """The gateway's endpoint, then each group's in which `role` sees at least one tool, by name,
    under `namespace` (`gateway.registry_namespace`)."""
    listed = [Endpoint(f"{namespace}/gateway", "MCP gateway", "Every tool of this MCP gateway at one endpoint", "/mcp")]
    for group in groups.all():
        if groups.tools(group.name, role):
            description = _clipped(group.description.strip() or f"The {group.name} tools of this MCP gateway")
            title = f"MCP gateway: {group.name}"
            listed.append(Endpoint(f"{namespace}/gateway.{group.name}", title, description, f"/mcp/g/{group.name}"))
    return sorted(listed, key=lambda endpoint: endpoint.name)


def _clipped(text: str) -> str:
    return text if len(text) <= DESCRIPTION_LIMIT else text[: DESCRIPTION_LIMIT - 1] + "…"


def auth_headers(settings: AuthSettings) -> list[dict[str, Any]]:
    """The headers a remote declares: the bearer credential `/mcp` takes when authentication is on."""
    if not settings.enabled:
        return []
    header = {
        "name": "Authorization",
        "description": "Bearer followed by an API key or a token (JWT) of this gateway, from its operator",
        "isRequired": settings.anonymous_role is None,
        "isSecret": True,
    }
    return [header]


def entry(
    endpoint: Endpoint, base_url: str, version: str, published: str, headers: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The registry's answer for one endpoint: its `server.json` and the registry's facts about it."""
    remote: dict[str, Any] = {"type": "streamable-http", "url": base_url + endpoint.path}
    if headers:
        remote["headers"] = list(headers)
    server = {
        "$schema": SCHEMA_URL,
        "name": endpoint.name,
        "title": endpoint.title,
        "description": endpoint.description,
        "version": version,
        "remotes": [remote],
    }
    official = {"status": "active", "publishedAt": published, "updatedAt": published, "isLatest": True}
    return {"server": server, "_meta": {OFFICIAL: official}}


def page(names: Sequence[str], cursor: str | None, limit: int) -> tuple[int, int, str | None]:
    """The slice of the sorted `names` after `cursor` (the last name of the previous page), at most
    `limit` long, and the cursor of the next page (None at the end)."""
    start = 0 if cursor is None else next((i for i, name in enumerate(names) if name > cursor), len(names))
    end = min(start + limit, len(names))
    return start, end, names[end - 1] if end < len(names) else None


def _error(message: str, status: int) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _limit(raw: str | None) -> int | None:
    if raw is None:
        return DEFAULT_LIMIT
    if not raw.isdigit() or int(raw) < 1:
        return None
    return min(int(raw), MAX_LIMIT)


def registry_routes(groups: LiveGroups, authenticator: Authenticator, namespace: str) -> list[Route]:
    """GET `/v0.1/servers`, `/v0.1/servers/{name}/versions` and `/v0.1/servers/{name}/versions/{version}`;
    POST `/v0.1/publish`, which is not supported (501). The entries are the endpoints of the live
    `groups` under `namespace`, with the credential `authenticator` takes."""
    version = package_version("mcp-gateway")
    published = datetime.fromtimestamp(time.time(), UTC).isoformat(timespec="seconds").replace("+00:00", "Z")

    def visible(request: Request) -> list[Endpoint]:
        identity = getattr(request.state, "identity", None)
        return endpoints(groups, namespace, identity.role if isinstance(identity, Identity) else None)

    def base_url(request: Request) -> str:
        return str(request.base_url).rstrip("/")

    def described(endpoint: Endpoint, request: Request) -> dict[str, Any]:
        # Read per request: a reload of the config file can turn authentication on or off.
        headers = auth_headers(authenticator.settings)
        return entry(endpoint, base_url(request), version, published, headers)

    async def servers(request: Request) -> Response:
        query = request.query_params
        limit = _limit(query.get("limit"))
        if limit is None:
            return _error(f"limit must be a whole number from 1 to {MAX_LIMIT}", 400)
        wanted = query.get("version")
        search = (query.get("search") or "").lower()
        chosen = [
            endpoint
            for endpoint in visible(request)
            if search in endpoint.name.lower() and wanted in (None, "", LATEST, version)
        ]
        start, end, cursor = page([endpoint.name for endpoint in chosen], query.get("cursor") or None, limit)
        listed = [described(endpoint, request) for endpoint in chosen[start:end]]
        metadata: dict[str, Any] = {"count": len(listed)}
        if cursor is not None:
            metadata["nextCursor"] = cursor
        return JSONResponse({"servers": listed, "metadata": metadata})

    def found(request: Request) -> Endpoint | None:
        name = request.path_params["name"]
        return next((endpoint for endpoint in visible(request) if endpoint.name == name), None)

    async def versions(request: Request) -> Response:
        endpoint = found(request)
        if endpoint is None:
            return _error("Server not found", 404)
        listed = [described(endpoint, request)]
        return JSONResponse({"servers": listed, "metadata": {"count": 1}})

    async def one_version(request: Request) -> Response:
        endpoint = found(request)
        if endpoint is None:
            return _error("Server not found", 404)
        if request.path_params["version"] not in (LATEST, version):
            return _error("Server version not found", 404)
        return JSONResponse(described(endpoint, request))

    async def publish(request: Request) -> Response:
        return _error("Publishing is not supported: this registry lists the gateway's own endpoints", 501)

    # Names hold a `/`, sent URL-encoded; the path converter matches it once decoded.
    return [
        Route(f"{REGISTRY_PATH}/servers", servers, methods=["GET"]),
        Route(REGISTRY_PATH + "/servers/{name:path}/versions", versions, methods=["GET"]),
        Route(REGISTRY_PATH + "/servers/{name:path}/versions/{version}", one_version, methods=["GET"]),
        Route(f"{REGISTRY_PATH}/publish", publish, methods=["POST"]),
    ]
