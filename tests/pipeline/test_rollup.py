"""The audit rollup counted as rows are written, on both backends: calls per tool, class of
outcome and time bucket, durations in buckets, a row inserted twice counted once, rows written before it
counted when it arrives; quantiles from its histograms; server events written and read back."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from gateway.pipeline import rollupwrites
from gateway.pipeline.audit import AuditEntry, AuditStore
from gateway.pipeline.rollup import BOUNDS_MS, DAY, FEW, ClosedBuckets, Rollup, merged, quantile, tiles
from gateway.stores import Database, StoreSettings
from gateway.stores.database import Row
from gateway.stores.serverevents import RESTART, ServerEvents
from gateway.stores.sqlite import SqliteDatabase
from tests.support.databases import Backend

pytestmark = pytest.mark.anyio
T0 = 1_800_000_000  # a minute, ten minutes and an hour start here


def entry(offset: float, tool: str, outcome: str = "ok", duration_ms: float = 10.0) -> AuditEntry:
    return AuditEntry(T0 + offset, "s1", "alice", tool, "digest", outcome, duration_ms)


async def test_each_written_row_is_counted_by_class_in_its_minute_ten_minutes_and_hour(store_backend: Backend) -> None:
    store = AuditStore(store_backend.open("audit"))
    try:
        for offset, outcome, duration in [(0, "ok", 0.5), (30, "ok", 12.0), (59, "error", 100.0), (60, "ok", 70000)]:
            await store.record(entry(offset, "calc__evaluate", outcome, duration))
        await store.record(entry(700, "files__read", "refused:budget", 3.0))
        await store.record(entry(701, "files__read", "unavailable", 3.0))
        await store.record(entry(702, "files__read", "sampling", 3.0))
        rollup = Rollup(store.database)
        minutes = {item.key: item for item in rollup.per_bucket(60, T0, T0 + 3600)}
        hours = rollup.per_tool(3600, T0, T0, tools={"calc__evaluate"})
        tens = rollup.per_tool(600, T0 + 600, T0 + 600)
        series = rollup.series(600, T0, T0 + 600)
    finally:
        store.close()
    first = minutes[T0]
    assert first.counts == {"ok": 2, "tool error": 1, "refused": 0, "timeout": 0, "upstream down": 0}
    assert first.histogram[0] == 1 and first.histogram[BOUNDS_MS.index(15)] == 1
    assert first.histogram[BOUNDS_MS.index(150)] == 1 and sum(first.histogram) == 3
    assert minutes[T0 + 60].histogram[-1] == 1
    # A refusal and a server down are counted, and no latency; an upstream's sampling request is no call.
    assert minutes[T0 + 660].counts["refused"] == minutes[T0 + 660].counts["upstream down"] == 1
    assert minutes[T0 + 660].calls == 2 and sum(minutes[T0 + 660].histogram) == 0
    assert [(item.key, item.calls, item.not_ok) for item in hours] == [("calc__evaluate", 4, 1)]
    assert [(item.key, item.calls) for item in tens] == [("files__read", 2)]
    assert sorted(series) == [("calc__evaluate", T0, 4, 1), ("files__read", T0 + 600, 2, 2)]


async def test_a_row_shipped_and_replayed_from_a_spool_again_is_counted_once(
    store_backend: Backend, tmp_path: Path
) -> None:
    # A spool file a killed process left, holding a row that had already shipped: replayed at each opening.
    spool = tmp_path / "spool"
    spool.mkdir()
    row = ["r-1", "t", T0, "s1", "alice", "calc__evaluate", "d", "ok", 5.0, "", "", "", ""]
    for _ in range(2):
        (spool / "gone-1-00000000.jsonl").write_text(json.dumps(row) + "\n")
        AuditStore(store_backend.open("audit"), spool_dir=spool).close()
    db = store_backend.open("audit")
    try:
        totals = Rollup(db).per_bucket(60, T0, T0)
        stored = db.fetch_one("SELECT COUNT(*) FROM audit")
    finally:
        db.close()
    assert stored == (1,)
    assert [item.calls for item in totals] == [1]


async def test_a_batch_of_rows_is_counted_as_the_same_rows_written_one_at_a_time(store_backend: Backend) -> None:
    db = store_backend.open("audit")
    store = AuditStore(db)
    outcomes = ["ok", "error", "timeout", "unavailable", "refused:budget", "sampling", "ok"]
    rows = [
        [f"r-{n}", "t", T0 + n * 37.5, "s", "alice", f"tool{n % 3}", "d", outcomes[n % 7], n * 1.7, "", "", "", ""]
        for n in range(400)
    ]
    rows[5][9] = "no match"
    rollup = "SELECT * FROM audit_rollup ORDER BY span, start, tool"
    try:
        with db.transaction() as queries:
            rollupwrites.write(queries, db.dialect, rows)
        batched = db.fetch_all(rollup)
        db.execute("DELETE FROM audit")
        db.execute("DELETE FROM audit_rollup")
        for row in rows:
            with db.transaction() as queries:
                rollupwrites.write(queries, db.dialect, [row])
        one_at_a_time = db.fetch_all(rollup)
    finally:
        store.close()
    assert batched == one_at_a_time
    assert sum(row[3] for row in batched if row[0] == 60 and row[2] == "*") == 400 // 7 * 2 + 1


async def test_writers_sharing_counters_at_once_neither_deadlock_nor_lose_a_count(store_backend: Backend) -> None:
    # Two replicas shipping at once, their rows naming the same tools in opposite orders: each
    # batch's upserts run in key order, so neither waits on the other in a cycle.
    writers = [store_backend.open("audit"), store_backend.open("audit")]
    AuditStore(store_backend.open("audit")).close()

    def ship(db: Database, tools: list[str], prefix: str) -> None:
        for n in range(40):
            rows = [
                [f"{prefix}-{n}-{tool}", "t", T0 + n, "s", "alice", tool, "d", "ok", 1.0, "", "", "", ""]
                for tool in tools
            ]
            with db.transaction() as queries:
                rollupwrites.write(queries, db.dialect, rows)

    try:
        # A deadlock would not hang: PostgreSQL ends one of the transactions with an error.
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, ship, writers[0], ["a", "b", "c"], "x")
            group.start_soon(anyio.to_thread.run_sync, ship, writers[1], ["c", "b", "a"], "y")
        totals = Rollup(writers[0]).per_tool(3600, T0, T0)
    finally:
        for db in writers:
            db.close()
    assert sorted((item.key, item.calls) for item in totals) == [("a", 80), ("b", 80), ("c", 80)]


async def test_the_all_tools_rows_and_the_day_rows_give_what_summing_each_tools_buckets_gives(
    store_backend: Backend,
) -> None:
    store = AuditStore(store_backend.open("audit"))
    calls = [
        (offset, tool, outcome)
        for offset in range(-2 * DAY, 2 * DAY, 4999)
        for tool, outcome in [("calc__evaluate", "ok"), ("files__read", "error"), ("", "refused:sessions")]
    ]
    try:
        for offset, tool, outcome in calls:
            await store.record(entry(offset, tool, outcome, duration_ms=offset % 97))
        rollup = Rollup(store.database)
        first, last = (T0 - 2 * DAY) // 3600 * 3600, (T0 + 2 * DAY) // 3600 * 3600
        every = rollup.per_bucket(3600, first, last)
        each = rollup.per_bucket(3600, first, last, tools={"calc__evaluate", "files__read", ""})
        per_tool = rollup.per_tool(3600, first, last)
        per_tool_by_hours = rollup.per_tool(60, first, last + 3540)
        none = rollup.per_bucket(3600, first, last, tools=set())
    finally:
        store.close()
    assert sorted((item.key, item.counts, item.histogram) for item in every) == sorted(
        (item.key, item.counts, item.histogram) for item in each
    )
    assert sum(item.calls for item in every) == len(calls)
    assert {item.key: item.calls for item in per_tool} == {"calc__evaluate": 70, "files__read": 70, "": 70}
    assert {item.key: item.not_ok for item in per_tool} == {"calc__evaluate": 0, "files__read": 70, "": 70}
    assert sorted((item.key, item.counts, item.histogram) for item in per_tool) == sorted(
        (item.key, item.counts, item.histogram) for item in per_tool_by_hours
    )
    assert none == []


async def test_rows_counted_before_the_all_tools_and_day_rows_are_added_up_when_they_arrive(
    store_backend: Backend,
) -> None:
    store = AuditStore(store_backend.open("audit"))
    try:
        for offset, tool in [(1, "calc__evaluate"), (3601, "calc__evaluate"), (3602, "files__read")]:
            await store.record(entry(offset, tool))
        # The rollup as version 6 of the audit store left it: no all-tools rows, no day rows, its trigger.
        store.database.execute("DELETE FROM audit_rollup WHERE tool = '*' OR span = ?", (DAY,))
        store.database.execute("DELETE FROM schema_version WHERE store = 'audit' AND version >= 7")
    finally:
        store.close()
    store = AuditStore(store_backend.open("audit"))
    try:
        await store.record(entry(3603, "files__read"))
        rollup = Rollup(store.database)
        hours = rollup.per_bucket(3600, T0, T0 + 3600)
        day = T0 // DAY * DAY
        per_tool = rollup.per_tool(3600, day, day + DAY - 3600)
    finally:
        store.close()
    assert sorted((item.key - T0, item.calls) for item in hours) == [(0, 1), (3600, 3)]
    assert sorted((item.key, item.calls) for item in per_tool) == [("calc__evaluate", 2), ("files__read", 2)]


def test_a_windows_totals_are_tiled_by_the_coarsest_buckets_that_fit() -> None:
    day = T0 // DAY * DAY
    assert tiles(3600, day - 7200, day + DAY + 3600) == [
        (3600, day - 7200, day - 3600),
        (DAY, day, day),
        (3600, day + DAY, day + DAY),
    ]
    assert tiles(60, T0 - 120, T0 + 660) == [(60, T0 - 120, T0 - 60), (600, T0, T0), (60, T0 + 600, T0 + 600)]
    assert tiles(600, T0, T0 + 600) == [(600, T0, T0)]
    assert tiles(600, T0, T0) == []


def test_rows_written_before_the_rollup_are_counted_when_it_arrives(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "audit.db")) as old:
        old.execute(
            "CREATE TABLE audit (id INTEGER PRIMARY KEY, time TEXT NOT NULL, epoch REAL NOT NULL,"
            " session TEXT NOT NULL, caller TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT NULL,"
            " outcome TEXT NOT NULL, duration_ms REAL NOT NULL, detail TEXT NOT NULL)"
        )
        old.executemany(
            "INSERT INTO audit (time, epoch, session, caller, tool, args_digest, outcome, duration_ms, detail)"
            " VALUES ('t', ?, 's', 'c', 'calc__evaluate', 'd', ?, ?, '')",
            [(T0 + 1, "ok", 3.0), (T0 + 2, "ok", 4.0), (T0 + 61, "timeout", 30000.0)],
        )
        old.commit()
    store = AuditStore(Backend("sqlite", StoreSettings(), tmp_path).open("audit"))
    try:
        totals = Rollup(store.database).per_bucket(60, T0, T0 + 60)
        # The whole day is read from the day rows the migration added up from the hours.
        per_day = Rollup(store.database).per_tool(3600, T0 // DAY * DAY, T0 // DAY * DAY + DAY - 3600)
        kept = store.database.fetch_one("SELECT COUNT(*) FROM audit")
    finally:
        store.close()
    assert sorted((item.key - T0, item.counts["ok"], item.counts["timeout"]) for item in totals) == [
        (0, 2, 0),
        (60, 0, 1),
    ]
    assert kept == (3,)
    day = T0 // DAY * DAY
    assert [(item.key, item.calls) for item in per_day] == [("calc__evaluate", 3)]
    assert tiles(3600, day, day + DAY) == [(DAY, day, day)]


async def test_closed_buckets_are_read_once_and_the_open_one_each_time(tmp_path: Path) -> None:
    store = AuditStore(Backend("sqlite", StoreSettings(), tmp_path).open("audit"))
    closed = ClosedBuckets()
    try:
        rollup = Rollup(store.database)
        await store.record(entry(0, "calc__evaluate"))
        await store.record(entry(120, "calc__evaluate"))
        before = closed.per_tool(rollup, 60, T0, T0 + 120, None)
        await store.record(entry(121, "calc__evaluate"))
        await store.record(entry(1, "calc__evaluate"))  # late, into a closed bucket
        again = closed.per_tool(rollup, 60, T0, T0 + 120, None)
        moved = closed.per_bucket(rollup, 60, T0, T0 + 180, None)
    finally:
        store.close()
    assert [item.calls for item in before] == [2]
    assert [item.calls for item in again] == [3]
    assert sorted((int(item.key) - T0, item.calls) for item in moved) == [(0, 2), (120, 2)]


class Recording(SqliteDatabase):
    """A real SQLite database that keeps each query read through it, with its parameters."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.read: list[tuple[str, Sequence[object]]] = []

    def fetch_all(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        self.read.append((sql, params))
        return super().fetch_all(sql, params)

    def plans(self) -> list[str]:
        """How SQLite reads the table for each query kept, in order."""
        return [
            " ".join(step[3] for step in super(Recording, self).fetch_all(f"EXPLAIN QUERY PLAN {sql}", params))
            for sql, params in self.read
        ]


async def test_a_few_tools_are_read_along_the_index_by_tool_and_every_tool_along_the_key(tmp_path: Path) -> None:
    AuditStore(Backend("sqlite", StoreSettings(), tmp_path).open("audit")).close()
    db = Recording(tmp_path / "audit.db")
    try:
        rollup = Rollup(db)
        rollup.per_bucket(3600, T0, T0 + 7 * DAY)
        rollup.per_bucket(3600, T0, T0 + 7 * DAY, {"calc__evaluate", "files__read"})
        rollup.series(3600, T0, T0 + 7 * DAY, {"calc__evaluate"})
        few = db.plans()
        db.read.clear()
        rollup.per_tool(3600, T0, T0 + 7 * DAY)
        rollup.per_bucket(3600, T0, T0 + 7 * DAY, {f"tool{index}" for index in range(FEW + 1)})
        many = db.plans()
    finally:
        db.close()
    # Along the key, a week of a few tools would read every tool's row of each of its hours.
    assert all("USING INDEX audit_rollup_by_tool (span=? AND tool=? AND start>? AND start<?)" in plan for plan in few)
    assert many and all("USING PRIMARY KEY (span=? AND start>? AND start<?)" in plan for plan in many)


def test_quantiles_are_read_from_the_histograms_within_their_bucket() -> None:
    histogram = merged([[0] * len(BOUNDS_MS) + [0], [0] * len(BOUNDS_MS) + [0]])
    assert quantile(histogram, 0.5) is None
    ten_to_fifteen = BOUNDS_MS.index(15)
    histogram[ten_to_fifteen] = 100
    assert quantile(histogram, 0.5) == 12.5
    assert quantile(histogram, 0.95) == pytest.approx(14.75)
    histogram[-1] = 100
    assert quantile(histogram, 0.95) == 60000.0


async def test_server_events_are_written_and_the_state_before_a_window_is_read_with_it(
    store_backend: Backend,
) -> None:
    now = [float(T0)]
    events = ServerEvents(lambda: now[0], "replica-a")
    store = AuditStore(store_backend.open("audit"))
    try:
        events.open(store.database)
        for offset, event in [(0, "connecting"), (1, "ready"), (50, RESTART), (100, "reconnecting"), (400, "ready")]:
            now[0] = T0 + offset
            events.note("calc", event)
        assert await events.flush()
        read = events.between(T0 + 60, T0 + 3600)
    finally:
        store.close()
    assert [(e.epoch - T0, e.event) for e in read] == [(1, "ready"), (100, "reconnecting"), (400, "ready")]


async def test_two_replicas_events_are_read_back_each_with_its_replica_and_each_ones_state_before_the_window(
    store_backend: Backend,
) -> None:
    now = [float(T0)]
    first, second = ServerEvents(lambda: now[0], "replica-a"), ServerEvents(lambda: now[0], "replica-b")
    store = AuditStore(store_backend.open("audit"))
    try:
        for writer in (first, second):
            writer.open(store.database)
        told = [(0, first, "ready"), (5, second, "connecting"), (10, second, "failed"), (100, first, "ready")]
        told += [(110, second, "ready"), (120, first, "reconnecting")]
        for offset, writer, event in told:
            now[0] = T0 + offset
            writer.note("calc", event)
        assert await first.flush() and await second.flush()
        read = first.between(T0 + 60, T0 + 3600)
    finally:
        store.close()
    assert [(e.epoch - T0, e.replica, e.event) for e in read] == [
        (0, "replica-a", "ready"),
        (10, "replica-b", "failed"),
        (100, "replica-a", "ready"),
        (110, "replica-b", "ready"),
        (120, "replica-a", "reconnecting"),
    ]
