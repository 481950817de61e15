"""Calls over time from the audit trail's rollup: the `audit_rollup` table a trigger keeps as audit
rows are written (migration `audit-0005-rollup.sql`), per tool and outcome, per minute, 10 minutes
and hour, with a histogram of durations. Reading a week of it is thousands of rows however many
calls there were; the audit rows themselves are neither changed nor dropped.

The reads are plain queries; what they return is summed and measured by the pure functions below."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from gateway.errors import GatewayError
from gateway.stores import Database, DatabaseError

BOUNDS_MS = (
    1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750,
    1000, 1500, 2000, 3000, 5000, 7500, 10000, 15000, 20000, 30000, 60000,
)  # fmt: skip
"""The upper bounds of the duration buckets, in ms; a last bucket holds 60 s and more."""
SPANS = (60, 600, 3600)
"""The lengths of the rollup's time buckets, in seconds."""
_BUCKETS = ", ".join(f"b{index}" for index in range(len(BOUNDS_MS) + 1))

OK, TOOL_ERROR, REFUSED, TIMEOUT, DOWN = "ok", "tool error", "refused", "timeout", "upstream down"
CLASSES = (OK, TOOL_ERROR, REFUSED, TIMEOUT, DOWN)
"""What a call's outcome comes to on the dashboard, in the order its charts stack them."""
RAN = frozenset({OK, TOOL_ERROR, TIMEOUT})
"""The classes of calls that reached their tool: their durations are its latency."""


class RollupError(GatewayError):
    """The audit rollup cannot be read."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """The calls of one tool with one outcome that started in one time bucket."""

    start: int
    tool: str
    outcome: str
    calls: int
    total_ms: float
    histogram: tuple[int, ...]


class Rollup:
    """Reads of the rollup in the audit trail's database `db`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def buckets(self, span: int, first: int, last: int, tools: Collection[str] | None = None) -> list[Bucket]:
        """The `span`-second buckets starting from `first` to `last` (both included), of `tools` only when given."""
        if span not in SPANS:
            raise ValueError(f"no rollup of {span} s buckets")
        clause = ""
        params: list[object] = [span, first, last]
        if tools is not None:
            if not tools:
                return []
            clause = f" AND tool IN ({', '.join('?' * len(tools))})"
            params.extend(sorted(tools))
        query = (
            f"SELECT start, tool, outcome, calls, total_ms, {_BUCKETS} FROM audit_rollup"
            f" WHERE span = ? AND start >= ? AND start <= ?{clause}"
        )
        try:
            rows = self._db.fetch_all(query, params)
        except DatabaseError as error:
            raise RollupError(f"Cannot read the audit rollup {self._db.where}: {error.message}") from None
        return [
            Bucket(int(row[0]), row[1], row[2], int(row[3]), float(row[4]), tuple(map(int, row[5:]))) for row in rows
        ]


def outcome_class(outcome: str) -> str | None:
    """The dashboard's class of an audit outcome; None for rows that are no call (an upstream's
    sampling or elicitation request, audited under the tool that caused it)."""
    if outcome in ("sampling", "elicitation"):
        return None
    if outcome == "ok":
        return OK
    if outcome.startswith("refused:"):
        return REFUSED
    if outcome == "timeout":
        return TIMEOUT
    if outcome == "unavailable":
        return DOWN
    return TOOL_ERROR


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
