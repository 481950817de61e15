"""The dashboard's figures (pure): the audit rollup's buckets, the server events and the approvals of
a window turned into the numbers each chart draws and each table behind it lists."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median

from gateway.pipeline.approvals import Approval, Status
from gateway.pipeline.rollup import CLASSES, Totals, merged, quantile
from gateway.stores.serverevents import NOT_STATES, ServerEvent


@dataclass(frozen=True, slots=True)
class Window:
    """A span of time the dashboard shows: its key in the URL, its length and the width of one point."""

    key: str
    label: str
    seconds: int
    step: int

    @property
    def points(self) -> int:
        """How many points a chart of this window has."""
        return self.seconds // self.step

    def axis(self, now: float) -> list[int]:
        """The start of each point, oldest first; the last holds `now`."""
        last = math.floor(now / self.step) * self.step
        return [last - (self.points - 1 - index) * self.step for index in range(self.points)]


WINDOWS = {
    window.key: window
    for window in (
        Window("1h", "the last hour", 3600, 60),
        Window("24h", "the last 24 hours", 86400, 600),
        Window("7d", "the last 7 days", 7 * 86400, 3600),
    )
}
SPARK = Window("24h", "the last 24 hours", 86400, 3600)
"""The window of a sparkline: 24 hourly points."""


@dataclass(frozen=True, slots=True)
class Point:
    """The calls of one point of a chart, by class, and their latency (ms; None without calls that ran)."""

    start: int
    counts: Mapping[str, int]
    p50: float | None
    p95: float | None

    @property
    def calls(self) -> int:
        """Every call of the point."""
        return sum(self.counts.values())


@dataclass(frozen=True, slots=True)
class Spark:
    """Calls and errors (calls not ok) per point of a sparkline."""

    calls: tuple[int, ...]
    errors: tuple[int, ...]

    @property
    def total(self) -> int:
        """Every call."""
        return sum(self.calls)

    @property
    def failed(self) -> int:
        """Every call not ok."""
        return sum(self.errors)


@dataclass(frozen=True, slots=True)
class Ranked:
    """A tool or a server with its calls, errors and latency over the window."""

    name: str
    calls: int
    errors: int
    p50: float | None
    p95: float | None


def points(totals: Iterable[Totals], axis: Sequence[int]) -> list[Point]:
    """The calls of each point of `axis` (from the rollup's sums per bucket), by class, with their p50 and p95."""
    found = {int(item.key): item for item in totals}
    result = []
    for start in axis:
        item = found.get(start)
        if item is None:
            result.append(Point(start, dict.fromkeys(CLASSES, 0), None, None))
            continue
        result.append(Point(start, item.counts, quantile(item.histogram, 0.5), quantile(item.histogram, 0.95)))
    return result


def ranked(totals: Iterable[Totals], key: Callable[[str], str]) -> list[Ranked]:
    """The rollup's sums per tool, summed again per name `key` gives each tool; most calls first."""
    calls: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    histograms: dict[str, list[Sequence[int]]] = defaultdict(list)
    for item in totals:
        name = key(str(item.key))
        calls[name] += item.calls
        errors[name] += item.not_ok
        histograms[name].append(item.histogram)
    result = []
    for name, count in calls.items():
        histogram = merged(histograms[name])
        result.append(Ranked(name, count, errors[name], quantile(histogram, 0.5), quantile(histogram, 0.95)))
    return sorted(result, key=lambda item: (-item.calls, item.name))


def by_errors(items: Iterable[Ranked]) -> list[Ranked]:
    """The items with errors, most errors first."""
    return sorted((item for item in items if item.errors), key=lambda item: (-item.errors, item.name))


def sparklines(
    series: Iterable[tuple[str, int, int, int]], axis: Sequence[int], key: Callable[[str], str | None]
) -> dict[str, Spark]:
    """From the rollup's (tool, bucket, calls, not ok), the sparkline over `axis` of each name `key`
    gives a tool (None: left out)."""
    index = {start: position for position, start in enumerate(axis)}
    calls: dict[str, list[int]] = {}
    errors: dict[str, list[int]] = {}
    for tool, start, count, failed in series:
        name = key(tool)
        if name is None or start not in index:
            continue
        calls.setdefault(name, [0] * len(axis))[index[start]] += count
        errors.setdefault(name, [0] * len(axis))[index[start]] += failed
    return {name: Spark(tuple(calls[name]), tuple(errors[name])) for name in calls}


HEALTH = {
    "ready": "ready",
    "connecting": "connecting",
    "reconnecting": "restarting",
    "failed": "failed",
    "unhealthy": "failed",
    "stopped": "stopped",
    "disabled": "stopped",
}
"""The timeline's state of each connection state."""


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of a server's timeline in one state."""

    start: float
    end: float
    state: str


@dataclass(frozen=True, slots=True)
class Mark:
    """A restart or a change of a server's configuration, at `epoch`."""

    epoch: float
    event: str


@dataclass(frozen=True, slots=True)
class Health:
    """One server's timeline over a window: its states' segments, its marks, and how long it was not
    ready; as the replica `replica` saw it when the server has a lane per replica (None: one lane)."""

    server: str
    segments: tuple[Segment, ...]
    marks: tuple[Mark, ...]
    replica: str | None = None

    @property
    def name(self) -> str:
        """The lane's name: the server, and the replica when it has a lane per replica."""
        if self.replica is None:
            return self.server
        return f"{self.server} on {self.replica or 'an unnamed replica'}"

    def seconds_in(self, state: str) -> float:
        """How long the server was in `state` in the window."""
        return sum(segment.end - segment.start for segment in self.segments if segment.state == state)


def health(events: Iterable[ServerEvent], servers: Iterable[str], start: float, end: float) -> list[Health]:
    """The timeline of each of `servers` from `start` to `end`, from its events (each replica's state
    before `start` first); a server with no event yet is unknown until its first.

    Replicas sharing a database each tell their own view of a server. When more than one told of it
    in the window at once, each view is a lane of its own; views one after the other (a replica
    stopped before the next began: the gateway restarted) make one lane, as does a single view."""
    wanted = list(servers)
    views: dict[str, dict[str, list[ServerEvent]]] = {name: {} for name in wanted}
    for event in events:
        if event.server in views:
            views[event.server].setdefault(event.replica, []).append(event)
    result = []
    for name in wanted:
        told = views[name]
        during = {replica: found for replica, found in told.items() if any(e.epoch >= start for e in found)}
        if len(during) > 1 and not _one_after_another(during.values(), start, end):
            result += [_lane(name, found, start, end, replica) for replica, found in sorted(during.items())]
            continue
        if during:
            chosen = sorted((e for found in during.values() for e in found), key=lambda event: event.epoch)
        else:
            # No replica told of it in the window: the newest state any of them saw before.
            chosen = [max((found[-1] for found in told.values()), key=lambda event: event.epoch)] if told else []
        result.append(_lane(name, chosen, start, end, None))
    return result


def _one_after_another(views: Iterable[list[ServerEvent]], start: float, end: float) -> bool:
    """Whether each view ended (its last state `stopped`) before the next began."""
    spans = []
    for found in views:
        states = [event for event in found if event.event not in NOT_STATES]
        last = states[-1].epoch if states and states[-1].event == "stopped" else end
        spans.append((max(found[0].epoch, start), last))
    spans.sort()
    return all(later[0] >= earlier[1] for earlier, later in pairwise(spans))


def _lane(server: str, events: Iterable[ServerEvent], start: float, end: float, replica: str | None) -> Health:
    changes: list[tuple[float, str]] = []
    marks: list[Mark] = []
    for event in events:
        if event.event in NOT_STATES:
            if event.epoch >= start:
                marks.append(Mark(event.epoch, event.event))
        elif event.event in HEALTH:
            changes.append((max(event.epoch, start), HEALTH[event.event]))
    segments: list[Segment] = []
    for position, (begin, state) in enumerate(changes):
        finish = changes[position + 1][0] if position + 1 < len(changes) else end
        if finish > begin and (not segments or segments[-1].state != state):
            segments.append(Segment(begin, finish, state))
        elif finish > begin:
            segments[-1] = Segment(segments[-1].start, finish, state)
    return Health(server, tuple(segments), tuple(marks), replica)


@dataclass(frozen=True, slots=True)
class Approvals:
    """The approvals of a window: how many wait now and how long the oldest has, how many were
    decided (by outcome) and how long they waited (median and longest, s)."""

    waiting: int
    oldest_wait: float | None
    decided: Mapping[str, int]
    median_wait: float | None
    longest_wait: float | None


def approvals(found: Sequence[Approval], now: float) -> Approvals:
    """The figures of the approvals `found` (those asked for in the window, and those pending)."""
    waiting = [now - item.created for item in found if item.status == Status.PENDING and item.expires > now]
    decided = [item for item in found if item.decided is not None]
    waits = [item.decided - item.created for item in decided if item.decided is not None]
    outcomes: dict[str, int] = {}
    for item in decided:
        # A used approval was approved first.
        outcome = Status.APPROVED.value if item.status == Status.USED else item.status.value
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return Approvals(
        len(waiting),
        max(waiting) if waiting else None,
        outcomes,
        median(waits) if waits else None,
        max(waits) if waits else None,
    )
