"""Many upstreams behind one front door: names, routing of calls, resources, prompts and pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway.catalog.naming import VALID_NAME
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.support.harness import gateway_client, in_memory, make_config, placeholder
from tests.support.probe import Observed, probe_server
from tests.support.toy import PIXEL
from tests.support.toy import build_server as toy
from tests.support.waiting import Inbox

pytestmark = pytest.mark.anyio


def two_toys(tmp_path: Path, **servers: Any) -> tuple[Any, Any]:
    """A config with servers alpha and beta (overridable), both toys in memory."""
    entries = {**placeholder(["alpha", "beta"]), **servers}
    config = make_config(tmp_path, entries)
    return config, in_memory({"alpha": toy("alpha"), "beta": toy("beta")})


async def test_every_exposed_name_is_valid_and_maps_back_to_its_original(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports) as (gateway, client):
        listed = (await client.list_tools()).tools
        assert listed and all(VALID_NAME.match(tool.name) for tool in listed)
        for tool in listed:
            record = gateway.catalog.tool(tool.name)
            assert record is not None
            assert tool.name == f"{record.source}__{record.original_name}"


async def test_the_same_tool_name_on_two_servers_reaches_each_server(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        await client.call_tool("alpha__echo", {"text": "a"})
        await client.call_tool("alpha__echo", {"text": "a"})
        await client.call_tool("beta__echo", {"text": "b"})
        alpha = await client.call_tool("alpha__calls", {})
        beta = await client.call_tool("beta__calls", {})
        assert (alpha.content[0].text, beta.content[0].text) == ("2", "1")  # type: ignore[union-attr]


async def test_a_namespace_override_prefixes_that_servers_tools(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path, beta={"command": "unused", "namespace": "b2"})
    async with gateway_client(config, transports=transports) as (_, client):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "b2__echo" in names and "beta__echo" not in names
        result = await client.call_tool("b2__echo", {"text": "via b2"})
        assert result.content[0].text == "via b2"  # type: ignore[union-attr]


async def test_the_same_config_gives_the_same_names_on_every_start(tmp_path: Path) -> None:
    tools = {"echo": {"name": "alpha__echo"}, "add": {"name": "sum.of.two"}}
    servers = {"alpha": {"command": "unused", "tools": tools}, "beta": {"command": "unused"}}

    async def names() -> list[str]:
        config, transports = two_toys(tmp_path, **servers)
        async with gateway_client(config, transports=transports) as (_, client):
            return [tool.name for tool in (await client.list_tools()).tools]

    first, second = await names(), await names()
    assert first == second
    assert all(VALID_NAME.match(name) for name in first)


async def test_a_tool_override_under_another_server_s_namespace_leaves_the_tool_out_and_is_reported(
    tmp_path: Path,
) -> None:
    alpha = {"command": "unused", "tools": {"add": {"name": "beta__echo"}}}
    config, transports = two_toys(tmp_path, alpha=alpha)
    async with gateway_client(config, transports=transports) as (gateway, client):
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert len(names) == len(set(names)) and "alpha__add" not in names
        echo = gateway.catalog.tool("beta__echo")
        assert echo is not None and echo.source == "beta"
        (left,) = gateway.catalog.withheld
        assert (left.source, left.original, left.holder) == ("alpha", "add", "beta")
        result = await client.call_tool("beta__echo", {"text": "still beta's"})
        assert result.content[0].text == "still beta's"  # type: ignore[union-attr]


async def test_an_override_with_characters_clients_refuse_is_made_valid(tmp_path: Path) -> None:
    alpha = {"command": "unused", "tools": {"add": {"name": "math.add"}}}
    config, transports = two_toys(tmp_path, alpha=alpha)
    async with gateway_client(config, transports=transports) as (_, client):
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert all(VALID_NAME.match(name) for name in names)
        exposed = next(name for name in names if name.startswith("math_add"))
        result = await client.call_tool(exposed, {"a": 1, "b": 2})
        assert result.structured_content == {"result": 3}


async def test_a_tool_name_too_long_is_shortened_and_still_callable(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["alpha"]))
    transports = in_memory({"alpha": toy("alpha", tool_prefix="a" * 70 + "_")})
    async with gateway_client(config, transports=transports) as (gateway, client):
        names = [tool.name for tool in (await client.list_tools()).tools]
        long = [name for name in names if name.startswith("alpha__aaa")]
        assert long and all(len(name) <= 64 and VALID_NAME.match(name) for name in long)
        echo = next(name for name in long if gateway.catalog.tool(name).original_name.endswith("echo"))  # type: ignore[union-attr]
        result = await client.call_tool(echo, {"text": "long"})
        assert result.content[0].text == "long"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("server", "tool", "arguments"),
    [
        ("toy", "picture", {}),
        ("toy", "weather", {"city": "Oslo"}),
        ("toy", "fail", {"message": "boom"}),
        ("probe", "document", {}),
    ],
)
async def test_results_come_back_exactly_as_the_upstream_gave_them(
    tmp_path: Path, server: str, tool: str, arguments: dict[str, Any]
) -> None:
    upstreams = {"toy": toy(), "probe": probe_server(Observed())}
    async with Client(upstreams[server], mode="legacy") as direct:
        expected = await direct.call_tool(tool, arguments)
    config = make_config(tmp_path, placeholder(["toy", "probe"]))
    async with gateway_client(config, transports=in_memory(upstreams)) as (_, client):
        result = await client.call_tool(f"{server}__{tool}", arguments)
    assert result.content == expected.content
    assert (result.structured_content, result.is_error) == (expected.structured_content, expected.is_error)


async def test_images_structure_and_errors_survive_the_trip(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with gateway_client(config, transports=in_memory({"toy": toy()})) as (_, client):
        picture = await client.call_tool("toy__picture", {})
        assert picture.content[1] == types.ImageContent(data=PIXEL, mime_type="image/png")
        weather = await client.call_tool("toy__weather", {"city": "Oslo"})
        assert weather.structured_content == {"city": "Oslo", "temperature": 21.5}
        failed = await client.call_tool("toy__fail", {"message": "boom"})
        assert failed.is_error


async def test_progress_of_an_upstream_call_reaches_the_client(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    seen: Inbox[tuple[float, float | None, str | None]] = Inbox()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.add((progress, total, message))

    async with gateway_client(config, transports=transports) as (_, client):
        result = await client.call_tool("alpha__sleep", {"seconds": 0.05}, progress_callback=on_progress)
        assert result.content[0].text == "slept 0.05"  # type: ignore[union-attr]
        # Progress is throttled per call: the first and the last report always arrive.
        await seen.until(lambda: seen[-1:] == [(9, 10, "step 9")], "the last progress report")
        assert seen[0] == (0, 10, "step 0")


async def test_a_cancelled_call_stops_on_the_upstream_which_stays_usable(tmp_path: Path) -> None:
    observed = Observed()
    config = make_config(tmp_path, placeholder(["probe", "toy"]))
    transports = in_memory({"probe": probe_server(observed), "toy": toy()})
    async with gateway_client(config, transports=transports) as (_, client):
        # Cancelled once the upstream has it, however long a busy machine takes to get it there.
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "probe__hang", {})
                await observed.started.wait()
                group.cancel_scope.cancel()
        with anyio.fail_after(5):
            await observed.cancelled.wait()
        result = await client.call_tool("probe__document", {})
        assert result.content[0].text == "see attached"  # type: ignore[union-attr]


async def test_a_call_abandoned_after_its_timeout_is_cancelled_on_the_upstream(tmp_path: Path) -> None:
    observed = Observed()
    config = make_config(tmp_path, placeholder(["probe"]))
    async with gateway_client(config, transports=in_memory({"probe": probe_server(observed)})) as (_, client):
        with pytest.raises(MCPError):
            await client.call_tool("probe__hang", {}, read_timeout_seconds=0.3)
        with anyio.fail_after(5):
            await observed.cancelled.wait()
        assert not (await client.call_tool("probe__document", {})).is_error


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_tools_are_paged_across_servers_with_the_gateways_cursors(tmp_path: Path, mode: str) -> None:
    config = make_config(tmp_path, placeholder(["alpha", "beta"]))
    transports = in_memory({"alpha": toy("alpha", extra_tools=4), "beta": toy("beta", extra_tools=4)})
    async with Gateway(config, transports=transports) as gateway:
        expected = [tool.name for tool in gateway.catalog.tools]
        async with Client(build_server(gateway, page_size=5), mode=mode) as client:
            names: list[str] = []
            cursor: str | None = None
            pages = 0
            while True:
                result = await client.list_tools(cursor=cursor)
                assert len(result.tools) <= 5
                names += [tool.name for tool in result.tools]
                pages += 1
                cursor = result.next_cursor
                if cursor is None:
                    break
        assert names == expected and pages == -(-len(expected) // 5)
        assert any(name.startswith("alpha__") for name in names) and any(name.startswith("beta__") for name in names)


async def test_an_invalid_cursor_is_a_protocol_error(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        with pytest.raises(MCPError, match="Invalid cursor"):
            await client.list_tools(cursor="not-a-cursor!")


async def test_an_unknown_tool_is_a_protocol_error(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("gamma__echo", {"text": "x"})


async def test_resources_and_templates_are_namespaced_and_read_from_their_server(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        uris = [resource.uri for resource in (await client.list_resources()).resources]
        assert sorted(uris) == ["alpha+toy://readme", "beta+toy://readme"]
        readme = await client.read_resource("beta+toy://readme")
        assert readme.contents[0].text == "readme of beta"  # type: ignore[union-attr]
        assert readme.contents[0].uri == "beta+toy://readme"
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert "alpha+toy://items/{item}" in templates
        item = await client.read_resource("alpha+toy://items/cup")
        assert item.contents[0].text == "item cup of alpha"  # type: ignore[union-attr]


async def test_reading_an_unknown_resource_is_a_protocol_error(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        with pytest.raises(MCPError, match="Unknown resource"):
            await client.read_resource("gamma+toy://readme")


async def test_prompts_are_namespaced_and_got_from_their_server(tmp_path: Path) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports) as (_, client):
        names = sorted(prompt.name for prompt in (await client.list_prompts()).prompts)
        assert names == ["alpha__greet", "beta__greet"]
        prompt = await client.get_prompt("beta__greet", {"who": "Ada"})
        assert "Hello Ada from beta" in prompt.messages[0].content.text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_calls_route_in_both_protocol_eras(tmp_path: Path, mode: str) -> None:
    config, transports = two_toys(tmp_path)
    async with gateway_client(config, transports=transports, mode=mode) as (_, client):
        result = await client.call_tool("beta__add", {"a": 20, "b": 22})
        assert result.structured_content == {"result": 42}
