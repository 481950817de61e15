"""The data directory is the gateway user's alone: the directory and its folders 0700, every file 0600,
also when an earlier run or a hand left them readable by others."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from gateway.config.loading import parse_config
from gateway.runtime.datadir import WORKSPACES
from tests.support.databases import backend
from tests.support.harness import gateway_client, in_memory, make_config, toy_stdio
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask most systems start processes with, which leaves new files readable by everyone."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(data_dir: Path) -> dict[str, str]:
    """The permission bits of everything under `data_dir` but the workspaces, by relative path."""
    found = {".": oct(stat.S_IMODE(data_dir.stat().st_mode))}
    for root, directories, files in os.walk(data_dir):
        if Path(root) == data_dir and WORKSPACES in directories:
            directories.remove(WORKSPACES)
        for name in [*directories, *files]:
            path = Path(root, name)
            found[path.relative_to(data_dir).as_posix()] = oct(stat.S_IMODE(path.lstat().st_mode))
    return found


async def test_a_gateway_keeps_its_data_directory_0700_and_every_file_in_it_0600(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": toy_stdio("toy"), "mem": {"command": "unused"}})
    async with gateway_client(config, transports=in_memory({"mem": toy("mem")})) as (_, client):
        await client.call_tool("mem__echo", {"text": "hi"})
        found = modes(config.settings.data_dir)
    expected = {"audit.db", "audit.db-wal", "audit.db-shm", "registrations.db", "registrations.key", "logs/toy.log"}
    assert expected <= set(found)
    assert_private(config.settings.data_dir, found)


def assert_private(data_dir: Path, found: dict[str, str]) -> None:
    """Every folder in `found` is 0700 and every file 0600."""
    folders = {path for path in found if (data_dir / path).is_dir()}
    assert {path: mode for path, mode in found.items() if path in folders} == dict.fromkeys(folders, "0o700")
    assert {path: mode for path, mode in found.items() if path not in folders} == {
        path: "0o600" for path in found if path not in folders
    }


async def test_with_postgresql_the_audit_spool_and_the_registrations_key_are_private_too(tmp_path: Path) -> None:
    with backend("postgresql", tmp_path / "data") as chosen:
        document = {
            "gateway": {"data_dir": str(chosen.data_dir)},
            "servers": {"mem": {"command": "unused"}},
            "store": chosen.config_section(),
        }
        config = parse_config(document, source="gateway.yaml", base_dir=tmp_path)
        async with gateway_client(config, transports=in_memory({"mem": toy("mem")})) as (_, client):
            await client.call_tool("mem__echo", {"text": "hi"})
            found = modes(chosen.data_dir)
    assert {"registrations.key", "spool", "spool/audit"} <= set(found)
    assert any(path.startswith("spool/audit/") for path in found)
    assert_private(chosen.data_dir, found)


async def test_a_data_directory_left_readable_by_others_is_made_private_at_start_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, {"mem": {"command": "unused"}})
    data_dir = config.settings.data_dir
    (data_dir / "logs").mkdir(parents=True)
    os.chmod(data_dir, 0o755)
    with closing(sqlite3.connect(data_dir / "approvals.db")) as db:
        db.execute("CREATE TABLE t (x)")
    os.chmod(data_dir / "approvals.db", 0o644)
    (data_dir / "logs" / "mem.log").write_text("an old server's stderr\n")
    (data_dir / WORKSPACES / "caller" / "session").mkdir(parents=True)
    sandboxed = data_dir / WORKSPACES / "caller" / "session" / "written-by-sandboxed-code"
    sandboxed.write_text("left as it is")
    os.chmod(sandboxed, 0o644)
    with caplog.at_level(logging.WARNING, logger="gateway.runtime.datadir"):
        async with gateway_client(config, transports=in_memory({"mem": toy("mem")})):
            found = modes(data_dir)
    warnings = [record.getMessage() for record in caplog.records if record.name == "gateway.runtime.datadir"]
    assert found["."] == found["logs"] == "0o700"
    assert found["approvals.db"] == found["logs/mem.log"] == "0o600"
    assert oct(stat.S_IMODE(sandboxed.stat().st_mode)) == "0o644"
    assert len(warnings) == 1, warnings
    assert all(f" {name} (0" in warnings[0] for name in (".", "approvals.db", "logs", "logs/mem.log"))
