"""The audit trail on each store backend (real SQLite files, a real PostgreSQL), durable across restarts and kill -9."""

from __future__ import annotations

import signal
import sqlite3
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest

from gateway.errors import ToolTimeoutError, UnknownToolError
from gateway.pipeline.audit import AuditCalls, AuditEntry, AuditError, AuditStore, arguments_digest
from gateway.pipeline.chain import ToolCall
from gateway.pipeline.loops import LoopRefusedError
from gateway.runtime.background import Background
from gateway.stores import StoreSettings
from tests.support.databases import Backend
from tests.support.harness import free_port

from .conftest import MakeCall, make_tool, text_result

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]


def entry(n: int, session: str = "s1", tool: str = "echo", outcome: str = "ok") -> AuditEntry:
    return AuditEntry(
        epoch=1_790_000_000.0 + n,
        session=session,
        caller="alice",
        tool=tool,
        args_digest=arguments_digest({"n": n}),
        outcome=outcome,
        duration_ms=1.5,
    )


@pytest.fixture
async def store(store_backend: Backend) -> AsyncIterator[AuditStore]:
    audit = AuditStore(store_backend.open("audit"))
    yield audit
    audit.close()


def sqlite_store(data_dir: Path) -> AuditStore:
    """The audit trail as the default configuration opens it: `audit.db` under `data_dir`."""
    return AuditStore.open(StoreSettings(), data_dir)


class Ticks:
    """A clock advancing 0.25 s per reading, so recorded times and durations are exact."""

    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


async def test_entries_come_back_newest_first_and_filtered(store: AuditStore) -> None:
    await store.record(entry(1))
    await store.record(entry(2, session="s2"))
    await store.record(entry(3, tool="write"))
    assert [e.epoch for e in await store.recent()] == [1_790_000_003.0, 1_790_000_002.0, 1_790_000_001.0]
    assert await store.recent(session="s2") == [entry(2, session="s2")]
    assert await store.recent(session="s1", tool="echo") == [entry(1)]
    assert len(await store.recent(limit=2)) == 2


async def test_the_sqlite_database_runs_in_wal_mode_with_iso_and_epoch_times(tmp_path: Path) -> None:
    store = sqlite_store(tmp_path)
    await store.record(entry(0))
    store.close()
    with sqlite3.connect(tmp_path / "audit.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT time, epoch FROM audit").fetchone() == ("2026-09-21T14:13:20.000+00:00", 1.79e9)


async def test_rows_survive_closing_and_reopening(store_backend: Backend) -> None:
    first = AuditStore(store_backend.open("audit"))
    await first.record(entry(1))
    first.close()
    second = AuditStore(store_backend.open("audit"))
    await second.record(entry(2))
    assert [e.epoch for e in await second.recent()] == [1_790_000_002.0, 1_790_000_001.0]
    second.close()


async def test_committed_rows_survive_kill_9_of_the_process(store_backend: Backend) -> None:
    path = store_backend.data_dir / "audit.db"
    child = textwrap.dedent(
        f"""
        import os, signal, anyio
        from pathlib import Path
        from gateway.pipeline.audit import AuditEntry, AuditStore
        from gateway.stores import StoreSettings

        async def main():
            store = AuditStore.open(StoreSettings({store_backend.settings.url!r}), Path({str(path.parent)!r}))
            for n in range(25):
                await store.record(AuditEntry(float(n), "s", "c", "t", "d", "ok", 1.0, f"row {{n}}"))
            os.kill(os.getpid(), signal.SIGKILL)

        anyio.run(main)
        """
    )
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-c", child], cwd=REPO, env={"PYTHONPATH": str(REPO)}, check=False
        )
    assert done.returncode == -signal.SIGKILL
    if store_backend.kind == "sqlite":
        # The rows were never checkpointed into the main file: the WAL alone carried them.
        assert await anyio.Path(f"{path}-wal").exists()
    reopened = AuditStore(store_backend.open("audit"))
    rows = await reopened.recent(limit=100)
    reopened.close()
    assert [row.detail for row in rows] == [f"row {n}" for n in reversed(range(25))]


async def test_an_unopenable_database_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match=r"Cannot open the audit database .*missing"):
        sqlite_store(tmp_path / "missing")


async def test_an_unreachable_postgresql_is_a_clear_error_that_hides_the_password(tmp_path: Path) -> None:
    port = free_port()
    settings = StoreSettings(url=f"postgresql://gateway:hunter2@127.0.0.1:{port}/gateway")
    where = rf"postgresql://gateway:\*\*\*@127.0.0.1:{port}/gateway"
    with pytest.raises(AuditError, match=rf"Cannot open the audit database {where}: .*refused") as raised:
        AuditStore.open(settings, tmp_path)
    assert "hunter2" not in raised.value.message


async def test_a_successful_call_is_recorded_with_a_digest_not_the_arguments(
    store: AuditStore, make_call: MakeCall, store_backend: Backend
) -> None:
    async def answer(call: ToolCall) -> types.CallToolResult:
        return text_result("fine")

    arguments = {"password": "hunter2-secret", "n": 1}
    result = await AuditCalls(store, Ticks())(make_call(make_tool("login"), arguments), answer)
    assert result == text_result("fine")
    [row] = await store.recent()
    assert row == AuditEntry(
        epoch=1_790_000_000.25,
        session="s1",
        caller="alice",
        tool="login",
        args_digest=arguments_digest({"n": 1, "password": "hunter2-secret"}),
        outcome="ok",
        duration_ms=250.0,
        detail="",
    )
    if store_backend.kind == "sqlite":
        files = (store_backend.data_dir / "audit.db", store_backend.data_dir / "audit.db-wal")
        assert b"hunter2" not in b"".join(path.read_bytes() for path in files)


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (LoopRefusedError("Refused: same call 5 times"), "refused:loop"),
        (ToolTimeoutError("did not finish within 1 s"), "timeout"),
        (UnknownToolError("nope"), "unknown_tool"),
    ],
)
async def test_refused_and_failed_calls_are_recorded_and_reraised(
    store: AuditStore, make_call: MakeCall, error: Exception, outcome: str
) -> None:
    async def failing(call: ToolCall) -> types.CallToolResult:
        raise error

    with pytest.raises(type(error)):
        await AuditCalls(store, Ticks())(make_call(), failing)
    [row] = await store.recent()
    assert (row.outcome, row.detail) == (outcome, str(error))


async def test_an_error_result_is_recorded_as_an_error_with_its_text(store: AuditStore, make_call: MakeCall) -> None:
    async def error_result(call: ToolCall) -> types.CallToolResult:
        return text_result("no such file", is_error=True)

    await AuditCalls(store, Ticks())(make_call(), error_result)
    [row] = await store.recent()
    assert (row.outcome, row.detail) == ("error", "no such file")


async def test_an_error_text_holding_a_lone_surrogate_is_recorded_with_a_replacement_character(
    store: AuditStore, make_call: MakeCall
) -> None:
    # A file name Python decoded with surrogateescape, say, in an in-process tool's error.
    async def error_result(call: ToolCall) -> types.CallToolResult:
        return text_result("cannot open \udcff.txt", is_error=True)

    await AuditCalls(store, Ticks())(make_call(), error_result)
    [row] = await store.recent()
    assert row.detail == "cannot open \ufffd.txt"


async def test_a_spooled_row_holding_a_lone_surrogate_is_written_and_shipped(tmp_path: Path) -> None:
    store = sqlite_store(tmp_path)
    try:
        async with anyio.create_task_group() as writer:
            writer.start_soon(store.maintain, Background().report)
            await anyio.lowlevel.checkpoint()
            await store.record(AuditEntry(1.0, "s1", "c", "tool\ud800", "d", "error", 1.0, "half \ud800 a pair"))
            # `recent` waits for this process's spooled rows to ship.
            [row] = await store.recent()
            writer.cancel_scope.cancel()
    finally:
        store.close()
    assert (row.tool, row.detail) == ("tool\ufffd", "half \ufffd a pair")


async def test_an_unexpected_exception_is_recorded_and_reraised(store: AuditStore, make_call: MakeCall) -> None:
    async def crashing(call: ToolCall) -> types.CallToolResult:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await AuditCalls(store, Ticks())(make_call(), crashing)
    [row] = await store.recent()
    assert (row.outcome, row.detail) == ("error", "RuntimeError: boom")


async def test_a_cancelled_call_is_still_recorded(store: AuditStore, make_call: MakeCall) -> None:
    started = anyio.Event()

    async def hanging(call: ToolCall) -> types.CallToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(AuditCalls(store, Ticks()), make_call(), hanging)
            await started.wait()
            group.cancel_scope.cancel()
    [row] = await store.recent()
    assert row.outcome == "cancelled"


OLD_SCHEMA = """
CREATE TABLE audit (
    id INTEGER PRIMARY KEY, time TEXT NOT NULL, epoch REAL NOT NULL, session TEXT NOT NULL,
    caller TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT NULL, outcome TEXT NOT NULL,
    duration_ms REAL NOT NULL, detail TEXT NOT NULL
);
INSERT INTO audit (time, epoch, session, caller, tool, args_digest, outcome, duration_ms, detail)
VALUES ('2026-09-20T00:00:00.000+00:00', 1790000000.0, 's1', 'alice', 'echo', 'd', 'ok', 1.5, 'before');
"""


async def test_a_database_written_before_request_and_trace_ids_gains_the_columns_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    with closing(sqlite3.connect(path)) as db:
        db.executescript(OLD_SCHEMA)
    store = sqlite_store(tmp_path)
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    try:
        await store.record(AuditEntry(1_790_000_001.0, "s1", "alice", "echo", "d", "ok", 2.0, "after", "abc123", trace))
        newest, oldest = await store.recent()
    finally:
        store.close()
    assert (oldest.detail, oldest.request_id, oldest.trace_id) == ("before", "", "")
    assert (newest.detail, newest.request_id, newest.trace_id) == ("after", "abc123", trace)
    # Opening it again finds the column present and changes nothing.
    sqlite_store(tmp_path).close()


async def test_rows_recorded_together_are_each_on_disk_before_their_record_returns_and_then_in_the_database(
    tmp_path: Path,
) -> None:
    store = sqlite_store(tmp_path)
    kept: dict[int, bool] = {}

    def on_disk(session: str) -> bool:
        """Whether a process killed now would leave the row behind: in a spool file, or committed."""
        spooled = any(f'"{session}"' in path.read_text() for path in (tmp_path / "spool" / "audit").glob("*.jsonl"))
        with closing(sqlite3.connect(tmp_path / "audit.db")) as reader:
            committed = reader.execute("SELECT count(*) FROM audit WHERE session = ?", (session,)).fetchone()[0]
        return spooled or committed == 1

    async def one(n: int) -> None:
        await store.record(entry(n, session=f"s{n}"))
        kept[n] = on_disk(f"s{n}")

    try:
        async with anyio.create_task_group() as writer:
            writer.start_soon(store.maintain, Background().report)
            await anyio.lowlevel.checkpoint()
            with anyio.fail_after(10):
                async with anyio.create_task_group() as calls:
                    for n in range(16):
                        calls.start_soon(one, n)
                recorded = await store.recent(limit=100)
            writer.cancel_scope.cancel()
    finally:
        store.close()
    assert kept == dict.fromkeys(range(16), True)
    assert sorted(row.session for row in recorded) == sorted(f"s{n}" for n in range(16))
