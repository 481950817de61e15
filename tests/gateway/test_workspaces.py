"""Each session has its own workspace, and session-scoped servers see only theirs."""

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from gateway.frontdoor import build_server
from gateway.service import Gateway
from gateway.upstream import State
from tests.support.harness import REPO, make_config


def files_server() -> dict[str, object]:
    return {
        "command": sys.executable,
        "args": ["-m", "servers.files", "--root", "${WORKSPACE}"],
        "cwd": str(REPO),
        "scope": "session",
        "risk": "medium",
    }


@pytest.mark.anyio
async def test_two_sessions_cannot_reach_each_others_files(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"files": files_server()})
    async with Gateway(config) as gateway:
        server = build_server(gateway)
        async with Client(server, mode="legacy") as first, Client(server, mode="legacy") as second:
            with anyio.fail_after(20):
                written = await first.call_tool("files__write_file", {"path": "secret.txt", "content": "mine"})
                assert not written.is_error
                mine = await first.call_tool("files__read_file", {"path": "secret.txt"})
                theirs = await second.call_tool("files__read_file", {"path": "secret.txt"})
                listing = await second.call_tool("files__list_directory", {})
            # While the sessions live: a size-limited workspace is unmounted when its session ends.
            workspaces = [p for p in (tmp_path / "data" / "workspaces").rglob("secret.txt")]
        assert "mine" in mine.content[0].text  # type: ignore[union-attr]
        assert theirs.is_error
        assert "secret.txt" not in listing.content[0].text  # type: ignore[union-attr]
        assert len(workspaces) == 1


@pytest.mark.anyio
async def test_a_session_scoped_server_stops_when_its_session_ends(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"files": files_server()})
    async with Gateway(config) as gateway:
        server = build_server(gateway)
        async with Client(server, mode="legacy") as client:
            await client.call_tool("files__list_directory", {})
            (context,) = gateway.sessions.live()
            instance = context.state["gateway.upstream.files"]
        with anyio.fail_after(10):
            while gateway.sessions.live():
                await anyio.sleep(0.02)
            while instance.status().state != State.STOPPED:
                await anyio.sleep(0.02)
