"""Audit rows written with their counts in the rollup (`gateway.pipeline.rollup`), in one transaction:
the rows a batch actually inserted, counted in Python, one upsert per time bucket and tool of the batch.

A row's `row_id` is unique and inserted with `ON CONFLICT DO NOTHING`, and only the rows inserted
now are counted (PostgreSQL returns them, `RETURNING`; SQLite says so per row): a row shipped from a
spool and replayed again is counted once. A batch of the spool's rows (tens of rows of a few tools)
comes to a few upserts; a trigger per row wrote seven (docs/decisions/0142-rollup-counted-per-batch.md).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import cast

from gateway.pipeline.rollup import ALL, BOUNDS_MS, DAY, SPANS
from gateway.stores import Queries
from gateway.stores.database import Dialect

COLUMNS = (
    "row_id, time, epoch, session, caller, tool, args_digest, outcome, duration_ms, detail, request_id, trace_id,"
    " parent_request_id"
)
"""The audit columns a written row gives, in its order."""
_WIDTH = COLUMNS.count(",") + 1
_INSERT = f"INSERT INTO audit ({COLUMNS}) VALUES ({', '.join('?' * _WIDTH)}) ON CONFLICT DO NOTHING"
_RETURNED = "epoch, tool, outcome, duration_ms, detail"
_Counted = tuple[float, str, str, float, str]
_CHUNK = 500
"""Rows per PostgreSQL insert statement: 6,500 parameters, well under its limit."""
_NOT_CALLS = ("sampling", "elicitation")
"""Outcomes of an upstream's requests audited under the tool that caused them: no calls, not counted."""
_COUNTS = ("ok", "tool_error", "refused", "timeout", "down", "no_match", "total_ms")
_BUCKET_COLUMNS = tuple(f"b{index}" for index in range(len(BOUNDS_MS) + 1))
_ALL_COLUMNS = ("span", "start", "tool", *_COUNTS, *_BUCKET_COLUMNS)
_ON_CONFLICT = " ON CONFLICT (span, start, tool) DO UPDATE SET " + ", ".join(
    f"{name} = audit_rollup.{name} + excluded.{name}" for name in (*_COUNTS, *_BUCKET_COLUMNS)
)
_UPSERT = (
    f"INSERT INTO audit_rollup ({', '.join(_ALL_COLUMNS)}) VALUES ({', '.join('?' * len(_ALL_COLUMNS))})" + _ON_CONFLICT
)
# PostgreSQL: every counter of a batch in one statement of one parameter, a JSON array of them.
# A statement per counter cost most of a shipment's CPU, and one with a row of parameters per
# counter is too long for the driver to keep parsed.
_UPSERT_ALL = (
    f"INSERT INTO audit_rollup ({', '.join(_ALL_COLUMNS)}) SELECT {', '.join(_ALL_COLUMNS)}"
    " FROM json_populate_recordset(NULL::audit_rollup, ?::json) ORDER BY span, start, tool" + _ON_CONFLICT
)


def write(queries: Queries, dialect: Dialect, rows: Sequence[Sequence[object]]) -> None:
    """Insert `rows` (values of `COLUMNS`) into the audit trail of a `dialect` database and count
    those inserted now in the rollup, on `queries` inside one transaction."""
    upserts = counted(_inserted(queries, dialect, rows))
    if not upserts:
        return
    # In key order: replicas shipping at once lock the counters they share in the same order, so
    # one waits for the other instead of both deadlocking (no lock over the whole table needed).
    if dialect == "sqlite":
        queries.execute_many(_UPSERT, upserts)
    else:
        queries.execute(_UPSERT_ALL, [json.dumps([dict(zip(_ALL_COLUMNS, upsert, strict=True)) for upsert in upserts])])


def _inserted(queries: Queries, dialect: Dialect, rows: Sequence[Sequence[object]]) -> list[_Counted]:
    """(epoch, tool, outcome, duration_ms, detail) of the rows of `rows` inserted now."""
    if dialect == "sqlite":
        # A row a statement, its count of changed rows saying whether it went in: SQLite before 3.35
        # (RHEL 9's 3.34, for one) has no RETURNING, and a statement costs no round trip here.
        return [
            cast(_Counted, (row[2], row[5], row[7], row[8], row[9])) for row in rows if queries.execute(_INSERT, row)
        ]
    inserted: list[_Counted] = []
    for start in range(0, len(rows), _CHUNK):
        chunk = rows[start : start + _CHUNK]
        values = ", ".join([f"({', '.join('?' * _WIDTH)})"] * len(chunk))
        statement = f"INSERT INTO audit ({COLUMNS}) VALUES {values} ON CONFLICT DO NOTHING RETURNING {_RETURNED}"
        inserted.extend(queries.fetch_all(statement, [value for row in chunk for value in row]))
    return inserted


def counted(rows: Iterable[_Counted]) -> list[list[object]]:
    """The rollup's upserts for audit rows given as (epoch, tool, outcome, duration_ms, detail): per
    span and bucket, one for each tool and one for all tools, and per day one for each tool; in key
    order, the order every writer takes the rows' locks in. The classes are those of
    `gateway.pipeline.rollup.CLASSES`; only calls that ran (neither refused nor met a server down)
    have a duration."""
    found: dict[tuple[int, int, str], list[float]] = {}
    for epoch, tool, outcome, duration, detail in rows:
        if outcome in _NOT_CALLS:
            continue
        refused = outcome.startswith("refused:")
        ran = not refused and outcome != "unavailable"
        adds = (
            outcome == "ok",
            outcome not in ("ok", "timeout", "unavailable") and not refused,
            refused,
            outcome == "timeout",
            outcome == "unavailable",
            outcome == "ok" and detail == "no match",
        )
        for span, name in [*((span, tool) for span in SPANS), *((span, ALL) for span in SPANS), (DAY, tool)]:
            key = (span, int(epoch // span) * span, name)
            counts = found.get(key)
            if counts is None:
                counts = found[key] = [0] * (len(_COUNTS) + len(_BUCKET_COLUMNS))
            for index, add in enumerate(adds):
                counts[index] += add
            if ran:
                counts[6] += duration
                counts[7 + bisect_right(BOUNDS_MS, duration)] += 1
    return [[*key, *found[key]] for key in sorted(found)]
