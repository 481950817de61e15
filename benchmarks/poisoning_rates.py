"""How often the poisoning heuristics (`gateway.catalog.poisoning`) flag tools nobody poisoned, and what a scan costs.

Run `python -m benchmarks.poisoning_rates` from the repository root. Scanned, each tool as the
gateway scans it (title, description, annotations' title, every key and string of its schemas):

- ours: the bundled servers of servers/ (listed in memory through the SDK client), the gateway's
  meta-tools, and the shipped skills' descriptions and instructions (skills/);
- third-party servers, listed over stdio with the SDK client: those of tests/interop
  (`mcp-server-time`, `@modelcontextprotocol/server-everything`) and, when their commands are
  found, `mcp-server-git`, `mcp-server-fetch`, `server-filesystem`, `server-memory` and
  `server-sequential-thinking` (`--bin DIR` adds a directory to look in, as many times as needed);
- the LiveMCPBench sample kept in benchmarks/data/livemcpbench (527 tools of 70 servers).

Prints, per server, its tools, how many are flagged and for what, then every finding, then the
CPU time of scanning the LiveMCPBench catalog. Nothing is fetched; a missing server is said so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

from gateway.catalog.poisoning import Finding, scan, scan_text
from gateway.catalog.tools import ToolRecord
from gateway.skills.folder import load_skills
from gateway.skills.metatools import records as meta_records
from servers import calc, echo, files, python, sqlite
from tests.interop.test_third_party_servers import FULL_CLIENT
from tests.support.node import NODE_PREFIX

REPO = Path(__file__).resolve().parents[1]
LIVEMCPBENCH = REPO / "benchmarks" / "data" / "livemcpbench" / "catalog.json"
# Third-party servers: a name, the command that starts it over stdio and its arguments.
THIRD_PARTY = [
    ("mcp-server-time", "mcp-server-time", ["--local-timezone", "UTC"]),
    ("server-everything", "mcp-server-everything", ["stdio"]),
    ("mcp-server-git", "mcp-server-git", []),
    ("mcp-server-fetch", "mcp-server-fetch", []),
    ("server-filesystem", "mcp-server-filesystem", ["{root}"]),
    ("server-memory", "mcp-server-memory", []),
    ("server-sequential-thinking", "mcp-server-sequential-thinking", []),
]


@dataclass(frozen=True)
class Scanned:
    """One server's tools and what each was flagged for."""

    server: str
    tools: int
    flagged: dict[str, tuple[Finding, ...]]


def record(source: str, tool: types.Tool) -> ToolRecord:
    """A listed tool as the gateway holds it, for the scan."""
    return ToolRecord(
        name=tool.name,
        source=source,
        original_name=tool.name,
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        title=tool.title,
        annotations=tool.annotations,
    )


def scanned(server: str, tools: Iterable[ToolRecord]) -> Scanned:
    """Every tool of `server` scanned."""
    listed = list(tools)
    flagged = {tool.name: found for tool in listed if (found := scan(tool))}
    return Scanned(server, len(listed), flagged)


async def own_servers(root: Path) -> list[Scanned]:
    """The bundled servers, listed in memory."""
    built = {
        "calc": calc.build_server(),
        "echo": echo.build_server(),
        "files": files.build_server(root),
        "python": python.build_server(),
        "sqlite": sqlite.build_server(root / "main.db"),
    }
    found = []
    for name, server in built.items():
        async with Client(server) as client:
            found.append(scanned(name, (record(name, tool) for tool in (await client.list_tools()).tools)))
    return found


def meta_tools() -> Scanned:
    """The gateway's own meta-tools, all of them."""
    return scanned("gateway (meta-tools)", meta_records(with_skills=True, with_search=True))


def skills() -> Scanned:
    """The shipped skills: each description and each SKILL.md's instructions, as one 'tool' a skill."""
    loaded = load_skills([REPO / "skills"]).skills
    flagged = {}
    for name, skill in loaded.items():
        found = tuple(scan_text(skill.description, "description") + scan_text(skill.body, "instructions"))
        if found:
            flagged[name] = found
    return Scanned("skills/", len(loaded), flagged)


def command(name: str, bins: list[Path]) -> str | None:
    """Where the command `name` is: the extra directories, this Python's, PATH, the interop npm packages."""
    places = [*bins, Path(sys.executable).parent, NODE_PREFIX / "node_modules" / ".bin"]
    for place in places:
        if (place / name).exists():
            return str(place / name)
    return shutil.which(name)


async def third_party(bins: list[Path], root: Path) -> tuple[list[Scanned], list[str]]:
    """The third-party servers found, listed over stdio; the names of those not found."""
    found, missing = [], []
    for name, executable, arguments in THIRD_PARTY:
        path = command(executable, bins)
        if path is None:
            missing.append(name)
            continue
        launch = StdioServerParameters(command=path, args=[argument.format(root=root) for argument in arguments])
        # A client of every capability: some servers offer tools only to such clients.
        async with Client(launch, **FULL_CLIENT) as client:
            tools, cursor = [], None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools += page.tools
                cursor = page.next_cursor
                if cursor is None:
                    break
        found.append(scanned(name, (record(name, tool) for tool in tools)))
    return found, missing


def livemcpbench() -> tuple[Scanned, list[ToolRecord]]:
    """The LiveMCPBench sample's tools, as one corpus, and their records."""
    tools = [
        ToolRecord(
            name=f"{server['server']}__{tool['name']}",
            source=server["server"],
            original_name=tool["name"],
            description=tool.get("description") or "",
            input_schema=tool.get("input_schema") or {"type": "object"},
        )
        for server in json.loads(LIVEMCPBENCH.read_text(encoding="utf-8"))
        for tool in server["tools"]
    ]
    return scanned("LiveMCPBench sample (70 servers)", tools), tools


def table(title: str, rows: list[Scanned]) -> None:
    """Servers, their tools, the flagged ones and their kinds, with a total line."""
    print(f"\n{title}")
    print(f"  {'SERVER':<34}  {'TOOLS':>5}  {'FLAGGED':>7}  KINDS")
    for row in rows:
        kinds = Counter(
            finding.kind for found in row.flagged.values() for finding in {f.kind: f for f in found}.values()
        )
        told = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())) or "-"
        print(f"  {row.server:<34}  {row.tools:>5}  {len(row.flagged):>7}  {told}")
    tools, flagged = sum(row.tools for row in rows), sum(len(row.flagged) for row in rows)
    share = f"{100 * flagged / tools:.1f}%" if tools else "-"
    print(f"  {'total':<34}  {tools:>5}  {flagged:>7}  ({share} of tools flagged)")


def findings(rows: list[Scanned]) -> None:
    """Every finding, for reading whether each is a false positive."""
    for row in rows:
        for tool, found in row.flagged.items():
            for finding in found:
                print(f"  {row.server} / {tool}: {finding.kind} in {finding.where}: {finding.excerpt}")


def cost(tools: list[ToolRecord], rounds: int) -> float:
    """Median CPU microseconds to scan one tool, over `rounds` scans of every tool."""
    times = []
    for _ in range(rounds):
        started = time.thread_time()
        for tool in tools:
            scan(tool)
        times.append((time.thread_time() - started) / len(tools) * 1e6)
    return sorted(times)[len(times) // 2]


async def main(arguments: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        ours = [*await own_servers(root), meta_tools(), skills()]
        theirs, missing = await third_party(arguments.bin, root)
    sample, records = livemcpbench()
    table("Ours", ours)
    table("Third-party servers" + (f" (not found: {', '.join(missing)})" if missing else ""), theirs)
    table("Third-party descriptions", [sample])
    print("\nFindings")
    findings([*ours, *theirs, sample])
    print(
        f"\nscan: {cost(records, arguments.rounds):.0f} us of CPU per tool (LiveMCPBench, median of {arguments.rounds})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, action="append", default=[], help="another directory of server commands")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the scan cost")
    anyio.run(main, parser.parse_args())
