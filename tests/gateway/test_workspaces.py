"""Each session has its own workspace, and session-scoped servers see only theirs."""

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client

from gateway.auth.identity import Identity
from gateway.config.loading import load_config
from gateway.config.model import GatewayConfig
from gateway.frontdoors.mcpserver import build_server
from gateway.runtime import owners
from gateway.service import Gateway
from gateway.upstreams.connection import State
from tests.support.harness import REPO, make_config
from tests.support.waiting import ends_of, poll_until

ALICE = Identity("alice", None, "api_key")

MiB = 1 << 20
# Mounting a file system per workspace needs root; CI and the development machines run as root.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="size-limited workspaces need a gateway running as root")


def files_server(*extra: str) -> dict[str, object]:
    return {
        "command": sys.executable,
        "args": ["-m", "servers.files", "--root", "${WORKSPACE}", *extra],
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
            ended = ends_of([context])
        await ended()
        # Its closing cancels the instance, whose task then stops it: a state nothing announces.
        await poll_until(lambda: instance.status().state == State.STOPPED, "the session's server to stop")


class Clock:
    """Wall-clock time that moves only when the test says so."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def one_session(gateway: Gateway, path: str = "kept.txt", content: str = "results") -> Path:
    """Run one session that writes a file into its workspace; return the workspace once the session
    has ended and its workspace was released."""
    others = {context.id for context in gateway.sessions.live()}
    async with Client(build_server(gateway), mode="legacy") as client:
        await client.list_tools()
        (context,) = [context for context in gateway.sessions.live() if context.id not in others]
        # Told after the workspace is released: a session's closers run newest first, and the
        # workspace's is registered by the write below.
        ended = ends_of([context])
        with anyio.fail_after(20):
            written = await client.call_tool("files__write_file", {"path": path, "content": content})
        assert not written.is_error, written
        workspace: Path = context.state["gateway.workspace"]
    await ended()
    return workspace


def disk_use(directory: Path) -> int:
    """Bytes the files under `directory` take on disk."""
    return sum(path.lstat().st_blocks * 512 for path in directory.rglob("*"))


def directory_modes(root: Path) -> dict[Path, int]:
    """Every directory under `root` and its mode."""
    return {path: path.stat().st_mode for path in root.rglob("*") if path.is_dir() and not path.is_symlink()}


def is_mounted(directory: Path) -> bool:
    return os.path.ismount(directory)


def on_disk(workspace: Path) -> bool:
    return workspace.exists() or workspace.with_suffix(".img").exists()


@needs_root
@pytest.mark.anyio
async def test_a_files_server_write_past_the_workspace_quota_fails_with_disk_full(tmp_path: Path) -> None:
    servers = {"files": files_server("--max-write-bytes", str(16 * MiB))}
    config = make_config(tmp_path, servers, workspace_size="8m")
    async with Gateway(config) as gateway:
        assert gateway.workspaces.unlimited is None
        async with Client(build_server(gateway), mode="legacy") as client:
            with anyio.fail_after(30):
                small = await client.call_tool("files__write_file", {"path": "small.txt", "content": "x" * MiB})
                big = await client.call_tool("files__write_file", {"path": "big.txt", "content": "x" * (10 * MiB)})
            (context,) = gateway.sessions.live()
            workspace: Path = context.state["gateway.workspace"]
            used = disk_use(workspace)
    assert not small.is_error
    assert big.is_error
    assert "No space left on device" in big.content[0].text  # type: ignore[union-attr]
    assert used <= 8 * MiB
    assert workspace.with_suffix(".img").stat().st_blocks * 512 <= 8 * MiB


@needs_root
@pytest.mark.anyio
async def test_a_workspace_is_private_to_the_sandbox_user_and_never_world_writable(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"files": files_server()})
    async with Gateway(config) as gateway, Client(build_server(gateway), mode="legacy") as client:
        with anyio.fail_after(20):
            await client.call_tool("files__write_file", {"path": "a/b.txt", "content": "x"})
        (context,) = gateway.sessions.live()
        workspace: Path = context.state["gateway.workspace"]
        owner = os.stat(workspace)
        modes = directory_modes(tmp_path / "data")
    assert (owner.st_uid, owner.st_gid, owner.st_mode & 0o777) == (65534, 65534, 0o700)
    assert workspace / "a" in modes
    assert [path for path, mode in modes.items() if mode & 0o002] == []


@pytest.mark.anyio
async def test_an_ended_sessions_workspace_is_kept_until_its_retention_passes_then_removed(tmp_path: Path) -> None:
    clock = Clock(1_000_000.0)
    config = make_config(tmp_path, {"files": files_server()}, workspace_retention=3600)
    async with Gateway(config, wall_clock=clock) as gateway:
        workspace = await one_session(gateway)
        clock.now += 3599
        assert gateway.workspaces.sweep() == []
        assert on_disk(workspace)
        assert [entry.path for entry in gateway.workspaces.entries()] == [workspace]
        clock.now += 1
        assert gateway.workspaces.sweep() == [workspace]
        assert not on_disk(workspace)
        assert gateway.workspaces.entries() == []


@pytest.mark.anyio
async def test_a_restarted_gateway_removes_expired_workspaces_at_start_up(tmp_path: Path) -> None:
    clock = Clock(1_000_000.0)
    config = make_config(tmp_path, {"files": files_server()}, workspace_retention=60)
    async with Gateway(config, wall_clock=clock) as gateway:
        old = await one_session(gateway, "old.txt")
        clock.now += 30
        recent = await one_session(gateway, "recent.txt")
    clock.now += 40
    async with Gateway(config, wall_clock=clock) as gateway:
        assert [entry.path for entry in gateway.workspaces.entries()] == [recent]
    assert not on_disk(old) and on_disk(recent)


def capped_config(tmp_path: Path) -> GatewayConfig:
    """A files server per session, 8 MiB workspaces, 20 MiB kept per caller and 30 MiB in all."""
    servers = {"files": files_server("--max-write-bytes", str(8 * MiB))}
    caps = {"max_workspace_bytes_per_caller": "20m", "max_workspace_bytes": "30m"}
    return make_config(tmp_path, servers, workspace_size="8m", **caps)


def kept(gateway: Gateway) -> list[Path]:
    """The workspaces on disk: those in use, then the ended ones, oldest first."""
    return [entry.path for entry in gateway.workspaces.entries()]


def bytes_kept(gateway: Gateway) -> int:
    """What every workspace on disk takes, as the caps count it."""
    return sum(entry.used for entry in gateway.workspaces.entries())


@pytest.mark.anyio
async def test_churning_sessions_keep_a_callers_workspaces_under_its_cap_and_the_oldest_ended_go_first(
    tmp_path: Path,
) -> None:
    clock = Clock(1_000_000.0)
    async with (
        Gateway(capped_config(tmp_path), wall_clock=clock) as gateway,
        Client(build_server(gateway), mode="legacy") as open_throughout,
    ):
        with anyio.fail_after(20):
            written = await open_throughout.call_tool("files__write_file", {"path": "a.txt", "content": "x" * MiB})
        assert not written.is_error, written
        (live,) = kept(gateway)
        ended = []
        for round in range(6):
            ended.append(await one_session(gateway, content="x" * (6 * MiB)))
            clock.now += 60
            # 1 MiB in use and 6 MiB in each ended workspace: two ended ones fit the caller's 20 MiB.
            assert kept(gateway) == [live, *ended[-2:]], round
            assert bytes_kept(gateway) <= 20 * MiB
        still = await open_throughout.call_tool("files__read_file", {"path": "a.txt"})
    # The answer is cut to max_result_chars; the server says how much of the file it read.
    assert not still.is_error and still.structured_content["bytes_read"] == MiB  # type: ignore[index]
    assert not any(on_disk(workspace) for workspace in ended[:-2])


@pytest.mark.anyio
async def test_a_session_whose_callers_workspaces_in_use_hold_its_cap_is_refused_a_workspace_until_one_ends(
    tmp_path: Path,
) -> None:
    clock = Clock(1_000_000.0)
    async with Gateway(capped_config(tmp_path), wall_clock=clock) as gateway:
        server = build_server(gateway)
        older = await one_session(gateway, content="x" * (2 * MiB))
        clock.now += 60
        async with Client(server, mode="legacy") as second, Client(server, mode="legacy") as third:
            async with Client(server, mode="legacy") as first:
                with anyio.fail_after(30):
                    for client in (first, second):
                        written = await client.call_tool("files__write_file", {"path": "f", "content": "x" * (7 * MiB)})
                        assert not written.is_error, written
                    refused = await third.call_tool("files__write_file", {"path": "f", "content": "x"})
                listed = kept(gateway)
            # Marked ended on disk by the session's closing: nothing announces it.
            await poll_until(
                lambda: any(entry.ended_at == clock.now for entry in gateway.workspaces.entries()),
                "the first session's workspace to be marked ended",
            )
            (first_ended,) = [entry.path for entry in gateway.workspaces.entries() if entry.ended_at == clock.now]
            ended = kept(gateway)
            with anyio.fail_after(30):
                admitted = await third.call_tool("files__write_file", {"path": "f", "content": "x"})
            after = kept(gateway)
    text = refused.content[0].text  # type: ignore[union-attr]
    assert refused.is_error
    assert text.startswith(
        "No room for this session's workspace: this caller's sessions in use hold 14.0 MiB of the 20.0 MiB it may"
        " keep, and a new workspace may take 8.0 MiB"
    )
    assert "End sessions you no longer need" in text and str(tmp_path) not in text
    # Refused, nothing was removed; the first session's end left its workspace under the cap, and
    # the third session's made room by removing the ended ones, oldest first.
    assert older in listed and len(listed) == 3
    assert set(ended) == set(listed)
    assert not admitted.is_error, admitted
    assert len(after) == 2 and older not in after and first_ended not in after


async def written_directly(gateway: Gateway, caller: str, clock: Clock) -> Path:
    """A session of `caller` whose workspace gets 6 MiB written straight to disk, ended; the clock moves on."""
    context = gateway.sessions.open(f"{caller}-{clock.now}", Identity(caller, None, "api_key"), "memory")
    workspace = await gateway.workspaces.open(context)
    (workspace / "data.bin").write_bytes(b"x" * (6 * MiB))
    await gateway.sessions.close(context.id)
    clock.now += 60
    return workspace


@pytest.mark.anyio
async def test_everyones_workspaces_stay_under_the_total_and_the_oldest_ended_go_first_whoever_they_belong_to(
    tmp_path: Path,
) -> None:
    clock = Clock(1_000_000.0)
    async with Gateway(capped_config(tmp_path), wall_clock=clock) as gateway:
        first, second = [await written_directly(gateway, "alice", clock) for _ in range(2)]
        bobs = await written_directly(gateway, "bob", clock)
        carols = await written_directly(gateway, "carol", clock)
        assert kept(gateway) == [first, second, bobs, carols]
        # 24 MiB are kept; a new workspace may take 8 MiB more than the 30 MiB allowed in all.
        daves = await written_directly(gateway, "dave", clock)
        assert kept(gateway) == [second, bobs, carols, daves]
        assert bytes_kept(gateway) <= 30 * MiB


def workspaces_cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gateway", "--log-level", "WARNING", *args, "--config", str(config)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.anyio
async def test_the_workspaces_command_lists_workspaces_and_purges_those_past_their_time(tmp_path: Path) -> None:
    retention = 3600
    path = tmp_path / "gateway.yaml"
    settings = {"data_dir": str(tmp_path / "data"), "workspace_retention": retention, "workspace_size": "8m"}
    path.write_text(yaml.safe_dump({"gateway": settings, "servers": {"files": files_server()}}))
    clock = Clock(time.time() - retention - 60)
    async with Gateway(load_config(path), wall_clock=clock) as gateway:
        expired = await one_session(gateway, "old.txt")
        clock.now = time.time()
        kept = await one_session(gateway, "new.txt")
    listed = workspaces_cli(path, "workspaces", "list")
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()
    assert [row.split()[0] for row in rows] == [str(expired), str(kept)]
    assert all("ended" in row and "purged after" in row for row in rows)
    purged = workspaces_cli(path, "workspaces", "purge")
    assert purged.returncode == 0, purged.stderr
    assert "removed 1 workspaces" in purged.stdout
    assert not on_disk(expired) and on_disk(kept)
    assert [row.split()[0] for row in workspaces_cli(path, "workspaces", "list").stdout.splitlines()] == [str(kept)]
    check = workspaces_cli(path, "check")
    if os.geteuid() == 0:
        assert "[ok] workspaces: at most 8 MiB each, kept 3600 s after their session ends" in check.stdout
        assert "warning: server files runs on the host as root" in check.stdout
    else:
        assert "warning: workspaces are not size-limited: the gateway does not run as root" in check.stdout


@needs_root
@pytest.mark.anyio
async def test_a_gateway_shutting_down_with_a_live_session_leaves_its_workspace_unmounted_and_ended(
    tmp_path: Path,
) -> None:
    clock = Clock(1_000_000.0)
    async with Gateway(make_config(tmp_path, {}), wall_clock=clock) as gateway:
        context = gateway.sessions.open("live", ALICE, "memory")
        workspace = await gateway.workspaces.open(context)
        assert is_mounted(workspace)
    assert not is_mounted(workspace)
    assert [(entry.path, entry.ended_at) for entry in gateway.workspaces.entries()] == [(workspace, clock.now)]


@needs_root
@pytest.mark.anyio
async def test_a_restarted_gateway_unmounts_what_a_crashed_one_left_and_counts_it_as_ended(tmp_path: Path) -> None:
    clock = Clock(1_000_000.0)
    config = make_config(tmp_path, {}, workspace_retention=60)
    async with Gateway(config, wall_clock=clock) as crashed:
        context = crashed.sessions.open("orphan", ALICE, "memory")
        workspace = await crashed.workspaces.open(context)
        # Forgotten without being closed, as when the process is killed.
        crashed.sessions.registry.release(context.id)
    assert is_mounted(workspace)
    clock.now += 10
    async with Gateway(config, wall_clock=clock) as restarted:
        assert not is_mounted(workspace)
        assert [(entry.path, entry.ended_at) for entry in restarted.workspaces.entries()] == [(workspace, clock.now)]
        clock.now += 60
        assert restarted.workspaces.sweep() == [workspace]


@needs_root
@pytest.mark.anyio
async def test_a_gateway_starting_beside_a_live_one_on_its_data_dir_leaves_that_one_s_workspaces_in_use(
    tmp_path: Path,
) -> None:
    clock = Clock(1_000_000.0)
    config = make_config(tmp_path, {}, workspace_retention=60)
    async with await anyio.open_process([sys.executable, "-c", "input()"]) as other:
        async with Gateway(config, wall_clock=clock) as first:
            context = first.sessions.open("window-1", ALICE, "memory")
            workspace = await first.workspaces.open(context)
            first.sessions.registry.release(context.id)
        # As if the first gateway were another process still running (another desktop window's).
        workspace.with_suffix(".owner").write_text(owners.token_of(other.pid))
        async with Gateway(config, wall_clock=clock) as beside:
            assert is_mounted(workspace)
            assert [(entry.path, entry.ended_at) for entry in beside.workspaces.entries()] == [(workspace, None)]
        other.kill()
        await other.wait()
    async with Gateway(config, wall_clock=clock) as after:
        assert not is_mounted(workspace)
        assert [(entry.path, entry.ended_at) for entry in after.workspaces.entries()] == [(workspace, clock.now)]


@pytest.mark.anyio
async def test_a_world_writable_workspace_left_by_an_earlier_version_is_made_private_at_start_up(
    tmp_path: Path,
) -> None:
    legacy = tmp_path / "data" / "workspaces" / "0123456789abcdef" / "fedcba9876543210"
    legacy.mkdir(parents=True)
    legacy.chmod(0o777)
    async with Gateway(make_config(tmp_path, {})) as gateway:
        assert [entry.path for entry in gateway.workspaces.entries()] == [legacy]
        assert directory_modes(tmp_path / "data")[legacy] & 0o777 == 0o700
