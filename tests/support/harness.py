"""A real gateway for tests: configs, in-memory upstreams, and the gateway over HTTP or in memory."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
import pytest
import uvicorn
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.client.context import ClientRequestContext
from mcp.server.connection import Connection
from mcp.server.mcpserver import MCPServer

from gateway.cli.main import main
from gateway.config.loading import parse_config
from gateway.config.model import GatewayConfig
from gateway.frontdoors.httpapp import create_app
from gateway.frontdoors.mcpserver import CONNECTION_KEY, build_server
from gateway.service import Gateway
from gateway.upstreams.transports import TransportFactory
from tests.support.waiting import LIMIT, Inbox, Lines, poll_until

REPO = Path(__file__).resolve().parents[2]


def toy_stdio(name: str = "toy", *extra: str) -> dict[str, Any]:
    """The config entry of a toy server run as a real stdio process."""
    return {"command": sys.executable, "args": ["-m", "tests.support.toy", "--name", name, *extra], "cwd": str(REPO)}


def make_config(
    tmp_path: Path, servers: Mapping[str, Any], *, sections: Mapping[str, Any] | None = None, **settings: Any
) -> GatewayConfig:
    """A validated gateway config with its data under `tmp_path`, and other top-level `sections` (`tracing`)."""
    gateway = {"data_dir": str(tmp_path / "data"), "restart_backoff_initial": 0.05, **settings}
    local_tools = gateway.pop("local_tools", [])
    data: dict[str, Any] = {"gateway": gateway, "servers": dict(servers), **(sections or {})}
    if local_tools:
        data["local_tools"] = local_tools
    return parse_config(data, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)


def in_memory(servers: Mapping[str, MCPServer]) -> dict[str, TransportFactory]:
    """Transports that reach each server object in memory."""

    def reach(server: MCPServer) -> TransportFactory:
        return lambda: InMemoryTransport(server)

    return {name: reach(server) for name, server in servers.items()}


def placeholder(names: list[str]) -> dict[str, Any]:
    """Config entries for servers whose transport the test supplies in memory."""
    return {name: {"command": "unused"} for name in names}


@asynccontextmanager
async def gateway_client(
    config: GatewayConfig,
    *,
    transports: Mapping[str, TransportFactory] | None = None,
    mode: str = "legacy",
    **client_options: Any,
) -> AsyncIterator[tuple[Gateway, Client]]:
    """A started gateway and an SDK client connected to its MCP server in memory."""
    async with (
        Gateway(config, transports=transports) as gateway,
        Client(build_server(gateway), mode=mode, **client_options) as client,
    ):
        yield gateway, client


def free_port() -> int:
    """A TCP port on loopback that nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def loopback_listener() -> Iterator[tuple[socket.socket, int]]:
    """A socket listening on a free loopback port, and the port: bound before a server starts on
    it (as `serve` does), so that no other process takes the port meanwhile and a request made
    before the server runs waits to be accepted."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener, listener.getsockname()[1]


@asynccontextmanager
async def serving(app: Any, listener: socket.socket, *, lifespan: Literal["on", "off"] = "on") -> AsyncIterator[None]:
    """`app` served by uvicorn on `listener` until the block ends, entered once its lifespan has
    started and it accepts."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    async with anyio.create_task_group() as group:
        group.start_soon(partial(server.serve, sockets=[listener]))
        await poll_until(lambda: server.started, "uvicorn to start serving")
        try:
            yield
        finally:
            server.should_exit = True


@asynccontextmanager
async def http_gateway(
    config: GatewayConfig,
    *,
    transports: Mapping[str, TransportFactory] | None = None,
    settled: bool = True,
    host: str = "127.0.0.1",
    **options: Any,
) -> AsyncIterator[tuple[Gateway, str]]:
    """The gateway served over real HTTP on loopback (`options` go to `Gateway`); yields it and its
    base URL once it serves and, when `settled`, each upstream has tried once to connect. `host` is
    the address the app is told it serves on (another than loopback turns the loopback rules off)."""
    gateway = Gateway(config, transports=transports, **options)
    app = create_app(config, gateway=gateway, host=host)
    with loopback_listener() as (listener, port):
        async with serving(app, listener):
            if settled:
                await gateway.wait_for_upstreams(gateway.upstreams.values())
            yield gateway, f"http://127.0.0.1:{port}"


async def until_listed(client: Client, name: str) -> None:
    """Wait until the client is offered the tool `name`: upstreams join the catalog as they connect.

    It lists again every 50 ms: a handshake-era client over HTTP is told of a change only once its
    stream is open, which nothing tells it, so a notice it could wait for may never come."""

    async def offered() -> bool:
        return name in {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}

    await poll_until(offered, f"{name} offered to the client")


def listening(gateway: Gateway) -> bool:
    """Whether a handshake-era client of `gateway` has its stream for notifications open."""
    connections = [context.state.get(CONNECTION_KEY) for context in gateway.sessions.live()]
    return any(isinstance(connection, Connection) and connection.has_standalone_channel for connection in connections)


def collector() -> tuple[Inbox[Any], Any]:
    """A message handler for a client that keeps every notification it receives, and what it kept."""
    received: Inbox[Any] = Inbox()
    return received, received.put


def told_tools_changed(received: list[Any]) -> bool:
    """Whether a tools/list_changed notification arrived."""
    return tools_told(received) > 0


def tools_told(received: list[Any]) -> int:
    """How many tools/list_changed notifications arrived."""
    return sum(isinstance(message, types.ToolListChangedNotification) for message in received)


async def until_told_of(client: Client, received: Inbox[Any], name: str) -> None:
    """Wait until `client` is offered the tool `name`, listing again each time it is told its tools
    changed (`received` holds what its message handler got). A change before the first listing is
    in it; one after it is told."""
    what = f"a tools/list_changed notification offering {name}"
    while True:
        told = tools_told(received)
        if name in {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}:
            return
        await received.until(partial(_told_since, received, told), what)


def _told_since(received: list[Any], told: int) -> bool:
    return tools_told(received) > told


async def approve(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person behind a client, who approves every high-risk call the gateway asks about."""
    return types.ElicitResult(action="accept", content={"approve": True})


BANNER = re.compile(r"^Serving MCP at (?P<url>http://\S+)/mcp ")
"""The line `serve` prints once it has started, its socket listening."""


async def serving_url(said: Lines) -> str:
    """The base URL a `serve` process (on `--port 0`, so that no other takes its port) says it
    serves at, once it says so: from then on a request waits to be accepted, which is once the
    app's lifespan has started everything."""
    line = await said.until(lambda line: BANNER.match(line) is not None, "the gateway's banner")
    found = BANNER.match(line)
    assert found is not None
    return found["url"]


@dataclass(frozen=True)
class Served:
    """A gateway process that serves: its base URL and what it writes (stdout and stderr, in order)."""

    url: str
    output: Lines


@asynccontextmanager
async def gateway_process(config: Path, output: Path, *cli_options: str) -> AsyncIterator[Served]:
    """`python -m gateway [cli_options] serve` (default: its default log level and format), stdout and
    stderr copied into `output` as they come; yields it once it serves."""
    command = [sys.executable, "-m", "gateway", *cli_options, "serve", "--config", str(config), "--port", "0"]
    said = Lines(copy=output)
    async with (
        await anyio.open_process(command, cwd=REPO, stderr=subprocess.STDOUT) as process,
        anyio.create_task_group() as group,
    ):
        assert process.stdout is not None
        group.start_soon(said.read, process.stdout)
        try:
            url = await serving_url(said)
            async with httpx2.AsyncClient() as http:
                await http.get(f"{url}/healthz", timeout=LIMIT)
            yield Served(url, said)
        finally:
            process.terminate()
            with anyio.fail_after(20):
                await process.wait()


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the command line in this process; its exit code, stdout and stderr."""
    with pytest.raises(SystemExit) as exited:
        main(["--log-level", "WARNING", *args])
    out, err = capsys.readouterr()
    code = exited.value.code
    return (code if isinstance(code, int) else 1), out, err
