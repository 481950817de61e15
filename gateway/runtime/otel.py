"""The OpenTelemetry SDK behind `gateway.runtime.tracing`: a tracer provider of the gateway's own,
its spans batched and exported over OTLP/HTTP (protobuf), loaded only when tracing is configured
(`pip install 'mcp-gateway[tracing]'`).

The provider is not installed as OpenTelemetry's global one. The `mcp` SDK opens a span of its
own around every request it sends (health pings and listings included) through the global
tracer; left without a provider, those spans stay no-op ones that carry their parent's context,
so the SDK still writes the gateway's current span into `params._meta` of what it sends. The
spans say what the gateway did, never what passed through it: no arguments, results, error
messages or session ids, only names, methods, ids, outcomes and durations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from importlib.metadata import version as package_version
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.runtime.tracing import Attributes, TracingSettings

ERROR_TYPE = "error.type"
# Seconds the exporter waits for the collector on each export, and so at most at shutdown.
EXPORT_TIMEOUT = 10.0


class _Current:
    """A started span made the current one while entered, and ended on the way out; an exception
    leaving it is told by its type alone (its text may quote what the client sent)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def __enter__(self) -> None:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        otel_context.detach(self._token)
        if error is not None and not isinstance(error, GeneratorExit):
            self._span.set_attribute(ERROR_TYPE, type(error).__qualname__)
            self._span.set_status(StatusCode.ERROR)
        self._span.end()


_UNRECORDED: AbstractContextManager[None] = nullcontext()


class Exporter:
    """Spans made with the gateway's own tracer provider and exported in batches, in a thread of
    the SDK's, to `settings.traces_url`."""

    def __init__(self, settings: TracingSettings) -> None:
        version = package_version("mcp-gateway")
        resource = Resource.create({"service.name": settings.service_name, "service.version": version})
        # A client's sampling decision is followed; a trace that begins here is kept at `sample_ratio`.
        sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
        self._provider = TracerProvider(resource=resource, sampler=sampler)
        exporter = OTLPSpanExporter(
            endpoint=settings.traces_url, headers=dict(settings.headers), timeout=EXPORT_TIMEOUT
        )
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("gateway", version)
        self._propagator = TraceContextTextMapPropagator()

    def close(self) -> None:
        """Send the spans still queued, then stop the export thread."""
        self._provider.shutdown()

    def request(
        self, name: str, attributes: Attributes, carriers: Sequence[Mapping[str, Any] | None]
    ) -> AbstractContextManager[None]:
        """A server span for one client request, the child of the first valid `traceparent` in `carriers`."""
        return _Current(self._tracer.start_span(name, self._parent(carriers), SpanKind.SERVER, attributes))

    def span(self, name: str, attributes: Attributes | None, client: bool) -> AbstractContextManager[None]:
        """A span inside the current one (a client span: a request to another process); nothing
        inside a trace that is not kept, whose spans would not be kept either."""
        if not trace.get_current_span().is_recording():
            return _UNRECORDED
        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
        return _Current(self._tracer.start_span(name, None, kind, attributes))

    def _parent(self, carriers: Sequence[Mapping[str, Any] | None]) -> otel_context.Context | None:
        for carrier in carriers:
            if not carrier:
                continue
            try:
                context = self._propagator.extract(carrier)
            except (TypeError, ValueError):
                continue
            if trace.get_current_span(context).get_span_context().is_valid:
                return context
        return None

    def carrier(self) -> dict[str, str]:
        """The current span's context as W3C Trace Context keys."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier

    def trace_id(self) -> str:
        """The current span's trace id in hex, "" when there is none."""
        context = trace.get_current_span().get_span_context()
        return format(context.trace_id, "032x") if context.is_valid else ""

    def annotate(self, key: str, value: str | int | float | bool) -> None:
        """An attribute on the current span."""
        trace.get_current_span().set_attribute(key, value)

    def failed(self, error_type: str) -> None:
        """The current span failed, without an exception."""
        current = trace.get_current_span()
        current.set_attribute(ERROR_TYPE, error_type)
        current.set_status(StatusCode.ERROR)

    def detach(self) -> None:
        """The current task leaves the trace it was started in."""
        otel_context.attach(otel_context.Context())
