"""Traces: a span for each client request, the pipeline steps worth seeing and each call to an
upstream, exported over OTLP/HTTP when the configuration has a `tracing` section.

This module is the seam and costs next to nothing when tracing is off: it imports no part of
OpenTelemetry, and each hook (`span`, `carrier`, `inject_headers`, `trace_id`, `annotate`,
`failed`) reads one context variable, finds it empty and returns. The front door sets that
variable for the request it handles, only when the gateway exports traces; then the hooks reach
`gateway.runtime.otel`, the OpenTelemetry SDK behind this seam, loaded by `Tracing.exporting`.
Everything a request runs (pipeline steps, the upstream call, tasks it starts) sees the same
variable, as it sees the request id (`gateway.runtime.requestid`).

Trace context travels in the W3C `traceparent` and `tracestate` keys: read from a request's
`params._meta` (the MCP convention, SEP-414), else from its HTTP headers, and written into
`params._meta` of the requests the gateway sends upstream and into the headers of its HTTP
requests to them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from gateway.errors import ConfigError
from gateway.problems import validate_section

TRACES_PATH = "/v1/traces"
# What the `tracing` extra installs: the SDK and its OTLP/HTTP exporter.
_PACKAGES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
REQUEST_ID = "gateway.request_id"
"""The span attribute that names the request id of a tool call (its log lines' and audit row's)."""

TRACING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["endpoint"],
    "properties": {
        "endpoint": {
            "type": "string",
            "pattern": "^https?://[^/?#]+",
            "description": "an OTLP/HTTP URL, http(s)://host:port (traces go to its /v1/traces) or the full traces URL",
        },
        "service_name": {"type": "string", "minLength": 1},
        "sample_ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
"""The JSON Schema of the `tracing` section."""

Attributes = Mapping[str, str | int | float | bool]


@dataclass(frozen=True, slots=True)
class TracingSettings:
    """The `tracing` section: where spans go (`endpoint`, an OTLP/HTTP collector, with `headers`
    on each export), the `service.name` they carry, and the share of traces begun here that are
    recorded (`sample_ratio`; a client's own sampling decision is followed)."""

    endpoint: str
    service_name: str = "mcp-gateway"
    sample_ratio: float = 1.0
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, section: Any, *, source_file: str) -> TracingSettings | None:
        """The settings of a `tracing` section; None (tracing off) without one. Raises `ConfigProblems`."""
        if section is None:
            return None
        # The headers often carry a collector's token, so no message echoes a value.
        validate_section(section, TRACING_SCHEMA, section="tracing", source_file=source_file, hide_values=True)
        return cls(
            endpoint=section["endpoint"],
            service_name=section.get("service_name", "mcp-gateway"),
            sample_ratio=float(section.get("sample_ratio", 1.0)),
            headers=dict(section.get("headers", {})),
        )

    @property
    def traces_url(self) -> str:
        """Where the spans are posted: the endpoint's `/v1/traces`, unless it names that path itself."""
        base = self.endpoint.rstrip("/")
        return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


class Spans(Protocol):
    """What the hooks ask of the exporting side (`gateway.runtime.otel.Exporter`)."""

    def request(
        self, name: str, attributes: Attributes, carriers: Sequence[Mapping[str, Any] | None]
    ) -> AbstractContextManager[None]: ...

    def span(self, name: str, attributes: Attributes | None, client: bool) -> AbstractContextManager[None]: ...

    def carrier(self) -> dict[str, str]: ...

    def trace_id(self) -> str: ...

    def annotate(self, key: str, value: str | int | float | bool) -> None: ...

    def failed(self, error_type: str) -> None: ...

    def detach(self) -> None: ...

    def close(self) -> None: ...


_active: ContextVar[Spans | None] = ContextVar("gateway_tracing", default=None)
_OFF: AbstractContextManager[None] = nullcontext()


class Tracing:
    """The gateway's tracing: off without settings; with them, spans are exported while
    `exporting()` is entered (the gateway's lifespan), and each request the front door wraps in
    `request` is traced."""

    def __init__(self, settings: TracingSettings | None, source: str = "the configuration") -> None:
        """Tracing as `settings` ask; `ConfigError` (naming the file `source`) when they ask for
        it and the OpenTelemetry SDK is not installed."""
        self.settings = settings
        self._spans: Spans | None = None
        if settings is not None and any(importlib.util.find_spec(name) is None for name in _PACKAGES):
            raise ConfigError(
                source,
                "tracing",
                "exports traces, but the OpenTelemetry SDK is not installed: pip install 'mcp-gateway[tracing]'",
            )

    @property
    def enabled(self) -> bool:
        """Whether the configuration asks for traces."""
        return self.settings is not None

    @contextmanager
    def exporting(self) -> Iterator[None]:
        """Export spans until exited; on the way out the spans not yet sent are sent (a bounded wait)."""
        if self.settings is None:
            yield
            return
        # The SDK and its exporter load only for a gateway that traces.
        from gateway.runtime.otel import Exporter

        spans = Exporter(self.settings)
        self._spans = spans
        try:
            yield
        finally:
            self._spans = None
            spans.close()

    def request(
        self, name: str, attributes: Attributes, carriers: Sequence[Mapping[str, Any] | None]
    ) -> AbstractContextManager[None]:
        """Handle one client request inside a span `name`, continuing the trace of the first of
        `carriers` (its `_meta`, its HTTP headers) that holds a valid `traceparent`."""
        spans = self._spans
        return _OFF if spans is None else _Request(spans, spans.request(name, attributes, carriers))


class _Request:
    """A traced request being handled: its span current, and the hooks reaching `spans`."""

    __slots__ = ("_span", "_spans", "_token")

    def __init__(self, spans: Spans, span: AbstractContextManager[None]) -> None:
        self._spans = spans
        self._span = span

    def __enter__(self) -> None:
        self._token = _active.set(self._spans)
        self._span.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            self._span.__exit__(kind, error, traceback)
        finally:
            _active.reset(self._token)


def span(name: str, attributes: Attributes | None = None, *, client: bool = False) -> AbstractContextManager[None]:
    """A span around a step of the request being handled (a client span for a request sent to
    another process, `client`); nothing outside a traced request. An exception leaving it marks
    the span failed with the exception's type, never its message."""
    spans = _active.get()
    return _OFF if spans is None else spans.span(name, attributes, client)


def carrier() -> dict[str, str] | None:
    """The trace context of the current span as `_meta` keys (`traceparent`, `tracestate`), or None
    outside a traced request."""
    spans = _active.get()
    return None if spans is None else spans.carrier()


class HasHeaders(Protocol):
    """An outgoing HTTP request (httpx's), whose headers the trace context is written into."""

    @property
    def headers(self) -> MutableMapping[str, str]: ...


async def inject_headers(request: HasHeaders) -> None:
    """An HTTP client's request hook: the trace context of the request being handled goes into
    the headers of the HTTP request it sends upstream."""
    spans = _active.get()
    if spans is not None:
        request.headers.update(spans.carrier())


def trace_id() -> str:
    """The trace id of the current span, 32 hex digits; "" outside a traced request."""
    spans = _active.get()
    return "" if spans is None else spans.trace_id()


def annotate(key: str, value: str | int | float | bool) -> None:
    """Set an attribute on the current span, if a traced request is being handled."""
    spans = _active.get()
    if spans is not None:
        spans.annotate(key, value)


def failed(error_type: str) -> None:
    """Mark the current span failed (`error.type`), for a failure that raises nothing (a tool's error result)."""
    spans = _active.get()
    if spans is not None:
        spans.failed(error_type)


def detach() -> None:
    """What the current task does from now on belongs to no request's trace (a long-lived task
    started while handling one: an upstream connection's pings and listings)."""
    spans = _active.get()
    if spans is not None:
        spans.detach()
        _active.set(None)
