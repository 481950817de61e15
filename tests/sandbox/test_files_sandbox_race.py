"""A sandboxed snippet races its session's files server, swapping a workspace folder for a link to the host."""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from docker import DockerClient
from mcp import Client

from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.sandbox.conftest import IMAGE, WAIT
from tests.support.harness import REPO, make_config
from tests.support.waiting import poll_until

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

SECRET = "TOP SECRET: a host file outside every workspace"
DECOY = "decoy, inside the workspace"
READS = 1_000
# Far more flips than the reads need: the test says stop once its reads are done.
FLIPS = 20_000_000
# The flipper must outlast the reads however slowly a busy machine serves them: beyond their guard of WAIT * 5.
FLIPPER_LIMIT = WAIT * 6

FLIPPER = """
import ctypes, os
os.chdir("/workspace")
os.mkdir("d")
with open("d/secret.txt", "w") as decoy:
    decoy.write({decoy!r})
os.symlink({outside!r}, "spare")
libc = ctypes.CDLL(None, use_errno=True)
open("started", "w").close()
flips = 0
while flips < {flips} and not (flips % 1000 == 0 and os.path.exists("stop")):
    # renameat2 with RENAME_EXCHANGE: "d" is always either the real folder or the link to the host.
    if libc.renameat2(-100, b"d", -100, b"spare", 2):
        raise OSError(ctypes.get_errno(), "renameat2")
    flips += 1
print(flips)
"""


def servers() -> dict[str, Any]:
    """The python runner sandboxed per call (medium risk: it needs no approval here), files per session."""
    run_python = {
        "risk": "medium",
        "sandbox": {
            "mode": "per-call",
            "command": ["python3", "-m", "servers.python", "--timeout", str(FLIPPER_LIMIT)],
            "deadline": FLIPPER_LIMIT,
        },
    }
    return {
        "python": {
            "command": sys.executable,
            "args": ["-m", "servers.python"],
            "cwd": str(REPO),
            "tools": {"run_python": run_python},
        },
        "files": {
            "command": sys.executable,
            "args": ["-m", "servers.files", "--root", "${WORKSPACE}"],
            "cwd": str(REPO),
            "scope": "session",
        },
    }


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host folder outside every workspace, holding a secret that any user of the host could read."""
    with tempfile.TemporaryDirectory(prefix="files-race-") as folder:
        os.chmod(folder, 0o755)
        secret = Path(folder, "secret.txt")
        secret.write_text(SECRET)
        secret.chmod(0o644)
        yield Path(folder)


def content_of(result: types.CallToolResult) -> str | None:
    """What a read returned, or None when it failed."""
    if result.is_error or result.structured_content is None:
        return None
    content: str = result.structured_content["content"]
    return content


def markers(workspaces: Path) -> list[Path]:
    """The flipper's `started` markers under `workspaces`; none while a walk meets a folder that is
    still being set up and goes away under it."""
    try:
        return list(workspaces.rglob("started"))
    except FileNotFoundError:
        return []


async def test_a_folder_flipped_to_a_host_link_by_the_sandbox_never_lets_a_read_reach_the_host(
    docker_client: DockerClient, tmp_path: Path, outside: Path
) -> None:
    config = make_config(tmp_path, servers(), sandbox_image=IMAGE)
    code = FLIPPER.format(decoy=DECOY, outside=str(outside), flips=FLIPS)
    flipped: list[types.CallToolResult] = []
    seen: Counter[str | None] = Counter()
    async with Gateway(config) as gateway, Client(build_server(gateway), mode="legacy") as client:
        workspaces = gateway.workspaces.root

        async def flip() -> None:
            with anyio.fail_after(FLIPPER_LIMIT + WAIT):
                flipped.append(await client.call_tool("python__run_python", {"code": code}))

        async with anyio.create_task_group() as group:
            group.start_soon(flip)
            # Written in the sandbox's workspace as the flipping starts: a file nothing announces.
            await poll_until(lambda: bool(markers(workspaces)), "the flipper's marker")
            with anyio.fail_after(WAIT * 5):
                for number in range(READS):
                    # Each read asks for a different limit, so the loop detector sees no repeated call.
                    arguments = {"path": "d/secret.txt", "limit": 4096 + number}
                    seen[content_of(await client.call_tool("files__read_file", arguments))] += 1
            [started] = markers(workspaces)
            (started.parent / "stop").touch()
    [result] = flipped
    assert not result.is_error and result.structured_content is not None, result
    assert int(result.structured_content["stdout"]) > 0
    assert seen[SECRET] == 0, f"{seen[SECRET]} of {READS} reads returned the host's secret"
    # The flips were seen: some reads went through the real folder, others were refused on the link.
    assert set(seen) == {DECOY, None}
    assert (outside / "secret.txt").read_text() == SECRET
