"""The audit spool: rows left by a process that ended are replayed into each store backend once, torn lines
skipped, a live process's files left alone; a running store ships its rows and empties its files."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from gateway.pipeline.audit import AuditEntry, AuditStore, arguments_digest
from gateway.runtime.background import Background
from gateway.stores import spool as spool_module
from gateway.stores.spool import Spool
from tests.support.databases import Backend
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[1]


def row(n: int) -> list[object]:
    """A spooled audit row as the store writes it: its id first, then the table's columns."""
    entry = AuditEntry(1_790_000_000.0 + n, "s1", "alice", "echo", arguments_digest({"n": n}), "ok", 1.5, f"row {n}")
    values = [entry.time, entry.epoch, "s1", "alice", "echo", entry.args_digest, "ok", 1.5, f"row {n}", f"r{n}"]
    return [f"test-{n}", *values, f"{n:032x}"]


def left_behind(directory: Path, count: int) -> Path:
    """A spool file as a killed process leaves it: `count` rows appended, none shipped, no lock held."""
    spool = Spool(directory)
    for n in range(count):
        spool.append(row(n))
    spool.close()
    [path] = directory.glob("*.jsonl")
    return path


async def details(backend: Backend, spool_dir: Path) -> list[str]:
    """The detail of every stored row, oldest first, after opening the store on `spool_dir` (which replays it)."""
    store = AuditStore(backend.open("audit"), spool_dir=spool_dir)
    try:
        return [entry.detail for entry in reversed(await store.recent(limit=1000))]
    finally:
        store.close()


async def test_a_spool_file_left_behind_is_replayed_into_the_store_and_removed(
    store_backend: Backend, tmp_path: Path
) -> None:
    left_behind(tmp_path / "spool", 5)
    assert await details(store_backend, tmp_path / "spool") == [f"row {n}" for n in range(5)]
    assert list((tmp_path / "spool").iterdir()) == []


async def test_a_spool_file_written_before_trace_ids_is_replayed_with_empty_ones(
    store_backend: Backend, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool")
    for n in range(2):
        spool.append(row(n)[:-1])
    spool.close()
    store = AuditStore(store_backend.open("audit"), spool_dir=tmp_path / "spool")
    try:
        stored = [(entry.detail, entry.request_id, entry.trace_id) for entry in await store.recent()]
    finally:
        store.close()
    assert stored == [("row 1", "r1", ""), ("row 0", "r0", "")]


async def test_a_row_both_stored_and_still_in_a_spool_file_is_stored_once(
    store_backend: Backend, tmp_path: Path
) -> None:
    path = left_behind(tmp_path / "spool", 5)
    copy = shutil.copy(path, tmp_path / "copy")
    assert len(await details(store_backend, tmp_path / "spool")) == 5
    shutil.move(copy, path)
    assert await details(store_backend, tmp_path / "spool") == [f"row {n}" for n in range(5)]


async def test_a_torn_last_line_is_skipped_with_a_warning_naming_it(
    store_backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = left_behind(tmp_path / "spool", 3)
    with path.open("ab") as file:
        file.write(b'["test-3","2026-09-21T14:13:23.000+00:00",1790000003.0,"s1","al')
    with caplog.at_level(logging.WARNING, logger="gateway.stores.spool"):
        assert await details(store_backend, tmp_path / "spool") == ["row 0", "row 1", "row 2"]
    assert f"spool {path} line 4 is not a complete row" in caplog.text
    assert not path.exists()


async def test_a_live_process_s_spool_file_is_left_alone_until_the_process_is_killed(
    store_backend: Backend, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    child = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from gateway.stores.spool import Spool
        from tests.test_spool import row

        spool = Spool(Path({str(spool_dir)!r}))
        spool.append(row(7))
        print("spooled", flush=True)
        sys.stdin.read()
        """
    )
    with anyio.fail_after(60):
        async with await anyio.open_process([sys.executable, "-c", child], cwd=REPO) as process:
            assert process.stdout is not None
            said = b""
            while not said.endswith(b"\n"):
                said += await process.stdout.receive()
            assert said == b"spooled\n"
            assert await details(store_backend, spool_dir) == []
            assert len(list(spool_dir.glob("*.jsonl"))) == 1
            process.kill()
            await process.wait()
        assert await details(store_backend, spool_dir) == ["row 7"]
        assert list(spool_dir.glob("*.jsonl")) == []


async def test_a_running_store_replays_the_spool_of_a_process_that_dies_while_it_runs(
    store_backend: Backend, tmp_path: Path
) -> None:
    # As a replica killed beside another on a spool directory they share.
    spool_dir = tmp_path / "spool"
    child = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from gateway.stores.spool import Spool
        from tests.test_spool import row

        spool = Spool(Path({str(spool_dir)!r}))
        spool.append(row(9))
        print("spooled", flush=True)
        sys.stdin.read()
        """
    )
    store = AuditStore(store_backend.open("audit"), spool_dir=spool_dir)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(store.maintain, 0.05)
            with anyio.fail_after(60):
                async with await anyio.open_process([sys.executable, "-c", child], cwd=REPO) as process:
                    assert process.stdout is not None
                    said = b""
                    while not said.endswith(b"\n"):
                        said += await process.stdout.receive()
                    process.kill()
                    await process.wait()

            async def shipped() -> bool:
                return [entry.detail for entry in await store.recent()] == ["row 9"]

            # The store's maintenance loop replays the file in its own time, and tells no one.
            await poll_until(shipped, "the dead process's spooled row in the store")
            group.cancel_scope.cancel()
    finally:
        store.close()
    assert list(spool_dir.glob("*.jsonl")) == []


async def test_a_running_store_ships_its_spooled_rows_and_empties_its_file(
    store_backend: Backend, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    store = AuditStore(store_backend.open("audit"), spool_dir=spool_dir)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(store.maintain, Background().report)
            await anyio.wait_all_tasks_blocked()
            for n in range(20):
                entry = AuditEntry(float(n), "s1", "alice", "echo", "d", "ok", 1.0, f"row {n}")
                await store.record(entry)
            files = list(spool_dir.glob("*.jsonl"))
            assert len(files) == 1
            assert [entry.detail for entry in await store.recent()] == [f"row {n}" for n in reversed(range(20))]
            assert [path.stat().st_size for path in files] == [0] * len(files)
            group.cancel_scope.cancel()
    finally:
        store.close()
    assert list(spool_dir.glob("*.jsonl")) == []


async def test_a_spool_directory_named_in_the_store_section_is_replayed_by_a_store_of_any_data_dir(
    store_backend: Backend, tmp_path: Path
) -> None:
    left_behind(tmp_path / "node" / "audit", 2)
    settings = dataclasses.replace(store_backend.settings, spool=str(tmp_path / "node"))
    store = AuditStore.open(settings, store_backend.data_dir)
    try:
        assert [entry.detail for entry in await store.recent()] == ["row 1", "row 0"]
    finally:
        store.close()


def test_a_spool_file_grown_past_its_size_is_retired_and_removed_once_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "SEGMENT_BYTES", 200)
    spool = Spool(tmp_path)
    for n in range(3):
        spool.append(row(n))
    [first] = tmp_path.glob("*.jsonl")
    batch = spool.batch()
    spool.append(row(3))
    assert len(list(tmp_path.glob("*.jsonl"))) == 2
    spool.shipped(len(batch))
    [second] = tmp_path.glob("*.jsonl")
    assert second != first and spool.pending == 1
    spool.shipped(len(spool.batch()))
    assert second.stat().st_size == 0
    spool.close()
    assert list(tmp_path.glob("*.jsonl")) == []
