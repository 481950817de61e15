"""The MCP Registry read API (v0.1) over real HTTP: every answer validates against the registry's schema.

The schemas in tests/fixtures/registry are written from the registry's published server.json
schema and OpenAPI document (modelcontextprotocol/registry, docs/reference/), not fetched.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import jsonschema
import pytest
from referencing import Registry, Resource

from gateway.service import Gateway
from tests.support.access import KEYS, access_config, auth_section, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "registry"
NAMESPACE = "com.example.tools"
LONG = "Tools that count things, " * 10
GROUPS: dict[str, Any] = {
    "adding": {"description": "Add and echo", "allow": ["toy__add", "toy__echo"]},
    "counting": {"description": LONG, "allow": ["toy__increment", "toy__calls"]},
    "nothing": {"allow": ["no_such__*"]},
}
ALL = [f"{NAMESPACE}/gateway", f"{NAMESPACE}/gateway.adding", f"{NAMESPACE}/gateway.counting"]
BEARER = {
    "name": "Authorization",
    "description": "Bearer followed by an API key or a token (JWT) of this gateway, from its operator",
    "isRequired": True,
    "isSecret": True,
}


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    documents = {
        name: json.loads((FIXTURES / name).read_text("utf-8"))
        for name in ("server.schema.json", "server-list.schema.json")
    }
    registry: Registry[Any] = Registry().with_resources(
        (name, Resource.from_contents(document)) for name, document in documents.items()
    )
    schema = {"$ref": f"server-list.schema.json#/$defs/{definition}"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def valid(answer: httpx2.Response, definition: str) -> Any:
    """The answer's JSON, once it validates against the registry's `definition` (serverList, serverResponse, error)."""
    body = answer.json()
    _validator(definition).validate(body)
    return body


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The backend, for the whole module: one gateway serves every test of the module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Gateway, str]]:
    """A gateway with roles and three groups (one that selects no tool), over real HTTP."""
    tmp_path = tmp_path_factory.mktemp("registry")
    config = access_config(tmp_path, {"toy": toy_entry()}, groups=GROUPS, registry_namespace=NAMESPACE)
    async with http_gateway(config, transports=in_memory({"toy": toy("toy")})) as served:
        yield served


async def _get(url: str, path: str, role: str | None = "admin", **params: Any) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {KEYS[role]}"} if role is not None else {}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.get(f"{url}{path}", params=params, headers=headers)


async def test_the_list_holds_the_gateway_and_each_group_with_tools_each_pointing_at_its_endpoint(
    served: tuple[Gateway, str],
) -> None:
    _, url = served
    body = valid(await _get(url, "/v0.1/servers", version="latest"), "serverList")
    servers = {item["server"]["name"]: item for item in body["servers"]}
    assert list(servers) == ALL
    assert body["metadata"] == {"count": 3}
    remotes = {name: item["server"]["remotes"] for name, item in servers.items()}
    assert remotes[f"{NAMESPACE}/gateway"] == [{"type": "streamable-http", "url": f"{url}/mcp", "headers": [BEARER]}]
    adding = [{"type": "streamable-http", "url": f"{url}/mcp/g/adding", "headers": [BEARER]}]
    assert remotes[f"{NAMESPACE}/gateway.adding"] == adding
    assert servers[f"{NAMESPACE}/gateway.adding"]["server"]["description"] == "Add and echo"
    assert all(item["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] for item in servers.values())


async def test_a_listed_remote_serves_that_group(served: tuple[Gateway, str]) -> None:
    _, url = served
    body = valid(await _get(url, "/v0.1/servers", search="adding"), "serverList")
    remote = body["servers"][0]["server"]["remotes"][0]["url"]
    async with http_client(remote.removesuffix("/mcp/g/adding"), KEYS["admin"], path="/mcp/g/adding") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"toy__add", "toy__echo"} <= names and "toy__increment" not in names


async def test_a_group_in_which_the_role_sees_no_tool_is_neither_listed_nor_found(
    served: tuple[Gateway, str],
) -> None:
    _, url = served
    body = valid(await _get(url, "/v0.1/servers", role="intern"), "serverList")
    assert [item["server"]["name"] for item in body["servers"]] == ALL[:2]
    hidden = quote(f"{NAMESPACE}/gateway.counting", safe="")
    answer = await _get(url, f"/v0.1/servers/{hidden}/versions/latest", role="intern")
    assert answer.status_code == 404
    assert valid(answer, "error") == {"error": "Server not found"}


async def test_pages_follow_the_cursor_to_the_end(served: tuple[Gateway, str]) -> None:
    _, url = served
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(len(ALL) + 1):
        params: dict[str, Any] = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        body = valid(await _get(url, "/v0.1/servers", **params), "serverList")
        seen += [item["server"]["name"] for item in body["servers"]]
        cursor = body["metadata"].get("nextCursor")
        if not cursor:
            break
    assert seen == ALL


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"search": "COUNT"}, ALL[2:]),
        ({"search": "nothing"}, []),
        ({"version": "9.9.9"}, []),
        ({"limit": "500"}, ALL),
    ],
)
async def test_search_and_version_filter_the_list(
    served: tuple[Gateway, str], params: dict[str, str], expected: list[str]
) -> None:
    _, url = served
    body = valid(await _get(url, "/v0.1/servers", **params), "serverList")
    assert [item["server"]["name"] for item in body["servers"]] == expected


async def test_one_server_s_versions_and_latest_version_are_found_by_its_encoded_name(
    served: tuple[Gateway, str],
) -> None:
    _, url = served
    name = quote(f"{NAMESPACE}/gateway.counting", safe="")
    versions = valid(await _get(url, f"/v0.1/servers/{name}/versions"), "serverList")
    [only] = versions["servers"]
    latest = valid(await _get(url, f"/v0.1/servers/{name}/versions/latest"), "serverResponse")
    exact = valid(await _get(url, f"/v0.1/servers/{name}/versions/{only['server']['version']}"), "serverResponse")
    assert latest == exact == only
    assert len(latest["server"]["description"]) == 100
    missing = await _get(url, f"/v0.1/servers/{name}/versions/0.0.0-nope")
    assert (missing.status_code, valid(missing, "error")) == (404, {"error": "Server version not found"})


@pytest.mark.parametrize("limit", ["0", "ten", "-1"])
async def test_a_bad_limit_is_a_400_naming_the_parameter(served: tuple[Gateway, str], limit: str) -> None:
    _, url = served
    answer = await _get(url, "/v0.1/servers", limit=limit)
    assert answer.status_code == 400
    assert "limit" in valid(answer, "error")["error"]


async def test_the_registry_takes_the_credentials_of_mcp(served: tuple[Gateway, str]) -> None:
    _, url = served
    assert (await _get(url, "/v0.1/servers", role=None)).status_code == 401


async def test_publishing_is_answered_with_a_json_501(served: tuple[Gateway, str]) -> None:
    _, url = served
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.post(
            f"{url}/v0.1/publish", json={"name": "x/y"}, headers={"Authorization": f"Bearer {KEYS['admin']}"}
        )
    assert answer.status_code == 501 and answer.headers["content-type"] == "application/json"
    assert "not supported" in valid(answer, "error")["error"]


@pytest.mark.parametrize(
    ("auth", "declared"),
    [
        ({"enabled": False}, None),
        ({"anonymous_role": "intern"}, [{**BEARER, "isRequired": False}]),
    ],
)
async def test_the_bearer_header_is_declared_only_with_auth_on_and_required_only_without_an_anonymous_role(
    tmp_path: Path, auth: dict[str, Any], declared: list[dict[str, Any]] | None
) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, auth={**auth_section(), **auth})
    async with http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url):
        body = valid(await _get(url, "/v0.1/servers", role=None), "serverList")
    [remote] = body["servers"][0]["server"]["remotes"]
    assert remote.get("headers") == declared
