"""Calls over time from the audit trail's rollup: the `audit_rollup` table counted as audit rows are
written (`gateway.pipeline.rollupwrites`; migrations `audit-0006-rollup.sql`, `audit-0007-rollup-totals.sql`),
per outcome class, per tool and for all tools together per minute, 10 minutes and hour, and per tool per day,
with a histogram of durations. Reading a week of it is hundreds of rows a tool at most however many
calls there were; the audit rows themselves are neither changed nor dropped.

The reads sum in the database; the quantiles of what they return are measured by the pure functions below."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from gateway.stores import Database, DatabaseError

BOUNDS_MS = (
    1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750,
    1000, 1500, 2000, 3000, 5000, 7500, 10000, 15000, 20000, 30000, 60000,
)  # fmt: skip
"""The upper bounds of the duration buckets, in ms; a last bucket holds 60 s and more."""
SPANS = (60, 600, 3600)
"""The lengths of the rollup's time buckets, in seconds (each kept per tool and for all tools)."""
DAY = 86400
"""The length of the rollup's buckets kept per tool only, read for the whole days of a window's totals."""
ALL = "*"
"""The rollup's tool name for all tools together (migration `audit-0007-rollup-totals.sql`)."""
FEW = 16
"""At most this many tools are read along the rollup's index by tool, `(span, tool, start)`, rather
than along its key, `(span, start, tool)`, which reads every tool's row of each bucket."""
_BY_TOOL = "audit_rollup INDEXED BY audit_rollup_by_tool"
_BUCKETS = ", ".join(f"SUM(b{index})" for index in range(len(BOUNDS_MS) + 1))
_COUNTS = "SUM(ok), SUM(tool_error), SUM(refused), SUM(timeout), SUM(down), SUM(no_match)"
_NOT_OK = "SUM(tool_error + refused + timeout + down)"
_HISTOGRAM = ", ".join(f"b{index}" for index in range(len(BOUNDS_MS) + 1))
_COLUMNS = f"ok, tool_error, refused, timeout, down, no_match, {_HISTOGRAM}"

OK, TOOL_ERROR, REFUSED, TIMEOUT, DOWN = "ok", "tool error", "refused", "timeout", "upstream down"
CLASSES = (OK, TOOL_ERROR, REFUSED, TIMEOUT, DOWN)
"""What a call's outcome comes to on the dashboard, in the order its charts stack them; the
rollup counts each in a column of its own (`ok`, `tool_error`, `refused`, `timeout`, `down`)."""


class RollupError(GatewayError):
    """The audit rollup cannot be read."""


@dataclass(frozen=True, slots=True)
class Totals:
    """Calls summed over some of the rollup (a time bucket, or a tool over a window): by class, with
    the histogram of the durations of those that ran (neither refused nor met a server down)."""

    key: str | int
    counts: Mapping[str, int]
    histogram: tuple[int, ...]
    no_match: int = 0
    """Of the ok calls, those that found nothing (Find_Tools)."""

    @property
    def calls(self) -> int:
        """Every call."""
        return sum(self.counts.values())

    @property
    def not_ok(self) -> int:
        """Every call whose outcome was not ok."""
        return self.calls - self.counts[OK]


class Rollup:
    """Reads of the rollup in the audit trail's database `db`: summed in the database, so that a
    read returns a row per time bucket or per tool however many calls there were."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def per_bucket(self, span: int, first: int, last: int, tools: Collection[str] | None = None) -> list[Totals]:
        """The calls of each `span`-second bucket from `first` to `last` (both included), of `tools` when given
        (of every tool: one all-tools row a bucket)."""
        return self._totals("start", [(span, first, last)], {ALL} if tools is None else tools)

    def per_tool(self, span: int, first: int, last: int, tools: Collection[str] | None = None) -> list[Totals]:
        """The calls of each tool over the buckets from `first` to `last`, of `tools` when given: read from
        the coarsest buckets that tile them (days, hours, ... `span`)."""
        totals = self._totals("tool", tiles(span, first, last + span), tools)
        # Unfiltered, the all-tools rows come as a tool of their own, left out here rather than in the
        # query: `tool <> ?` would lead SQLite along the index by tool through every bucket of `span`.
        return [item for item in totals if item.key != ALL]

    def series(
        self, span: int, first: int, last: int, tools: Collection[str] | None = None
    ) -> list[tuple[str, int, int, int]]:
        """(tool, bucket start, calls, calls not ok) of each tool's buckets from `first` to `last`."""
        where, params = self._where(span, first, last, tools)
        table = self._table(tools)
        query = f"SELECT tool, start, SUM(ok) + {_NOT_OK}, {_NOT_OK} FROM {table} {where} GROUP BY tool, start"
        rows = self._fetch(query, params)
        return [(row[0], int(row[1]), int(row[2]), int(row[3])) for row in rows if row[0] != ALL]

    def _totals(self, key: str, ranges: Sequence[tuple[int, int, int]], tools: Collection[str] | None) -> list[Totals]:
        # One query (one round trip) for every range, each a branch of its own read along an index:
        # one with the ranges OR-ed may scan the table.
        branches, params = [], []
        for span, first, last in ranges:
            where, more = self._where(span, first, last, tools)
            branches.append(f"SELECT {key}, {_COLUMNS} FROM {self._table(tools)} {where}")
            params.extend(more)
        if not branches:
            return []
        query = f"SELECT {key}, {_COUNTS}, {_BUCKETS} FROM ({' UNION ALL '.join(branches)}) AS tiled GROUP BY {key}"
        return [
            Totals(row[0], dict(zip(CLASSES, map(int, row[1:6]), strict=True)), tuple(map(int, row[7:])), int(row[6]))
            for row in self._fetch(query, params)
        ]

    def _table(self, tools: Collection[str] | None) -> str:
        # SQLite plans without statistics (nothing here runs ANALYZE), taking `span = ?` for a narrow
        # key: it reads a few tools' buckets along the key, every tool's row of each bucket read and
        # most dropped. PostgreSQL's statistics choose the index by tool for a few tools themselves.
        if self._db.dialect == "sqlite" and tools and len(tools) <= FEW:
            return _BY_TOOL
        return "audit_rollup"

    @staticmethod
    def _where(span: int, first: int, last: int, tools: Collection[str] | None) -> tuple[str, list[object]]:
        if span not in (*SPANS, DAY):
            raise ValueError(f"no rollup of {span} s buckets")
        params: list[object] = [span, first, last]
        where = "WHERE span = ? AND start >= ? AND start <= ?"
        if tools:
            chosen = sorted(tools)
            where += f" AND tool IN ({', '.join('?' * len(chosen))})"
            params.extend(chosen)
        elif tools is not None:
            where += " AND 1 = 0"
        return where, params

    def _fetch(self, query: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        try:
            return self._db.fetch_all(query, params)
        except DatabaseError as error:
            raise RollupError(f"Cannot read the audit rollup {self._db.where}: {error.message}") from None


def tiles(span: int, start: int, end: int) -> list[tuple[int, int, int]]:
    """(span, first bucket, last bucket) of the fewest rollup buckets, no shorter than `span`, that
    cover the seconds from `start` to `end` (multiples of `span`): whole days, then hours, ... at either end."""
    coarser = [length for length in (*SPANS, DAY) if length > span and length % span == 0]
    for length in reversed(coarser):
        inner_start, inner_end = -(-start // length) * length, end // length * length
        if inner_start < inner_end:
            return [
                *tiles(span, start, inner_start),
                (length, inner_start, inner_end - length),
                *tiles(span, inner_end, end),
            ]
    return [(span, start, end - span)] if start < end else []


def merged(histograms: Iterable[Sequence[int]]) -> list[int]:
    """The histograms added bucket by bucket."""
    total = [0] * (len(BOUNDS_MS) + 1)
    for histogram in histograms:
        for index, count in enumerate(histogram):
            total[index] += count
    return total


def quantile(histogram: Sequence[int], q: float) -> float | None:
    """The `q` quantile (0..1) of the durations counted in `histogram`, in ms, interpolated within
    its bucket (None when it counts nothing); in the last bucket, its lower bound."""
    total = sum(histogram)
    if not total:
        return None
    rank = q * total
    below = 0
    for index, count in enumerate(histogram):
        if count and below + count >= rank:
            if index == len(BOUNDS_MS):
                return float(BOUNDS_MS[-1])
            lower = BOUNDS_MS[index - 1] if index else 0.0
            return lower + (BOUNDS_MS[index] - lower) * max(rank - below, 0) / count
        below += count
    return float(BOUNDS_MS[-1])


def combined(*parts: Iterable[Totals]) -> list[Totals]:
    """The totals of `parts` added up key by key."""
    found: dict[str | int, tuple[dict[str, int], list[int]]] = {}
    empty: dict[str | int, int] = {}
    for part in parts:
        for item in part:
            empty[item.key] = empty.get(item.key, 0) + item.no_match
            counts, histogram = found.setdefault(item.key, (dict.fromkeys(CLASSES, 0), [0] * (len(BOUNDS_MS) + 1)))
            for name, count in item.counts.items():
                counts[name] += count
            for index, count in enumerate(item.histogram):
                histogram[index] += count
    return [Totals(key, counts, tuple(histogram), empty[key]) for key, (counts, histogram) in found.items()]


class ClosedBuckets:
    """The rollup's sums over buckets that have closed, kept (the newest `size` reads): a window read
    again every few seconds reads only its open bucket anew. A row written late into a closed bucket
    (a replica's spool shipped after an outage) shows once the window moves on to its next bucket."""

    def __init__(self, size: int = 32) -> None:
        self._size = size
        # Reads run in worker threads, several at once.
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[object, ...], list[Any]] = OrderedDict()

    def per_bucket(
        self, rollup: Rollup, span: int, first: int, last: int, tools: Collection[str] | None
    ) -> list[Totals]:
        """`rollup.per_bucket` with the buckets before `last` (the open one) read once."""
        return combined(
            self._closed("start", rollup.per_bucket, span, first, last, tools),
            rollup.per_bucket(span, last, last, tools),
        )

    def per_tool(self, rollup: Rollup, span: int, first: int, last: int, tools: Collection[str] | None) -> list[Totals]:
        """`rollup.per_tool` with the buckets before `last` (the open one) read once."""
        return combined(
            self._closed("tool", rollup.per_tool, span, first, last, tools), rollup.per_tool(span, last, last, tools)
        )

    def series(
        self, rollup: Rollup, span: int, first: int, last: int, tools: Collection[str] | None
    ) -> list[tuple[str, int, int, int]]:
        """`rollup.series` with the buckets before `last` (the open one) read once."""
        return [
            *self._closed("series", rollup.series, span, first, last, tools),
            *rollup.series(span, last, last, tools),
        ]

    def _closed(
        self,
        kind: str,
        read: Callable[[int, int, int, Collection[str] | None], list[Any]],
        span: int,
        first: int,
        last: int,
        tools: Collection[str] | None,
    ) -> list[Any]:
        if last <= first:
            return []
        key = (kind, span, first, last, None if tools is None else frozenset(tools))
        with self._lock:
            kept = self._kept.get(key)
        if kept is None:
            kept = read(span, first, last - span, tools)
        with self._lock:
            self._kept[key] = kept
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return kept
