"""Session containers started ahead: the first call of a new session, their hardening, and their removal."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from docker import DockerClient
from mcp import Client

from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.sandbox.sandboxes import sandbox_scope
from gateway.sandbox.source import LABEL_SESSION
from gateway.sandbox.sweeper import scope_filter
from gateway.service import Gateway
from gateway.upstreams.workspaces import SPARES
from tests.sandbox.conftest import WAIT
from tests.sandbox.test_gateway_sandbox import containers, text_of
from tests.sandbox.test_workspace_limits import default_files_config, limited_config, workspace_of

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

NOTE = {"path": "notes/todo.txt", "content": "buy milk\n"}


def warm_config(data_dir: Path, **settings: Any) -> GatewayConfig:
    """The default files server, sandboxed per session, with containers started ahead of sessions."""
    config = default_files_config(data_dir)
    return replace(config, settings=replace(config.settings, sandbox_session_warm=1, **settings))


@asynccontextmanager
async def warmed(config: GatewayConfig) -> AsyncIterator[Gateway]:
    """A gateway whose containers for the next sessions are started and waiting."""
    async with Gateway(config) as gateway:
        assert gateway.sandboxes.docker is not None
        await gateway.sandboxes.docker.sessions_warm()
        yield gateway


def waiting(client: DockerClient, config: GatewayConfig) -> set[str]:
    """The gateway's containers started ahead (their labels, fixed at creation, name no session)."""
    found = containers(client, sandbox_scope(config.settings))
    return {cid for cid, labels in found.items() if LABEL_SESSION not in labels}


def spares(config: GatewayConfig) -> list[Path]:
    """The spare workspaces on disk."""
    directory = Path(config.settings.data_dir) / "workspaces" / SPARES
    return sorted(path for path in directory.glob("*") if path.is_dir()) if directory.exists() else []


def read_inside(client: DockerClient, container_id: str, path: str) -> str:
    """A file as the container's own user sees it."""
    exit_code, output = client.containers.get(container_id).exec_run(["cat", path])
    assert exit_code == 0, output
    return bytes(output).decode()


async def test_the_first_call_of_a_new_session_is_served_by_a_container_started_before_it(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config = warm_config(tmp_path)
    async with warmed(config) as gateway:
        [ahead] = waiting(docker_client, config)
        async with Client(build_server(gateway), mode="legacy") as client:
            with anyio.fail_after(WAIT):
                written = await client.call_tool("files__write_file", NOTE)
            assert not written.is_error, text_of(written)
            [on_disk] = (tmp_path / "workspaces").rglob("todo.txt")
            assert SPARES not in on_disk.parts  # the session's own workspace: <caller>/<session>/notes
            assert on_disk.read_text() == NOTE["content"]
            assert read_inside(docker_client, ahead, "/workspace/notes/todo.txt") == NOTE["content"]


async def test_a_container_started_ahead_is_hardened_like_one_started_for_its_session(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config = warm_config(tmp_path)
    async with warmed(config) as gateway:
        [ahead] = waiting(docker_client, config)
        found = containers(docker_client, sandbox_scope(config.settings))
        # The listing container runs the same command with the same limits, started when needed.
        [cold] = [cid for cid, labels in found.items() if labels.get(LABEL_SESSION) == "discovery/files"]
        warm_attrs, cold_attrs = (docker_client.containers.get(cid).attrs for cid in (ahead, cold))
        del gateway
    for attrs in (warm_attrs, cold_attrs):
        attrs["HostConfig"].pop("Binds")
        attrs["Config"]["Labels"] = sorted(set(attrs["Config"]["Labels"]) - {LABEL_SESSION})
        attrs["Mounts"] = [{k: v for k, v in mount.items() if k != "Source"} for mount in attrs["Mounts"]]
    assert warm_attrs["Config"] == cold_attrs["Config"]
    assert warm_attrs["HostConfig"] == cold_attrs["HostConfig"]
    assert warm_attrs["Mounts"] == cold_attrs["Mounts"]
    assert [mount["Destination"] for mount in warm_attrs["Mounts"]] == ["/workspace"]
    assert warm_attrs["HostConfig"]["ReadonlyRootfs"] and warm_attrs["HostConfig"]["CapDrop"] == ["ALL"]
    assert warm_attrs["HostConfig"]["NetworkMode"] == "none"


async def test_a_session_workspace_adopted_from_a_spare_keeps_its_size_limit(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config = warm_config(tmp_path, workspace_size=2 << 20)
    async with warmed(config) as gateway, Client(build_server(gateway), mode="legacy") as client:
        if gateway.workspaces.unlimited is not None:
            pytest.skip(f"workspaces are not size-limited here: {gateway.workspaces.unlimited}")
        # The files server writes at most 1 MiB at a time: four parts pass the 2 MiB limit.
        with anyio.fail_after(WAIT):
            parts = [
                await client.call_tool("files__write_file", {"path": f"part{n}.txt", "content": "x" * 900_000})
                for n in range(4)
            ]
        assert not parts[0].is_error, text_of(parts[0])
        assert "No space left on device" in text_of(parts[-1])
        workspace = workspace_of(gateway)
        assert SPARES not in workspace.parts
        assert await anyio.to_thread.run_sync(os.path.ismount, workspace)


async def test_containers_and_workspaces_started_ahead_are_removed_when_the_gateway_stops(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config = warm_config(tmp_path)
    async with warmed(config):
        assert len(waiting(docker_client, config)) == 1
        assert len(spares(config)) == 1
    assert containers(docker_client, sandbox_scope(config.settings)) == {}
    assert spares(config) == []


async def test_a_sessions_first_run_pythons_run_in_containers_started_before_them_on_what_becomes_its_workspace(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    config = limited_config(tmp_path)
    config = replace(config, settings=replace(config.settings, sandbox_session_warm=1, sandbox_warm=1))
    async with Gateway(config) as gateway:
        assert gateway.sandboxes.docker is not None
        # The tool's first call anywhere starts its containers ahead, for the sessions after it.
        async with Client(build_server(gateway), mode="legacy") as first:
            with anyio.fail_after(WAIT):
                assert not (await first.call_tool("python__run_python", {"code": "print(1)"})).is_error
            await gateway.sandboxes.docker.sessions_warm()
        # Not the first session's containers, which may still be on their way out: those on a spare.
        listed = docker_client.api.containers(filters={"label": scope_filter(sandbox_scope(config.settings))})
        ahead = [str(entry["Id"]) for entry in listed if SPARES in Path(entry["Mounts"][0]["Source"]).parts]
        assert len(ahead) == 2  # the call's, and one for the session's warm pool
        # A mark in each container's own /tmp: only a call run in such a container reads it.
        for container in ahead:
            marked = docker_client.containers.get(container).exec_run(["sh", "-c", "echo started-ahead > /tmp/mark"])
            assert marked.exit_code == 0, marked.output
        code = "print(open('/tmp/mark').read().strip()); open('/workspace/made.txt', 'w').write('here')"
        async with Client(build_server(gateway), mode="legacy") as client:
            with anyio.fail_after(WAIT):
                ran = await client.call_tool("python__run_python", {"code": code})
            assert not ran.is_error, text_of(ran)
            assert "started-ahead" in text_of(ran)
            workspace = workspace_of(gateway)
            assert SPARES not in workspace.parts
            assert (workspace / "made.txt").read_text() == "here"
            with anyio.fail_after(WAIT):
                again = await client.call_tool("python__run_python", {"code": code.replace("made", "again")})
            assert "started-ahead" in text_of(again)
            assert (workspace / "again.txt").read_text() == "here"
