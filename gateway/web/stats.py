"""A tool's recent calls from the audit trail (pure): how many, how many failed, the median duration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from gateway.pipeline.audit import AuditEntry

WINDOW_SECONDS = 24 * 3600.0
SAMPLE = 1000
"""The newest audit rows of a tool that are read; the figures cover at most these."""


@dataclass(frozen=True, slots=True)
class CallStats:
    """Calls of one tool in the window: their number, the share not `ok`, and the p50 in milliseconds."""

    calls: int
    error_rate: float
    p50_ms: float | None


def call_stats(entries: Sequence[AuditEntry], now: float, window: float = WINDOW_SECONDS) -> CallStats:
    """The figures of the `entries` (one tool's audit rows) that started within `window` of `now`."""
    recent = [entry for entry in entries if now - entry.epoch <= window]
    if not recent:
        return CallStats(0, 0.0, None)
    failed = sum(1 for entry in recent if entry.outcome != "ok")
    return CallStats(len(recent), failed / len(recent), median(entry.duration_ms for entry in recent))
