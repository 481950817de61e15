"""Servers exposed without a prefix (`namespace: ""`), clashes between their names, and the resource
URIs that tool results point at, read back through the gateway."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway.config.loading import load_config
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.support.harness import REPO, gateway_client, http_gateway, in_memory, make_config
from tests.support.linked import STATIC, linking_server, partial_server
from tests.support.probe import gated
from tests.support.toy import build_server as toy
from tests.support.waiting import catalog_until

pytestmark = pytest.mark.anyio

UNPREFIXED = {"command": "unused", "namespace": ""}
BLOB = "demo://resource/dynamic/blob/{resource_id}"
# A hang guard only: in-memory servers list in milliseconds.
JOIN_LIMIT = 60


def linked_stdio(name: str, *extra: str) -> dict[str, Any]:
    """The config entry of a `tests.support.linked` server run as a real stdio process, unprefixed."""
    args = ["-m", "tests.support.linked", "--name", name, *extra]
    return {"command": sys.executable, "args": args, "cwd": str(REPO), "namespace": ""}


def exposed(gateway: Gateway, source: str, original: str) -> str:
    """The exposed name of `source`'s tool `original`."""
    return next(tool.name for tool in gateway.catalog.tools if (tool.source, tool.original_name) == (source, original))


def text(result: Any, index: int = 0) -> str:
    """The text of one content item of a tool result or resource read."""
    items: list[Any] = result.content if isinstance(result, types.CallToolResult) else result.contents
    value: str = items[index].text
    return value


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_server_without_a_namespace_is_served_under_its_own_names(tmp_path: Path, mode: str) -> None:
    config = make_config(tmp_path, {"demo": UNPREFIXED, "toy": {"command": "unused"}})
    transports = in_memory({"demo": linking_server("demo"), "toy": toy("toy")})
    async with gateway_client(config, transports=transports, mode=mode) as (_, client):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"echo", "link", "toy__echo"} <= tools
        assert text(await client.call_tool("echo", {"text": "hi"})) == "demo: hi"
        assert [prompt.name for prompt in (await client.list_prompts()).prompts] == ["hello", "toy__greet"]
        hello = await client.get_prompt("hello", {"who": "Ada"})
        assert "Hello Ada from demo" in hello.messages[0].content.text  # type: ignore[union-attr]
        uris = [resource.uri for resource in (await client.list_resources()).resources]
        assert uris == [STATIC, "toy+toy://readme"]
        templates = [item.uri_template for item in (await client.list_resource_templates()).resource_templates]
        assert templates == [BLOB, "toy+toy://items/{item}"]
        assert text(await client.read_resource(STATIC)) == "readme of demo"
        blob = await client.read_resource("demo://resource/dynamic/blob/7")
        assert (text(blob), blob.contents[0].uri) == ("blob 7 of demo", "demo://resource/dynamic/blob/7")
        assert text(await client.read_resource("toy+toy://items/cup")) == "item cup of toy"


async def test_of_two_servers_without_a_namespace_the_first_to_list_a_name_keeps_it_and_the_other_s_tool_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, {"one": UNPREFIXED, "two": UNPREFIXED})
    gate = anyio.Event()
    transports = {"one": in_memory({"one": linking_server("one")})["one"], "two": gated(linking_server("two"), gate)}
    gateway = Gateway(config, transports=transports)
    with caplog.at_level(logging.WARNING):
        async with gateway.running(), Client(build_server(gateway), mode="legacy") as client:
            with anyio.fail_after(JOIN_LIMIT):
                await gateway.upstreams["one"].first_attempt.wait()
                gate.set()
                await gateway.upstreams["two"].first_attempt.wait()
            assert text(await client.call_tool("echo", {"text": "x"})) == "one: x"
            assert {(tool.source, tool.name) for tool in gateway.catalog.tools} == {("one", "echo"), ("one", "link")}
            assert [(left.source, left.original, left.holder) for left in gateway.catalog.withheld] == [
                ("two", "echo", "one"),
                ("two", "link", "one"),
            ]
            prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
            assert prompts[0] == "hello" and prompts[1].startswith("hello_")
            uris = [resource.uri for resource in (await client.list_resources()).resources]
            assert uris == [STATIC, f"two+{STATIC}"]
            assert text(await client.read_resource(f"two+{STATIC}")) == "readme of two"
            assert text(await client.read_resource(STATIC)) == "readme of one"
            templates = [item.uri_template for item in (await client.list_resource_templates()).resource_templates]
            assert templates == [BLOB, f"two+{BLOB}"]
            assert text(await client.read_resource("two+demo://resource/dynamic/blob/3")) == "blob 3 of two"
            # Told once, not again with every later change of the catalog.
            await gateway.servers.restart("two")
            with anyio.fail_after(JOIN_LIMIT):
                await gateway.upstreams["two"].first_attempt.wait()
    described = [clash.describe() for clash in gateway.catalog.clashes]
    assert any(STATIC in line and f"two+{STATIC}" in line for line in described)
    assert caplog.text.count("tool 'echo' of server 'two' left out: the name 'echo' belongs to server 'one'") == 1


async def test_an_unprefixed_name_under_another_server_s_namespace_is_left_out_and_reported(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"plain": UNPREFIXED, "alpha": {"command": "unused"}})
    transports = in_memory({"alpha": toy("alpha"), "plain": toy("plain", tool_prefix="alpha__")})
    async with gateway_client(config, transports=transports) as (gateway, client):
        kept = gateway.catalog.tool("alpha__echo")
        assert kept is not None and kept.source == "alpha"
        assert text(await client.call_tool("alpha__echo", {"text": "alpha's"})) == "alpha's"
        assert [(left.source, left.original) for left in gateway.catalog.withheld] == [("plain", "alpha__echo")]
        (status,) = [status for status in gateway.servers.statuses() if status.name == "plain"]
        assert [left.holder for left in status.withheld] == ["alpha"]


@pytest.mark.parametrize(("namespace", "prefix"), [(None, "demo+"), ("", "")])
async def test_resource_links_in_a_result_name_uris_the_client_can_read_back(
    tmp_path: Path, namespace: str | None, prefix: str
) -> None:
    entry: dict[str, Any] = {"command": "unused"} if namespace is None else {"command": "unused", "namespace": ""}
    config = make_config(tmp_path, {"demo": entry})
    async with gateway_client(config, transports=in_memory({"demo": linking_server()})) as (_, client):
        result = await client.call_tool(f"{'demo__' if prefix else ''}link", {"resource_id": "1"})
        link, embedded = result.content[1], result.content[2]
        assert isinstance(link, types.ResourceLink) and isinstance(embedded, types.EmbeddedResource)
        assert link.uri == f"{prefix}demo://resource/dynamic/blob/1"
        assert embedded.resource.uri == f"{prefix}{STATIC}"
        assert text(await client.read_resource(link.uri)) == "blob 1 of demo"
        assert text(await client.read_resource(embedded.resource.uri)) == "readme of demo"


async def test_a_link_to_a_uri_another_server_keeps_is_given_its_own_server_s_prefix(tmp_path: Path) -> None:
    two = {**UNPREFIXED, "tools": {"link": {"name": "link_two"}}}
    config = make_config(tmp_path, {"one": UNPREFIXED, "two": two})
    transports = in_memory({"one": linking_server("one"), "two": linking_server("two")})
    async with gateway_client(config, transports=transports) as (_, client):
        result = await client.call_tool("link_two", {"resource_id": "5"})
        embedded = result.content[2]
        assert isinstance(embedded, types.EmbeddedResource) and embedded.resource.uri == f"two+{STATIC}"
        assert text(await client.read_resource(embedded.resource.uri)) == "readme of two"


async def test_an_mcp_servers_file_may_expose_a_stdio_server_without_a_prefix(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {"demo server": linked_stdio("demo")}}))
    config = load_config(path, {"GATEWAY_DATA_DIR": str(tmp_path / "data")})
    assert [(server.name, server.prefix) for server in config.servers] == [("demo_server", "")]
    async with gateway_client(config) as (_, client):
        assert text(await client.call_tool("echo", {"text": "over stdio"})) == "demo: over stdio"
        assert text(await client.read_resource("demo://resource/dynamic/blob/2")) == "blob 2 of demo"


@pytest.mark.parametrize("over", ["memory", "stdio"])
async def test_a_server_without_resource_templates_is_served_all_the_same(
    tmp_path: Path, over: str, caplog: pytest.LogCaptureFixture
) -> None:
    entry = linked_stdio("partial", "--partial") if over == "stdio" else {"command": "unused"}
    config = make_config(tmp_path, {"partial": {**entry, "namespace": "partial"}})
    transports = in_memory({"partial": partial_server()}) if over == "memory" else None  # type: ignore[dict-item]
    with caplog.at_level(logging.INFO, logger="gateway.upstreams.connection"):
        async with gateway_client(config, transports=transports) as (gateway, client):
            assert text(await client.call_tool("partial__echo", {"text": "x"})) == "partial: x"
            assert [resource.uri for resource in (await client.list_resources()).resources] == [
                "partial+partial://notes"
            ]
            assert (await client.list_resource_templates()).resource_templates == []
            assert text(await client.read_resource("partial+partial://notes")) == "the notes"
            assert gateway.servers.statuses()[0].tools == 1
    assert caplog.text.count("does not implement resources/templates/list") == 1


async def test_a_server_registered_without_a_namespace_joins_one_from_the_file_without_its_names(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path, {"one": UNPREFIXED})
    transports = in_memory({"one": linking_server("one"), "two": linking_server("two")})
    async with gateway_client(config, transports=transports) as (gateway, client):
        await gateway.servers.add({"name": "two", **UNPREFIXED, "tools": {"link": {"name": "link_two"}}})
        await catalog_until(gateway, lambda: "two" in gateway.catalog.sources(), "server two in the catalog")
        assert text(await client.call_tool("echo", {"text": "x"})) == "one: x"
        assert exposed(gateway, "two", "link") == "link_two"
        (status,) = [status for status in gateway.servers.statuses() if status.name == "two"]
        assert [(left.original, left.holder) for left in status.withheld] == [("echo", "one")]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_over_http_an_unprefixed_server_s_links_are_read_back_in_both_eras(tmp_path: Path, mode: str) -> None:
    config = make_config(tmp_path, {"demo": UNPREFIXED})
    async with (
        http_gateway(config, transports=in_memory({"demo": linking_server()})) as (_, url),
        Client(f"{url}/mcp", mode=mode) as client,
    ):
        result = await client.call_tool("link", {"resource_id": "4"})
        link = result.content[1]
        assert isinstance(link, types.ResourceLink) and link.uri == "demo://resource/dynamic/blob/4"
        assert text(await client.read_resource(link.uri)) == "blob 4 of demo"
        assert [prompt.name for prompt in (await client.list_prompts()).prompts] == ["hello"]
