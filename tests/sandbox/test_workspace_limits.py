"""Workspaces behind a real gateway with real Docker: size limit, ownership, and who the files server runs as."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from docker import DockerClient
from mcp import Client

from gateway.config.loading import default_config_path, load_config
from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.sandbox.conftest import IMAGE, WAIT
from tests.support.harness import REPO, make_config

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

MiB = 1 << 20
QUOTA = 8 * MiB

# Writes 16 MiB in 1 MiB pieces, and says how far it got and why it stopped.
FILL = r"""
written = 0
try:
    with open('/workspace/fill.bin', 'wb') as out:
        for _ in range(16):
            out.write(b'x' * (1 << 20))
            out.flush()
            written += 1 << 20
    print('wrote', written)
except OSError as error:
    print('stopped after', written, error.strerror)
"""


def limited_config(root: Path) -> GatewayConfig:
    """The python runner sandboxed per call (medium risk: no confirmation) and a host files server, 8 MiB each."""
    servers: dict[str, Any] = {
        "python": {
            "command": sys.executable,
            "args": ["-m", "servers.python"],
            "cwd": str(REPO),
            "tools": {
                "run_python": {
                    "risk": "medium",
                    "sandbox": {"mode": "per-call", "command": ["python3", "-m", "servers.python"]},
                }
            },
        },
        "files": {
            "command": sys.executable,
            "args": ["-m", "servers.files", "--root", "${WORKSPACE}"],
            "cwd": str(REPO),
            "scope": "session",
            "risk": "medium",
        },
    }
    return make_config(root, servers, sandbox_image=IMAGE, sandbox_warm=0, workspace_size="8m")


@asynccontextmanager
async def session(config: GatewayConfig) -> AsyncIterator[tuple[Gateway, Client]]:
    async with Gateway(config) as gateway, Client(build_server(gateway), mode="legacy") as client:
        yield gateway, client


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def workspace_of(gateway: Gateway) -> Path:
    (context,) = gateway.sessions.live()
    workspace: Path = context.state["gateway.workspace"]
    return workspace


def disk_use(directory: Path) -> int:
    return sum(path.lstat().st_blocks * 512 for path in directory.rglob("*"))


def directory_modes(root: Path) -> dict[Path, int]:
    return {path: path.stat().st_mode for path in root.rglob("*") if path.is_dir() and not path.is_symlink()}


def found(root: Path, name: str) -> list[Path]:
    """Files called `name` under `root` that hold the text the test wrote."""
    return [path for path in root.rglob(name) if path.read_text() == "buy milk\n"]


async def test_a_snippet_writing_past_the_quota_gets_disk_full_and_the_workspace_stays_within_it(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    async with session(limited_config(tmp_path)) as (gateway, client):
        assert gateway.sandboxes.availability()[0]
        with anyio.fail_after(WAIT):
            result = await client.call_tool("python__run_python", {"code": FILL})
        workspace = workspace_of(gateway)
        used = disk_use(workspace)
    assert result.structured_content is not None, text_of(result)
    stdout = result.structured_content["stdout"]
    assert stdout.startswith("stopped after") and "No space left on device" in stdout, stdout
    assert used <= QUOTA
    assert workspace.with_suffix(".img").stat().st_blocks * 512 <= QUOTA


async def test_no_directory_under_the_data_directory_is_world_writable_after_sandbox_use(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    code = "import os; os.makedirs('/workspace/out'); open('/workspace/out/r.txt', 'w').write('r'); print(os.getuid())"
    async with session(limited_config(tmp_path)) as (gateway, client):
        with anyio.fail_after(WAIT):
            ran = await client.call_tool("python__run_python", {"code": code})
            read = await client.call_tool("files__read_file", {"path": "out/r.txt"})
        workspace = workspace_of(gateway)
        owner = os.stat(workspace)
        # While the session lives, its workspace's file system is mounted and its contents visible.
        modes = directory_modes(tmp_path / "data")
    assert ran.structured_content is not None and ran.structured_content["stdout"] == "65534\n", text_of(ran)
    assert read.structured_content is not None and read.structured_content["content"] == "r"
    assert (owner.st_uid, owner.st_gid, owner.st_mode & 0o777) == (65534, 65534, 0o700)
    assert workspace in modes
    assert workspace / "out" in modes
    assert [path for path, mode in modes.items() if mode & 0o002] == []


def default_files_config(data_dir: Path) -> GatewayConfig:
    """The default configuration with its data under `data_dir`, keeping only the files server."""
    config = load_config(default_config_path(), environ={"GATEWAY_DATA_DIR": str(data_dir), "HOME": str(data_dir)})
    return replace(
        config,
        settings=replace(config.settings, sandbox_image=IMAGE, sandbox_warm=0),
        servers=tuple(server for server in config.servers if server.name == "files"),
    )


async def test_the_default_files_server_writes_reads_and_lists_in_the_sessions_workspace(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    async with session(default_files_config(tmp_path)) as (_, client):
        with anyio.fail_after(WAIT):
            written = await client.call_tool("files__write_file", {"path": "notes/todo.txt", "content": "buy milk\n"})
            read = await client.call_tool("files__read_file", {"path": "notes/todo.txt"})
            listed = await client.call_tool("files__list_directory", {"path": "notes"})
        [on_disk] = found(tmp_path, "todo.txt")
        assert on_disk.parent.parent.parent.parent == tmp_path / "workspaces"  # <caller>/<session>/notes/todo.txt
    assert not written.is_error, text_of(written)
    assert read.structured_content is not None and read.structured_content["content"] == "buy milk\n"
    assert listed.structured_content is not None
    assert [entry["name"] for entry in listed.structured_content["entries"]] == ["todo.txt"]


async def test_a_path_outside_the_default_files_root_is_refused(docker_client: DockerClient, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("keep out")
    escaped = tmp_path / "escaped.txt"
    async with session(default_files_config(tmp_path)) as (_, client):
        with anyio.fail_after(WAIT):
            read = await client.call_tool("files__read_file", {"path": str(secret)})
            climbed = await client.call_tool("files__read_file", {"path": "../" * 8 + str(secret).lstrip("/")})
            written = await client.call_tool(
                "files__write_file", {"path": "../" * 8 + str(escaped).lstrip("/"), "content": "x"}
            )
    for result in (read, climbed, written):
        assert result.is_error
        assert "keep out" not in text_of(result)
        assert "refused" in text_of(result)
    assert not escaped.exists()


async def test_the_default_files_server_cannot_read_a_root_only_file_in_its_own_workspace(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    async with session(default_files_config(tmp_path)) as (_, client):
        with anyio.fail_after(WAIT):
            marked = await client.call_tool("files__write_file", {"path": "marker.txt", "content": "here"})
            assert not marked.is_error, text_of(marked)
            [marker] = (tmp_path / "workspaces").rglob("marker.txt")
            secret = marker.with_name("root-only.txt")
            secret.write_text("only root may read this")
            secret.chmod(0o600)
            read = await client.call_tool("files__read_file", {"path": "root-only.txt"})
    assert read.is_error
    assert "Permission denied" in text_of(read)
    assert "only root" not in text_of(read)
