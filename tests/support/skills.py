"""Skill folders and skill-enabled gateways for tests: real SKILL.md files under a temporary directory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from gateway.config.model import GatewayConfig
from gateway.service import Gateway
from tests.support.harness import gateway_client, in_memory, make_config, placeholder
from tests.support.toy import build_server

# A bound on waiting for a notification the gateway sends on its own.
NOTIFY_TIMEOUT = 5.0


def write_skill(
    root: Path,
    name: str,
    tools: str = "",
    *,
    lifecycle: str = "session",
    body: str = "",
    files: Mapping[str, str] | None = None,
    roles: str = "",
) -> Path:
    """Write `<root>/<name>/SKILL.md` (and bundled `files`) and return the folder."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    metadata = f"metadata:\n  lifecycle: {lifecycle}\n" + (f"  roles: {roles}\n" if roles else "")
    allowed = f"allowed-tools: {tools}\n" if tools else ""
    text = body or f"# {name}\n\nFollow these steps for {name}.\n"
    frontmatter = f"name: {name}\ndescription: Helps with {name} work.\n{metadata}{allowed}"
    (folder / "SKILL.md").write_text(f"---\n{frontmatter}---\n{text}", encoding="utf-8")
    for relative, content in (files or {}).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return folder


def toy_skills(root: Path) -> Path:
    """The skills most tests use, over the tools of one toy server named `toy`."""
    write_skill(root, "adding", "toy__add", files={"references/tips.md": "Add small numbers."})
    write_skill(root, "echoing", "toy__echo")
    write_skill(root, "counting", "toy__increment toy__calls")
    write_skill(root, "forecast", "toy__weather", lifecycle="turn")
    write_skill(root, "report", "toy__big", lifecycle="task")
    return root


def skill_config(tmp_path: Path, **settings: Any) -> GatewayConfig:
    """A gateway over one extended toy server, with the toy skills and `settings` applied."""
    skills = toy_skills(tmp_path / "skills")
    options: dict[str, Any] = {"skill_dirs": [str(skills)], **settings}
    servers = {name: {**entry, "layer": "extended"} for name, entry in placeholder(["toy"]).items()}
    return make_config(tmp_path, servers, **options)


@asynccontextmanager
async def skill_gateway(
    config: GatewayConfig, *, mode: str = "legacy", **client_options: Any
) -> AsyncIterator[tuple[Gateway, Client]]:
    """A started gateway over an in-memory toy server and an SDK client connected to it."""
    transports = in_memory({"toy": build_server("toy")})
    async with gateway_client(config, transports=transports, mode=mode, **client_options) as pair:
        yield pair


def text(result: types.CallToolResult) -> str:
    """The text of a result's first content block."""
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """A result's structured content, which the meta-tools always give on success."""
    assert not result.is_error, text(result)
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def listed_names(client: Client) -> list[str]:
    """Every tool name tools/list shows, across pages."""
    names: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return names


class ToolListChanges:
    """A client message handler that counts notifications/tools/list_changed."""

    def __init__(self) -> None:
        self.count = 0
        self._event = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._event.set()

    async def wait(self) -> None:
        """Wait, bounded, for the next list_changed notification."""
        with anyio.fail_after(NOTIFY_TIMEOUT):
            await self._event.wait()
        self._event = anyio.Event()
