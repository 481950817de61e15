"""Every field of a listed tool passes through the gateway: icons, `_meta` with all its keys, and an MCP
Apps view, whose `ui://` URI is exposed under the tool's namespace in its scheme and reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from gateway.catalog.naming import exposed_name
from tests.support.faithful import APP_MIME, ICON, SERVER_ICON, UNLISTED_VIEW, VIEW, VIEW_CSP
from tests.support.faithful import build_server as faithful
from tests.support.harness import gateway_client, in_memory, make_config

pytestmark = pytest.mark.anyio
MODES = ["legacy", "2026-07-28"]
# A namespace as the config gives it: the server's name (the default), or none.
NAMESPACES = [pytest.param(None, id="prefixed"), pytest.param("", id="unprefixed")]


def _config(tmp_path: Path, namespace: str | None, *names: str) -> Any:
    entry: dict[str, Any] = (
        {"command": "unused"} if namespace is None else {"command": "unused", "namespace": namespace}
    )
    return make_config(tmp_path, {name: entry for name in names or ("faithful",)})


def _exposed_view(namespace: str | None, uri: str) -> str:
    """A view's URI as the gateway exposes it under the server `faithful`."""
    return uri if namespace == "" else uri.replace("ui://", "ui://faithful+", 1)


def _listed(tools: list[types.Tool]) -> dict[str, dict[str, Any]]:
    return {tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools}


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("mode", MODES)
async def test_every_field_of_a_listed_tool_passes_through_its_view_under_the_exposed_uri(
    tmp_path: Path, mode: str, namespace: str | None
) -> None:
    async with Client(faithful(), mode=mode) as direct:
        expected = _listed((await direct.list_tools()).tools)
    async with gateway_client(
        _config(tmp_path, namespace), transports=in_memory({"faithful": faithful()}), mode=mode
    ) as (_, client):
        through = _listed((await client.list_tools()).tools)
    for name, tool in expected.items():
        exposed = name if namespace == "" else exposed_name("faithful", name)
        meta = tool.get("_meta")
        if meta is not None:
            ui = meta["ui"]
            meta = {**meta, "ui": {**ui, "resourceUri": _exposed_view(namespace, ui["resourceUri"])}}
            if "ui/resourceUri" in meta:
                meta["ui/resourceUri"] = _exposed_view(namespace, meta["ui/resourceUri"])
            tool = {**tool, "_meta": meta}
        assert through[exposed] == {**tool, "name": exposed}
    clock = through["clock" if namespace == "" else "faithful__clock"]
    assert clock["icons"] == [ICON.model_dump(mode="json", by_alias=True, exclude_none=True)]
    assert clock["_meta"]["com.example/owner"] == {"team": "clocks", "tier": 2}


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_s_view_reads_back_through_the_uri_its_meta_names(
    tmp_path: Path, mode: str, namespace: str | None
) -> None:
    async with Client(faithful(), mode=mode) as direct:
        expected = [resource.model_dump(exclude={"uri"}) for resource in (await direct.list_resources()).resources]
    async with gateway_client(
        _config(tmp_path, namespace), transports=in_memory({"faithful": faithful()}), mode=mode
    ) as (_, client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        meta = tools["clock" if namespace == "" else "faithful__clock"].meta or {}
        uri = meta["ui"]["resourceUri"]
        resources = (await client.list_resources()).resources
        listed = [resource.uri for resource in resources]
        read = await client.read_resource(uri)
        flat = await client.read_resource(meta["ui/resourceUri"])
    assert uri == _exposed_view(namespace, VIEW) and uri.startswith("ui://")
    assert listed == [uri]
    # Every other field of the listed view (its name, type, `_meta`) as the server lists it.
    assert [resource.model_dump(exclude={"uri"}) for resource in resources] == expected
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents) and content.uri == uri
    assert content.mime_type == APP_MIME and content.meta == {"ui": {"csp": VIEW_CSP}}
    assert "Clock view of faithful" in content.text
    assert flat.contents[0].model_dump() == content.model_dump()


@pytest.mark.parametrize("namespace", NAMESPACES)
async def test_a_view_its_server_does_not_list_reads_back_through_its_tool(
    tmp_path: Path, namespace: str | None
) -> None:
    async with gateway_client(_config(tmp_path, namespace), transports=in_memory({"faithful": faithful()})) as (
        _,
        client,
    ):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        uri = (tools["hidden_clock" if namespace == "" else "faithful__hidden_clock"].meta or {})["ui"]["resourceUri"]
        listed = {resource.uri for resource in (await client.list_resources()).resources}
        read = await client.read_resource(uri)
    assert uri == _exposed_view(namespace, UNLISTED_VIEW) and uri not in listed
    assert "clock-hidden view" in read.contents[0].text  # type: ignore[union-attr]


async def test_two_unprefixed_servers_with_the_same_view_each_show_their_own(tmp_path: Path) -> None:
    servers = {"first": faithful("first"), "second": faithful("second")}
    config = make_config(
        tmp_path,
        {
            name: {"command": "unused", "namespace": "", "tools": {"clock": {"name": f"{name}_clock"}}}
            for name in servers
        },
    )
    async with gateway_client(config, transports=in_memory(servers)) as (_, client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        views = {name: (tools[f"{name}_clock"].meta or {})["ui"]["resourceUri"] for name in servers}
        pages = {name: (await client.read_resource(uri)).contents[0] for name, uri in views.items()}
    assert views == {"first": VIEW, "second": "ui://second+clock/view.html"}
    assert all(f"Clock view of {name}" in page.text for name, page in pages.items())  # type: ignore[union-attr]


async def test_a_server_s_own_icons_are_kept_with_its_status(tmp_path: Path) -> None:
    async with gateway_client(_config(tmp_path, None), transports=in_memory({"faithful": faithful()})) as (gateway, _):
        status = next(status for status in gateway.servers.statuses() if status.name == "faithful")
    assert status.icons == (SERVER_ICON,)
    assert status.as_dict()["icons"] == [
        {"src": "https://example.com/faithful.svg", "mimeType": "image/svg+xml", "theme": "light"}
    ]
