"""The audit trail: one row per tool call, written before the call's result is returned.

The rows live behind the store seam (`gateway.stores`): a SQLite file by default, or the
PostgreSQL database several replicas share.

Durability: SQLite runs in WAL mode with `synchronous=NORMAL`: a commit has written its rows into
the WAL file (the operating system's page cache) before it returns. PostgreSQL has committed (and
flushed) them when the insert returns. Either survives the gateway being killed.

Spooling: while `maintain` runs, a call's row is appended to a local spool file
(`gateway.stores.spool`, `<data_dir>/spool/audit` or under `store.spool`) before the result is
returned: one `write(2)`, which survives the process being killed (`kill -9` included) as a commit
does. The writer ships spooled rows to the database in one transaction at most every
`SHIP_INTERVAL` s, and a store opened on the same spool directory later replays what a killed
process left. Each row carries a unique `row_id`, inserted with `ON CONFLICT DO NOTHING`, so a
row both shipped and replayed is stored, and counted in the rollup (`gateway.pipeline.rollupwrites`),
once. A commit on the caller's path would cost a network round trip for PostgreSQL; for SQLite, a
caller's wait of 34 us for a row committed alone against 9 us for its append (`benchmarks.audit_rows`,
docs/decisions/0030-audit-spool.md). `recent` waits for this process's spooled rows to ship, so a
reader sees the calls it made. Without `maintain`
(the command line, tests of the store alone) a row is committed at once.

A full disk: before a call runs, `reserve` makes sure the spool's file system has room for its row
(`gateway.stores.spool`). When it has not, the call is refused before it runs
(`refused:audit`), `/readyz` answers 503 until there is room again, and the log says so once per
`WARN_INTERVAL`, not once per call. Service resumes by itself when space returns.

Threading: SQLite's inserts run on the event loop (a hop to a worker thread and back costs about
100 us); PostgreSQL's cross the network in a worker thread. What can stall SQLite for
milliseconds is a WAL checkpoint, so automatic checkpoints are off and `maintain` runs them in a
worker thread on a connection of its own; reads for `recent` also run in a worker thread.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

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
from gateway.pipeline import rollupwrites
from gateway.pipeline.chain import DETAIL_NOTE, OUTCOME_NOTE, CallNext, ToolCall
from gateway.runtime import requestid, tracing
from gateway.runtime.background import Report
from gateway.runtime.redaction import NO_SECRETS, Redactor
from gateway.stores import Database, DatabaseError, StoreSettings, migrate, open_database
from gateway.stores.spool import Spool, SpoolError, orphans

# Enough to say what went wrong; full results and arguments never go into the audit trail.
_MAX_DETAIL_CHARS = 1000

log = logging.getLogger(__name__)
_COLUMNS = (
    "epoch, session, caller, tool, args_digest, outcome, duration_ms, detail, request_id, trace_id, parent_request_id"
)
STORE = "audit"
"""The audit trail's name in the store seam (its SQLite file is `audit.db`)."""
SHIP_INTERVAL = 0.02
"""Seconds between two shipments of spooled rows: at most 50 PostgreSQL commits a second per
process, however many calls; a reader of `recent` waits about this long for its own rows."""
SHIPPING = "audit"
"""The name the audit trail's upkeep (shipping spooled rows) runs and reports under."""
RETRY_INTERVAL = 1.0
"""Seconds before spooled rows are shipped again after the database refused them."""
FLUSH_TIMEOUT = 10.0
"""Seconds `recent` waits at most for this process's spooled rows to ship (the database may be down)."""
REPLAY_BATCH = 1000
"""Rows of a dead process's spool file inserted per transaction."""
WARN_INTERVAL = 60.0
"""Seconds between two log lines saying the audit trail cannot be written."""

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_WIDTH = 13
# Spooled rows of a version before `trace_id` or `parent_request_id` have fewer values; the missing
# ones are stored as ''.
_WIDTHS = (_WIDTH - 2, _WIDTH - 1, _WIDTH)


class AuditError(GatewayError):
    """The audit database cannot be opened or written."""


class AuditUnavailableError(ToolRefusedError):
    """The call's audit row cannot be written: the call is refused before it runs (or, when the disk
    filled while it ran, its result withheld)."""

    reason = "audit"
    hint = "Retry in a few minutes; if it persists, tell the user the gateway cannot write its audit trail."


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audited call. `outcome` is `ok`, `error`, `refused:<reason>`, `timeout`, ...;
    `request_id` links the row to the call's log lines (see `gateway.runtime.requestid`);
    `trace_id` to its trace, taken from the request being handled where the entry is made ("" when
    it is not traced, see `gateway.runtime.tracing`); `parent_request_id` to the call that made this one
    (a script's Run_Code, see code mode), '' for a client's own call."""

    epoch: float
    session: str
    caller: str
    tool: str
    args_digest: str
    outcome: str
    duration_ms: float
    detail: str = ""
    request_id: str = ""
    trace_id: str = field(default_factory=tracing.trace_id)
    parent_request_id: str = field(default_factory=requestid.parent)

    @property
    def time(self) -> str:
        """The call's start as an ISO 8601 UTC timestamp."""
        return datetime.fromtimestamp(self.epoch, UTC).isoformat(timespec="milliseconds")


CallObserver = Callable[[AuditEntry, str], None]
"""Told of every audited call, after its row is written: the entry and the source of its tool."""


class AuditStore:
    """An append-only audit trail in `db`; `redact` keeps the configured secrets out of every row.

    For SQLite, open `db` with manual checkpoints and run `maintain`. `spool_dir` is where rows
    for a database across the network are spooled (see Spooling above); opening the store
    replays the spool files a killed process left there, on either backend.
    """

    def __init__(
        self,
        db: Database,
        redact: Redactor = NO_SECRETS,
        spool_dir: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._redact = redact
        self._clock = clock
        self.problem: str | None = None
        """Why rows cannot be written now (None while they can)."""
        self._warned_at = -math.inf
        self._refused = 0
        self._wake = anyio.Event()
        self._writing = False
        # Unique across processes by the random prefix, within this store by the count.
        prefix = secrets.token_hex(6)
        self._row_ids = (f"{prefix}-{n}" for n in itertools.count())
        self._spool = Spool(spool_dir) if spool_dir is not None else None
        self._spooled = 0
        self._shipped = 0
        self._shipment = anyio.Event()
        try:
            migrate(db, STORE)
            if spool_dir is not None:
                self._replay(spool_dir)
        except DatabaseError as error:
            db.close()
            raise AuditError(f"Cannot open the audit database {db.where}: {error.message}") from None
        except AuditError:
            db.close()
            raise

    @classmethod
    def open(cls, settings: StoreSettings, data_dir: Path, redact: Redactor = NO_SECRETS) -> AuditStore:
        """The audit trail where `settings` put it: `audit.db` under `data_dir`, or PostgreSQL
        with its spool in `settings.spool_dir`."""
        try:
            db = open_database(settings, data_dir, STORE, manual_checkpoints=True)
        except DatabaseError as error:
            raise AuditError(f"Cannot open the audit database {error.message}") from None
        return cls(db, redact, settings.spool_dir(data_dir, STORE))

    @property
    def database(self) -> Database:
        """The database the rows are in; the rollup and the server events are read and written there too."""
        return self._db

    def reserve(self) -> None:
        """Make sure a call's row can be written before the call runs; `AuditUnavailableError`
        (the reason, no path) when it cannot. Rows committed at once (no spool) need no room ahead."""
        failure = self._room()
        if failure is not None:
            self._refused += 1
            raise AuditUnavailableError(
                f"The gateway cannot write its audit trail now ({failure.reason}), so the call was not run"
            )

    def writable(self) -> str | None:
        """None when a row can be written now, else why not (checked now: `/readyz` recovers with no call)."""
        self._room()
        return self.problem

    def _room(self) -> SpoolError | None:
        if self._spool is None or not self._writing:
            return None
        try:
            self._spool.reserve()
        except SpoolError as error:
            self._cannot_write(error)
            return error
        if self.problem is not None:
            log.warning("the audit trail can be written again; %d calls were refused meanwhile", self._refused)
            self.problem, self._refused = None, 0
        return None

    def _cannot_write(self, error: SpoolError) -> None:
        self.problem = f"the audit trail cannot be written: {error.reason}"
        now = self._clock()
        if now - self._warned_at >= WARN_INTERVAL:
            # Once per interval, with the path (for operators), not once per refused call.
            self._warned_at = now
            log.warning("%s; calls are refused until it can (%d so far)", error.message, self._refused)

    async def record(self, entry: AuditEntry) -> None:
        """Append `entry`; once this returns the row is committed, or spooled (see above)."""
        row = self._row(entry)
        if self._spool is None or not self._writing:
            await self._commit([row])
            return
        try:
            self._spool.append(row)
        except SpoolError as error:
            # Room was there when the call began: only a disk filled meanwhile gets here.
            self._cannot_write(error)
            raise AuditUnavailableError(
                f"The gateway could not write this call's audit row ({error.reason}), so its result is withheld"
            ) from None
        self._spooled += 1
        self._wake.set()

    async def maintain(self, report: Report, interval: float = 5.0) -> None:
        """Until cancelled: ship spooled rows (telling `report` whether the database takes them);
        every `interval` s, the database's upkeep (SQLite's WAL checkpoint) in a worker thread, and
        the replay of spool files whose process has died since (another replica's, on a spool
        directory they share)."""
        async with anyio.create_task_group() as group:
            if self._spool is not None:
                group.start_soon(self._ship_spooled, self._spool, report)
            while True:
                await anyio.sleep(interval)
                await anyio.to_thread.run_sync(self._upkeep)
                if self._spool is not None:
                    await self._replay_orphans(self._spool.directory)

    async def _replay_orphans(self, directory: Path) -> None:
        try:
            if self._db.inline_writes:
                self._replay(directory)
            else:
                await anyio.to_thread.run_sync(self._replay, directory)
        except AuditError as error:
            log.warning("spool files left by a process that ended stay for a later replay: %s", error.message)

    async def _ship_spooled(self, spool: Spool, report: Report) -> None:
        """The one writer: ship the spooled rows, then wait `SHIP_INTERVAL`."""
        self._writing = True
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                if await self._ship(spool, report):
                    await anyio.sleep(SHIP_INTERVAL)
                else:
                    await anyio.sleep(RETRY_INTERVAL)
                    self._wake.set()
        except anyio.get_cancelled_exc_class():
            # The service stops. Rows spooled before the end are shipped now; those that cannot be
            # stay for a replay. After any other failure the spool stays open for the writer's next run.
            self._writing = False
            with anyio.CancelScope(shield=True):
                await self._ship(spool, report)
            spool.close()
            raise
        finally:
            self._writing = False

    async def _ship(self, spool: Spool, report: Report) -> bool:
        """Ship every spooled row in one transaction; False (logged) when the database refused them."""
        rows = spool.batch()
        if not rows:
            return True
        try:
            await self._commit(rows)
        except AuditError as error:
            log.warning("%d audit rows stay in the spool until the database takes them: %s", len(rows), error.message)
            report(SHIPPING, f"{len(rows)} audit rows wait in the spool: {error.message}")
            return False
        report(SHIPPING, None)
        spool.shipped(len(rows))
        self._shipped += len(rows)
        self._shipment.set()
        self._shipment = anyio.Event()
        return True

    def _replay(self, directory: Path) -> None:
        """Insert the rows of every spool file in `directory` no live process owns, then remove it."""
        for orphan in orphans(directory, _WIDTHS):
            rows = [[*row, *[""] * (_WIDTH - len(row))] for row in orphan.rows]
            try:
                for start in range(0, len(rows), REPLAY_BATCH):
                    self._insert(rows[start : start + REPLAY_BATCH])
            except AuditError:
                orphan.release()
                raise
            orphan.replayed()
            if orphan.rows:
                log.info("audit: %d rows replayed from %s, left by a process that ended", len(orphan.rows), orphan.path)

    async def _commit(self, rows: Sequence[Sequence[object]]) -> None:
        """Commit `rows` in one transaction: on the event loop when local, else in a worker thread."""
        if self._db.inline_writes:
            self._insert(rows)
        else:
            await anyio.to_thread.run_sync(self._insert, rows)

    def _upkeep(self) -> None:
        try:
            self._db.maintain()
        except DatabaseError as error:
            log.warning("audit checkpoint failed: %s", error.message)

    async def recent(
        self,
        limit: int = 50,
        session: str | None = None,
        tool: str | None = None,
        caller: str | None = None,
        outcome: str | None = None,
    ) -> list[AuditEntry]:
        """The newest entries first, optionally only those of one session, tool, caller or outcome;
        this process's rows spooled before the call included once they ship (`FLUSH_TIMEOUT`)."""
        spooled = self._spooled
        with anyio.move_on_after(FLUSH_TIMEOUT):
            while self._shipped < spooled and self._writing:
                await self._shipment.wait()
        return await anyio.to_thread.run_sync(self._select, limit, session, tool, caller, outcome)

    def close(self) -> None:
        """Close the database and let go of the spool; later calls fail."""
        if self._spool is not None:
            self._spool.close()
        self._db.close()

    def _row(self, entry: AuditEntry) -> tuple[Any, ...]:
        redact = self._redact
        return (
            next(self._row_ids),
            entry.time,
            entry.epoch,
            _storable(redact(entry.session)),
            _storable(redact(entry.caller)),
            _storable(redact(entry.tool)),
            entry.args_digest,
            entry.outcome,
            entry.duration_ms,
            # Redacted before it is cut, so that no part of a secret is left at the cut.
            _storable(_one_line(redact(entry.detail))[:_MAX_DETAIL_CHARS]),
            entry.request_id,
            entry.trace_id,
            entry.parent_request_id,
        )

    def _insert(self, rows: Sequence[Sequence[object]]) -> None:
        try:
            with self._db.transaction() as queries:
                rollupwrites.write(queries, self._db.dialect, rows)
        except DatabaseError as error:
            raise AuditError(f"Cannot write to the audit database {self._db.where}: {error.message}") from None

    def _select(
        self, limit: int, session: str | None, tool: str | None, caller: str | None, outcome: str | None
    ) -> list[AuditEntry]:
        clauses, params = [], []
        for column, value in (("session", session), ("tool", tool), ("caller", caller), ("outcome", outcome)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        query = f"SELECT {_COLUMNS} FROM audit {where} ORDER BY id DESC LIMIT ?"
        try:
            rows = self._db.fetch_all(query, (*params, limit))
        except DatabaseError as error:
            raise AuditError(f"Cannot read the audit database {self._db.where}: {error.message}") from None
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
        """Run the call, then record its outcome before the result or error goes back; refuse it
        before it runs when its row could not be written."""
        self._store.reserve()
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
        detail = _first_text(result) if result.is_error else call.notes.get(DETAIL_NOTE, "")
        outcome = call.notes.get(OUTCOME_NOTE) or ("error" if result.is_error else "ok")
        await self._record(call, started, outcome, detail)
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


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of `arguments`: proves what was sent without storing it."""
    return hashlib.sha256(_CANONICAL.encode(arguments).encode()).hexdigest()


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


def _storable(text: str) -> str:
    """`text` with each lone surrogate (an in-process tool's text may hold one; UTF-8, the spool's
    and the databases' encoding, cannot) replaced by U+FFFD, so that the row is never lost."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _first_text(result: types.CallToolResult) -> str:
    return next((block.text for block in result.content if isinstance(block, types.TextContent)), "")
