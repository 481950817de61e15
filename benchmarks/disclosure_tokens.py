"""What a client receives at the start of a session, with progressive disclosure and without.

Run `python -m benchmarks.disclosure_tokens` from the repository root. For two catalogs it starts
a real gateway twice and connects the SDK client over the initialize handshake:
- flat: every tool core, no skills, so tools/list carries every tool;
- disclosure: every server extended, one or more skills over them, so tools/list carries the
  meta-tools only and the model reaches the rest through Load_Skill, Find_Tools and Use_Tool.
The bundled catalog is the default configuration's servers, run as real stdio processes, with the
shipped skills. The generated catalog is 25 toy servers in memory with 20 tools each (500 tools),
and one skill per server.

Sizes are the bytes of the JSON-RPC messages the client reads, serialised exactly as the stdio
transport writes them (one line each). Tokens are estimated as bytes / 4, a common rule of thumb
for English and JSON; no tokenizer is involved.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.client._transport import TransportStreams
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from gateway.config.loading import default_config_path, load_config, parse_config
from gateway.config.model import GatewayConfig, ServerConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from gateway.upstreams.transports import TransportFactory
from tests.support.toy import build_server as build_toy

BYTES_PER_TOKEN = 4
# The share of the flat listing that the disclosure listing may cost for the generated catalog.
TARGET_SHARE = 0.10
SERVERS = 25
TOYS_OWN_TOOLS = 12
TOOLS_PER_SERVER = 20


@dataclass(frozen=True, slots=True)
class Received:
    """Bytes a client read at the start of one session."""

    tools: int
    initialize: int
    tools_list: int
    list_skills: int

    @property
    def start(self) -> int:
        """Initialize result plus every tools/list page: what a session pays before any call."""
        return self.initialize + self.tools_list


class Counter:
    """Adds up the wire size of every message the client reads."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, message: SessionMessage) -> None:
        """Count one message as the stdio transport writes it: its JSON and a newline."""
        self.total += len(message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()) + 1


@asynccontextmanager
async def counted(gateway: Gateway, counter: Counter) -> AsyncIterator[TransportStreams]:
    """An in-memory transport to the gateway's MCP server that counts what the client reads."""
    async with InMemoryTransport(build_server(gateway)) as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with send:
                async for message in read:
                    if isinstance(message, SessionMessage):
                        counter.add(message)
                    await send.send(message)

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            yield receive, write
            group.cancel_scope.cancel()


async def measure(config: GatewayConfig, transports: Mapping[str, TransportFactory] | None = None) -> Received:
    """Start the gateway, open one session, and count initialize, tools/list and one List_Skills."""
    counter = Counter()
    async with Gateway(config, transports=transports) as gateway:
        if gateway.skills.skills.problems:
            raise SystemExit("broken skills: " + "; ".join(str(p) for p in gateway.skills.skills.problems))
        async with Client(counted(gateway, counter), mode="legacy") as client:
            initialize = counter.total
            tools = 0
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
                tools += len(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            tools_list = counter.total - initialize
            list_skills = 0
            if gateway.skills.names:
                await client.call_tool("List_Skills", {})
                list_skills = counter.total - initialize - tools_list
    return Received(tools, initialize, tools_list, list_skills)


def extended(config: GatewayConfig) -> GatewayConfig:
    """`config` with every server and every tool override in the extended layer."""

    def server(entry: ServerConfig) -> ServerConfig:
        tools = {name: replace(tool, layer="extended") for name, tool in entry.tools.items()}
        return replace(entry, layer="extended", tools=tools)

    return replace(config, servers=tuple(server(entry) for entry in config.servers))


def flat(config: GatewayConfig) -> GatewayConfig:
    """`config` with every tool core and no skills: the listing without disclosure."""

    def server(entry: ServerConfig) -> ServerConfig:
        tools = {name: replace(tool, layer="core") for name, tool in entry.tools.items()}
        return replace(entry, layer="core", tools=tools)

    settings = replace(config.settings, skill_dirs=())
    return replace(config, settings=settings, servers=tuple(server(entry) for entry in config.servers))


def bundled(data_dir: Path) -> GatewayConfig:
    """The default configuration, with its data under `data_dir`."""
    return load_config(default_config_path(), environ={**os.environ, "GATEWAY_DATA_DIR": str(data_dir)})


def generated(root: Path) -> tuple[GatewayConfig, dict[str, TransportFactory]]:
    """25 toy servers of 20 tools each, one skill per server over all its tools, and their transports."""
    names = [f"s{index:02d}" for index in range(1, SERVERS + 1)]
    skills = root / "skills"
    for name in names:
        folder = skills / f"{name}-work"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}-work\ndescription: Everything server {name} offers - echo, arithmetic, counters,"
            f" weather and its numbered extra tools. Use it for any task on {name}.\n"
            f"allowed-tools: {name}__*\n---\n# Working with {name}\n\nCall its tools with Use_Tool.\n",
            encoding="utf-8",
        )
    data = {
        "gateway": {"data_dir": str(root / "data"), "skill_dirs": [str(skills)]},
        "servers": {name: {"command": "unused"} for name in names},
    }
    config = parse_config(data, source=str(root / "gateway.yaml"), base_dir=root)
    extra = TOOLS_PER_SERVER - TOYS_OWN_TOOLS
    transports = {name: _in_memory(build_toy(name, extra)) for name in names}
    return config, transports


def _in_memory(server: MCPServer) -> TransportFactory:
    """A transport factory reaching `server` in memory; building the server once saves most of the time."""

    def connect() -> InMemoryTransport:
        return InMemoryTransport(server)

    return connect


async def compare(
    config: GatewayConfig, transports: Mapping[str, TransportFactory] | None = None
) -> tuple[Received, Received]:
    """The flat listing and the disclosure listing of one catalog."""
    return await measure(flat(config), transports), await measure(extended(config), transports)


def report(title: str, without: Received, with_: Received) -> float:
    """Print one catalog's figures; returns the disclosure listing's share of the flat one."""
    share = with_.start / without.start
    print(f"\n{title}")
    print(f"  {'':<30} {'tools listed':>12} {'initialize B':>12} {'tools/list B':>12} {'total B':>9} {'~tokens':>8}")
    for label, row in (("flat (all core, no skills)", without), ("disclosure (extended + skills)", with_)):
        tokens = row.start // BYTES_PER_TOKEN
        print(f"  {label:<30} {row.tools:>12} {row.initialize:>12} {row.tools_list:>12} {row.start:>9} {tokens:>8}")
    print(f"  disclosure / flat: {share:.1%}")
    if with_.list_skills:
        print(f"  one List_Skills call adds {with_.list_skills} B (~{with_.list_skills // BYTES_PER_TOKEN} tokens)")
    return share


async def run(catalogs: list[str]) -> int:
    """Measure the chosen catalogs and print the table; 1 when the generated catalog misses the target."""
    print(f"Bytes a client reads at session start (initialize + tools/list); tokens ~ bytes / {BYTES_PER_TOKEN}.")
    status = 0
    with tempfile.TemporaryDirectory(prefix="disclosure-") as temporary:
        root = Path(temporary)
        if "bundled" in catalogs:
            without, with_ = await compare(bundled(root / "bundled"))
            report("Bundled catalog (default configuration, shipped skills)", without, with_)
        if "generated" in catalogs:
            config, transports = generated(root / "generated")
            without, with_ = await compare(config, transports)
            title = f"Generated catalog ({SERVERS} servers x {TOOLS_PER_SERVER} tools, one skill per server)"
            share = report(title, without, with_)
            verdict = "meets" if share <= TARGET_SHARE else "MISSES"
            print(f"  {verdict} the target of at most {TARGET_SHARE:.0%} of the flat listing")
            status = 0 if share <= TARGET_SHARE else 1
    return status


def main() -> None:
    """Entry point of `python -m benchmarks.disclosure_tokens`."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.disclosure_tokens", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--catalog", choices=["bundled", "generated", "both"], default="both", help="which catalog (default both)"
    )
    args = parser.parse_args()
    catalogs = ["bundled", "generated"] if args.catalog == "both" else [args.catalog]
    raise SystemExit(anyio.run(run, catalogs))


if __name__ == "__main__":
    main()
