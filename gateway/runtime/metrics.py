"""The gateway's metrics in the Prometheus text format, on a registry of its own.

Events are counted where they happen, one place each: every tool call's outcome and duration by
the audit step (the same duration as its audit row), sandbox runs by `Sandboxes`, skill loads and
evictions by `SkillHost`, changed tool definitions and their decisions by `LivePins`. What the
gateway already holds (upstream states and restarts, live sessions, pending approvals, flagged
tools) is read at scrape time by a collector, so nothing has to keep it in step. Each `Metrics` has
its own `CollectorRegistry`: several gateways in one process (tests) do not share counts. The names
and labels are listed in docs/operations.md.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, get_args

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.clients.session import SessionContext, Transport

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Seconds: tool calls range from a local function (well under a millisecond) to the call timeout.
CALL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# Seconds: a sandbox run starts a container (or takes a warm one) before the tool runs.
SANDBOX_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
REFUSED = "refused:"


class ServerReading(Protocol):
    """What the metrics read of one upstream's status."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def restarts(self) -> int: ...


@dataclass(frozen=True)
class Readings:
    """Where the scrape-time metrics come from: the gateway's own state, read when scraped."""

    servers: Callable[[], Iterable[ServerReading]]
    states: Sequence[str]
    sessions: Callable[[], Iterable[SessionContext]]
    pending_approvals: Callable[[], int | None]
    """How many approvals wait, or None while their store cannot be read; it may block (a database),
    so a scrape reads it off the event loop."""
    flagged_tools: Callable[[], Mapping[str, int]]


class Metrics:
    """The counters the gateway feeds, and the exposition of them with its live state.

    `clock` (monotonic seconds) times sandbox runs.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.registry = CollectorRegistry()
        self._state: _StateCollector | None = None
        self._calls = Counter(
            "gateway_tool_calls",
            "Tool calls by tool, server and outcome (ok, error, refused, timeout, invalid_arguments, ...).",
            ("tool", "server", "outcome"),
            registry=self.registry,
        )
        self._call_seconds = Histogram(
            "gateway_tool_call_duration_seconds",
            "How long tool calls took, refused and failed ones included, by tool and server.",
            ("tool", "server"),
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self._call_series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        self._refusals = Counter(
            "gateway_refusals",
            "Calls and sessions the gateway refused, by reason.",
            ("reason",),
            registry=self.registry,
        )
        self._sandbox_runs = Counter(
            "gateway_sandbox_runs",
            "Tool calls run in a fresh sandbox container, by outcome (ok, error, failed).",
            ("outcome",),
            registry=self.registry,
        )
        self._sandbox_seconds = Histogram(
            "gateway_sandbox_run_duration_seconds",
            "How long sandbox runs took, container start included.",
            buckets=SANDBOX_BUCKETS,
            registry=self.registry,
        )
        self._skill_loads = Counter(
            "gateway_skill_loads", "Skills loaded into a session, by skill.", ("skill",), registry=self.registry
        )
        self._skill_evictions = Counter(
            "gateway_skill_evictions",
            "Skills pushed out of a session to make room for another, by skill.",
            ("skill",),
            registry=self.registry,
        )

        self._tool_changes = Counter(
            "gateway_tool_changes",
            "Changed tool definitions by server and decision (held, warned, allowed, accepted, rejected).",
            ("server", "decision"),
            registry=self.registry,
        )

    def watch(self, readings: Readings) -> None:
        """Expose the gateway's live state, read at every scrape."""
        self._state = _StateCollector(readings)
        self.registry.register(self._state)

    def call(self, tool: str, server: str, outcome: str, seconds: float) -> None:
        """One tool call ended with the audit `outcome`; `refused:<reason>` counts as a refusal too."""
        if outcome.startswith(REFUSED):
            self.refusal(outcome.removeprefix(REFUSED))
            outcome = "refused"
        series = self._call_series.get((tool, server, outcome))
        if series is None:
            # The client library checks and looks up label values on every `labels`; a call need not.
            series = self._calls.labels(tool, server, outcome), self._call_seconds.labels(tool, server)
            self._call_series[tool, server, outcome] = series
        series[0].inc()
        series[1].observe(seconds)

    def refusal(self, reason: str) -> None:
        """The gateway refused something (a call, a session) for `reason`."""
        self._refusals.labels(reason).inc()

    def sandbox_run(self, outcome: str, started: float) -> None:
        """A sandbox run that began at `started` (on `clock`) ended with `outcome`."""
        self._sandbox_runs.labels(outcome).inc()
        self._sandbox_seconds.observe(max(0.0, self.clock() - started))

    def skill_loaded(self, skill: str, evicted: Iterable[str]) -> None:
        """A session loaded `skill`, pushing out `evicted`."""
        self._skill_loads.labels(skill).inc()
        for name in evicted:
            self._skill_evictions.labels(name).inc()

    def tool_change(self, server: str, decision: str) -> None:
        """A server changed a tool's definition, or a person decided such a change (`pinning.Decision`)."""
        self._tool_changes.labels(server, decision).inc()

    async def exposition(self) -> bytes:
        """Everything, in the Prometheus text format (`CONTENT_TYPE`); what comes from a database is
        read in a worker thread, so a database that does not answer holds up no other request."""
        if self._state is not None:
            self._state.pending = await anyio.to_thread.run_sync(self._state.readings.pending_approvals)
        return generate_latest(self.registry)


class _StateCollector:
    """Reads upstream states and restarts, sessions, pending approvals and flagged tools at scrape time."""

    def __init__(self, readings: Readings) -> None:
        self.readings = readings
        self.pending: int | None = None
        """The approvals pending, as last read (`Metrics.exposition`)."""

    def describe(self) -> list[Metric]:
        # Nothing to announce at registration: reading the gateway before it started would fail.
        return []

    def collect(self) -> Iterator[Metric]:
        readings = self.readings
        state = GaugeMetricFamily(
            "gateway_upstream_state",
            "1 for the state each upstream server is in, 0 for the others.",
            labels=("server", "state"),
        )
        restarts = CounterMetricFamily(
            "gateway_upstream_restarts", "Times each upstream server was reconnected or restarted.", labels=("server",)
        )
        for server in readings.servers():
            for name in readings.states:
                state.add_metric((server.name, name), 1.0 if server.state == name else 0.0)
            restarts.add_metric((server.name,), float(server.restarts))
        yield state
        yield restarts
        sessions = GaugeMetricFamily("gateway_sessions", "Live client sessions, by transport.", labels=("transport",))
        counts = Tally(session.transport for session in readings.sessions())
        for transport in get_args(Transport):
            sessions.add_metric((transport,), float(counts[transport]))
        yield sessions
        # Left out while the store is unreachable: a scrape still answers with everything else.
        if self.pending is not None:
            yield GaugeMetricFamily(
                "gateway_approvals_pending",
                "High-risk calls waiting for a person to approve or decline them.",
                value=float(self.pending),
            )
        flagged = GaugeMetricFamily(
            "gateway_flagged_tools",
            "Tools whose model-visible text looks aimed at the model (tool poisoning), by server.",
            labels=("server",),
        )
        for source, count in sorted(readings.flagged_tools().items()):
            flagged.add_metric((source,), float(count))
        yield flagged
