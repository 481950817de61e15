"""The gateway's transports: streamable HTTP and stdio in, stdio / streamable HTTP / SSE out."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml
from mcp import Client, StdioServerParameters

from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.support.harness import REPO, http_gateway, in_memory, make_config, placeholder, toy_stdio, until_listed
from tests.support.probe import Observed, probe_server, refused_transport, toy_process
from tests.support.rawsessions import INITIALIZE, MCP_HEADERS
from tests.support.toy import build_server as toy
from tests.support.waiting import Inbox, ends_of

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "2026-07-28"]


@pytest.mark.parametrize("mode", ERAS)
async def test_clients_of_both_eras_call_tools_over_streamable_http(tmp_path: Path, mode: str) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        Client(f"{url}/mcp", mode=mode) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "toy__echo" in names
        result = await client.call_tool("toy__add", {"a": 1, "b": 2})
        assert result.structured_content == {"result": 3}


@pytest.mark.parametrize("mode", ERAS)
async def test_clients_of_both_eras_call_tools_over_stdio(tmp_path: Path, mode: str) -> None:
    config_file = tmp_path / "gateway.yaml"
    gateway_section = {"data_dir": str(tmp_path / "data")}
    config_file.write_text(yaml.safe_dump({"gateway": gateway_section, "servers": {"toy": toy_stdio()}}))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "--log-level", "WARNING", "stdio", "--config", str(config_file)],
        cwd=str(REPO),
    )
    with anyio.fail_after(30):
        async with Client(params, mode=mode) as client:
            await until_listed(client, "toy__echo")
            result = await client.call_tool("toy__echo", {"text": "over stdio"})
            assert result.content[0].text == "over stdio"  # type: ignore[union-attr]


@pytest.mark.parametrize("origin", ["http://evil.example", "https://127.0.0.1.evil.example"])
async def test_a_foreign_origin_is_refused_with_403(tmp_path: Path, origin: str) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        response = await http.post(f"{url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Origin": origin})
    assert response.status_code == 403


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:6274", "http://localhost"])
async def test_a_loopback_origin_is_allowed(tmp_path: Path, origin: str) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        response = await http.post(f"{url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Origin": origin})
    assert response.status_code == 200


async def test_a_configured_origin_is_allowed(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]), allowed_origins=["https://app.example"])
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        headers = {**MCP_HEADERS, "Origin": "https://app.example"}
        response = await http.post(f"{url}/mcp", json=INITIALIZE, headers=headers)
    assert response.status_code == 200


async def test_health_and_readiness_report_each_server(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": {"command": "unused", "required": True}})
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        health = await http.get(f"{url}/healthz")
        ready = await http.get(f"{url}/readyz")
    assert health.status_code == 200
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] is True
    assert body["servers"]["toy"]["state"] == "ready" and body["servers"]["toy"]["tools"] > 0


async def test_readiness_is_503_while_a_required_server_is_down(tmp_path: Path) -> None:
    servers = {"toy": {"command": "unused"}, "needed": {"command": "unused", "required": True}}
    config = make_config(tmp_path, servers)
    transports = {**in_memory({"toy": toy()}), "needed": refused_transport}
    async with http_gateway(config, transports=transports) as (_, url), httpx2.AsyncClient() as http:
        ready = await http.get(f"{url}/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["ready"] is False
    assert body["servers"]["needed"]["state"] != "ready" and body["servers"]["needed"]["required"] is True
    assert body["servers"]["toy"]["state"] == "ready"


async def test_a_down_optional_server_leaves_the_gateway_ready(tmp_path: Path) -> None:
    servers = {"toy": {"command": "unused", "required": True}, "extra": {"command": "unused"}}
    config = make_config(tmp_path, servers)
    transports = {**in_memory({"toy": toy()}), "extra": refused_transport}
    async with http_gateway(config, transports=transports) as (_, url), httpx2.AsyncClient() as http:
        ready = await http.get(f"{url}/readyz")
    assert ready.status_code == 200 and ready.json()["servers"]["extra"]["state"] != "ready"


async def test_each_http_session_gets_its_own_context_released_when_it_ends(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url):
        async with Client(f"{url}/mcp", mode="legacy") as first, Client(f"{url}/mcp", mode="legacy") as second:
            await first.call_tool("toy__increment", {})
            await second.call_tool("toy__increment", {})
            live = gateway.sessions.live()
            assert len(live) == 2 and {context.transport for context in live} == {"http"}
            assert len({context.id for context in live}) == 2
            ended = ends_of(live)
        await ended()
        assert len(gateway.sessions) == 0


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_an_upstream_over_http_is_reached(tmp_path: Path, transport: str) -> None:
    async with toy_process(transport, "remote") as port:
        url = f"http://127.0.0.1:{port}/mcp" if transport == "streamable-http" else f"http://127.0.0.1:{port}/sse"
        config = make_config(tmp_path, {"remote": {"url": url}})
        assert config.servers[0].transport == ("http" if transport == "streamable-http" else "sse")
        async with http_gateway(config) as (gateway, gateway_url), Client(f"{gateway_url}/mcp") as client:
            result = await client.call_tool("remote__echo", {"text": f"via {transport}"})
            assert result.content[0].text == f"via {transport}"  # type: ignore[union-attr]
            readme = await client.read_resource("remote+toy://readme")
            assert readme.contents[0].text == "readme of remote"  # type: ignore[union-attr]
            assert gateway.servers.statuses()[0].transport == config.servers[0].transport


async def test_a_stdio_upstream_keeps_its_state_across_calls(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": toy_stdio()})
    async with http_gateway(config) as (_, url), Client(f"{url}/mcp") as client:
        counts = [(await client.call_tool("toy__increment", {})).content[0].text for _ in range(3)]  # type: ignore[union-attr]
    assert counts == ["1", "2", "3"]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_cancelled_over_http_is_cancelled_on_the_upstream(tmp_path: Path, mode: str) -> None:
    observed = Observed()
    config = make_config(tmp_path, placeholder(["probe"]))
    async with (
        http_gateway(config, transports=in_memory({"probe": probe_server(observed)})) as (_, url),
        Client(f"{url}/mcp", mode=mode) as client,
    ):
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "probe__hang", {})
                await observed.started.wait()
                group.cancel_scope.cancel()
        with anyio.fail_after(5):
            await observed.cancelled.wait()
        assert not (await client.call_tool("probe__document", {})).is_error


async def test_an_in_memory_session_has_its_own_context_released_when_it_ends(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with Gateway(config, transports=in_memory({"toy": toy()})) as gateway:
        server = build_server(gateway)
        async with Client(server, mode="legacy") as first, Client(server, mode="legacy") as second:
            await first.call_tool("toy__echo", {"text": "1"})
            await second.call_tool("toy__echo", {"text": "2"})
            assert len(gateway.sessions) == 2
            ended = ends_of(gateway.sessions.live())
        await ended()
        assert len(gateway.sessions) == 0


@pytest.mark.parametrize("mode", ERAS)
async def test_progress_reaches_a_client_over_http(tmp_path: Path, mode: str) -> None:
    seen: Inbox[float] = Inbox()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.add(progress)

    config = make_config(tmp_path, placeholder(["toy"]))
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        Client(f"{url}/mcp", mode=mode) as client,
    ):
        result = await client.call_tool("toy__sleep", {"seconds": 0.1}, progress_callback=on_progress)
        assert not result.is_error
        # Progress is throttled per call: the first and the last report always arrive.
        await seen.until(lambda: seen[-1:] == [9], "the last progress report")
        assert seen[0] == 0
