"""The audit trail: one SQLite row per tool call, written before the call's result is returned.

Durability: the database runs in WAL mode with `synchronous=NORMAL`. A commit then has
written its row into the WAL file (the operating system's page cache) before it returns, so
the row survives the gateway being killed, `kill -9` included; only a power loss or kernel
crash can take back the last commits. `synchronous=FULL` would add an fsync to every call
(about 0.35 ms here against 0.02 ms) for that last case, which an audit trail of tool calls
does not need.

Batching: while `maintain` runs, a call's row is queued and one writer task on the event loop
commits everything queued since its last commit in one transaction (group commit): the caller
waits for that commit, so "committed before the result is returned" still holds, and under load
a commit is shared by every call that finished in the same turn of the loop (about 14 us a row
in a batch against 20 to 80 us for a row committed alone). Without `maintain` (the command line,
tests of the store alone) a row is committed inline.

Threading: the writer runs on the event loop (a hop to a worker thread and back costs about
100 us a call). What can stall for milliseconds is a WAL checkpoint, so automatic checkpoints
are off and `maintain` runs them in a worker thread on a connection of its own; reads for
`recent` also run in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from gateway import requestid
from gateway.errors import (
    GatewayError,
    ToolError,
    ToolInputError,
    ToolRefusedError,
    ToolTimeoutError,
    UnknownToolError,
    UpstreamUnavailableError,
    describe_error,
)
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.pipeline.storage import open_database
from gateway.redaction import NO_SECRETS, Redactor

# Enough to say what went wrong; full results and arguments never go into the audit trail.
_MAX_DETAIL_CHARS = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    time TEXT NOT NULL,
    epoch REAL NOT NULL,
    session TEXT NOT NULL,
    caller TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    outcome TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    detail TEXT NOT NULL,
    request_id TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_by_session ON audit (session, id);
CREATE INDEX IF NOT EXISTS audit_by_tool ON audit (tool, id);
"""
log = logging.getLogger(__name__)
_COLUMNS = "epoch, session, caller, tool, args_digest, outcome, duration_ms, detail, request_id"
# Columns added since the first release, created in a database written by an older gateway.
_ADDED_COLUMNS = {"request_id": "TEXT NOT NULL DEFAULT ''"}


_INSERT = f"INSERT INTO audit (time, {_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)"


class AuditError(GatewayError):
    """The audit database cannot be opened or written."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audited call. `outcome` is `ok`, `error`, `refused:<reason>`, `timeout`, ...;
    `request_id` links the row to the call's log lines (see `gateway.requestid`)."""

    epoch: float
    session: str
    caller: str
    tool: str
    args_digest: str
    outcome: str
    duration_ms: float
    detail: str = ""
    request_id: str = ""

    @property
    def time(self) -> str:
        """The call's start as an ISO 8601 UTC timestamp."""
        return datetime.fromtimestamp(self.epoch, UTC).isoformat(timespec="milliseconds")


@dataclass(slots=True)
class _Batch:
    """Rows waiting for the writer's next commit, and how their callers learn it is done."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    committed: anyio.Event = field(default_factory=anyio.Event)
    error: AuditError | None = None


CallObserver = Callable[[AuditEntry, str], None]
"""Told of every audited call, after its row is written: the entry and the source of its tool."""


class AuditStore:
    """An append-only SQLite audit trail; `redact` keeps the configured secrets out of every row."""

    def __init__(self, path: str | Path, redact: Redactor = NO_SECRETS) -> None:
        self.path = Path(path)
        self._redact = redact
        self._lock = threading.Lock()
        self._batch = _Batch()
        self._wake = anyio.Event()
        self._writing = False
        try:
            self._db = open_database(self.path, _SCHEMA)
            _add_missing_columns(self._db)
            # Checkpoints copy the WAL into the database and can take milliseconds; `maintain` runs
            # them in a worker thread so that the insert on the event loop stays a short append.
            self._db.execute("PRAGMA wal_autocheckpoint=0")
        except sqlite3.Error as error:
            raise AuditError(f"Cannot open the audit database {self.path}: {error}") from None

    async def record(self, entry: AuditEntry) -> None:
        """Append `entry`; once this returns the row is committed (see Batching above)."""
        row = self._row(entry)
        if not self._writing:
            self._insert([row])
            return
        batch = self._batch
        batch.rows.append(row)
        self._wake.set()
        await batch.committed.wait()
        if batch.error is not None:
            raise batch.error

    async def maintain(self, interval: float = 5.0) -> None:
        """Until cancelled: commit queued rows in batches, and checkpoint the WAL in a worker thread
        every `interval` seconds."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._write_batches)
            while True:
                await anyio.sleep(interval)
                await anyio.to_thread.run_sync(self._checkpoint)

    async def _write_batches(self) -> None:
        """The one writer: each time rows are queued, commit all of them in one transaction."""
        self._writing = True
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                batch, self._batch = self._batch, _Batch()
                try:
                    self._insert(batch.rows)
                except AuditError as error:
                    batch.error = error
                batch.committed.set()
        finally:
            # Rows queued after the last commit are written inline, with their callers still waiting.
            self._writing = False
            if self._batch.rows:
                batch, self._batch = self._batch, _Batch()
                try:
                    self._insert(batch.rows)
                except AuditError as error:
                    batch.error = error
                batch.committed.set()

    def _checkpoint(self) -> None:
        # Its own connection: a passive checkpoint never blocks the writer on the event loop.
        try:
            with closing(sqlite3.connect(self.path, isolation_level=None)) as db:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as error:
            log.warning("audit checkpoint failed: %s", error)

    async def recent(self, limit: int = 50, session: str | None = None, tool: str | None = None) -> list[AuditEntry]:
        """The newest entries first, optionally only one session's or one tool's."""
        return await anyio.to_thread.run_sync(self._select, limit, session, tool)

    def close(self) -> None:
        """Close the database; later calls fail."""
        with self._lock:
            self._db.close()

    def _row(self, entry: AuditEntry) -> tuple[Any, ...]:
        redact = self._redact
        return (
            entry.time,
            entry.epoch,
            redact(entry.session),
            redact(entry.caller),
            redact(entry.tool),
            entry.args_digest,
            entry.outcome,
            entry.duration_ms,
            # Redacted before it is cut, so that no part of a secret is left at the cut.
            _one_line(redact(entry.detail))[:_MAX_DETAIL_CHARS],
            entry.request_id,
        )

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        """Commit `rows` in one transaction."""
        try:
            with self._lock:
                if len(rows) == 1:
                    self._db.execute(_INSERT, rows[0])
                else:
                    # The connection autocommits each statement; one transaction makes the batch one commit.
                    self._db.execute("BEGIN")
                    try:
                        self._db.executemany(_INSERT, rows)
                        self._db.execute("COMMIT")
                    except sqlite3.Error:
                        self._db.execute("ROLLBACK")
                        raise
        except sqlite3.Error as error:
            raise AuditError(f"Cannot write to the audit database {self.path}: {error}") from None

    def _select(self, limit: int, session: str | None, tool: str | None) -> list[AuditEntry]:
        clauses, params = [], []
        for column, value in (("session", session), ("tool", tool)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        query = f"SELECT {_COLUMNS} FROM audit {where} ORDER BY id DESC LIMIT ?"
        with self._lock:
            rows = self._db.execute(query, (*params, limit)).fetchall()
        return [AuditEntry(*row) for row in rows]


class AuditCalls:
    """Pipeline step, outermost: audit every call, refused and failed ones included.

    `clock` gives wall-clock seconds since the epoch; it times the call too. `observe` (the
    metrics) is told of each call once its row is written.
    """

    def __init__(self, store: AuditStore, clock: Callable[[], float], observe: CallObserver | None = None) -> None:
        self._store = store
        self._clock = clock
        self._observe = observe

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Run the call, then record its outcome before the result or error goes back."""
        started = self._clock()
        try:
            result = await call_next(call)
        except GatewayError as error:
            await self._record(call, started, outcome_of(error), error.message)
            raise
        except anyio.get_cancelled_exc_class():
            # The row must still be written while the call's scope is being torn down.
            with anyio.CancelScope(shield=True):
                await self._record(call, started, "cancelled", "")
            raise
        except Exception as error:
            await self._record(call, started, "error", describe_error(error))
            raise
        detail = _first_text(result) if result.is_error else ""
        await self._record(call, started, "error" if result.is_error else "ok", detail)
        return result

    async def _record(self, call: ToolCall, started: float, outcome: str, detail: str) -> None:
        duration_ms = max(0.0, (self._clock() - started) * 1000)
        entry = AuditEntry(
            epoch=started,
            session=call.session.id,
            caller=call.session.caller,
            tool=call.tool.name,
            args_digest=arguments_digest(call.arguments),
            outcome=outcome,
            duration_ms=round(duration_ms, 3),
            detail=detail,
            request_id=requestid.current() or "",
        )
        await self._store.record(entry)
        if self._observe is not None:
            self._observe(entry, call.tool.source)


def _add_missing_columns(db: sqlite3.Connection) -> None:
    """Bring an audit table written by an older gateway up to the current columns; old rows get the defaults."""
    present = {row[1] for row in db.execute("PRAGMA table_info(audit)")}
    for column, definition in _ADDED_COLUMNS.items():
        if column not in present:
            db.execute(f"ALTER TABLE audit ADD COLUMN {column} {definition}")


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of `arguments`: proves what was sent without storing it."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def outcome_of(error: GatewayError) -> str:
    """The audit outcome for a failed or refused call."""
    if isinstance(error, ToolRefusedError):
        return f"refused:{getattr(error, 'reason', None) or 'policy'}"
    for kind, outcome in _OUTCOMES:
        if isinstance(error, kind):
            return outcome
    return "error"


_OUTCOMES: tuple[tuple[type[GatewayError], str], ...] = (
    (ToolTimeoutError, "timeout"),
    (ToolInputError, "invalid_arguments"),
    (UpstreamUnavailableError, "unavailable"),
    (UnknownToolError, "unknown_tool"),
    (ToolError, "error"),
)


def _one_line(text: str) -> str:
    # One row is one line wherever it is shown; a multi-line error (every violation of a
    # schema) would otherwise read as several rows in `gateway audit` and in logs.
    return " ".join(text.split())


def _first_text(result: types.CallToolResult) -> str:
    return next((block.text for block in result.content if isinstance(block, types.TextContent)), "")
