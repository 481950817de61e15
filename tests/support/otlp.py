"""An OTLP/HTTP trace receiver for tests: what a collector receives at `/v1/traces`, decoded with
OpenTelemetry's own protobuf classes (`opentelemetry-proto`), each span kept as a `ReceivedSpan`.

It runs in a thread of its own (`http.server`), so gateways in this process and in others export
to it alike. A gateway sends the spans it still holds when it stops: a test reads them after that.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

KINDS = {
    Span.SPAN_KIND_INTERNAL: "internal",
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector got it: ids in hex, the empty string for a root's parent."""

    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    failed: bool


class Receiver:
    """The spans received so far, in the order they arrived, and the URL to export them to."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()

    def take(self, request: ExportTraceServiceRequest) -> None:
        """Keep the spans of one export request."""
        spans = [
            _span(_resource_service(resource.resource.attributes), span)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self._lock:
            self.spans.extend(spans)


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver on a free loopback port, for the duration of the block."""
    holder: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            holder[0].take(request)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read the spans, not the access log."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(Receiver(f"http://127.0.0.1:{server.server_address[1]}"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _span(service: str, span: Span) -> ReceivedSpan:
    return ReceivedSpan(
        service=service,
        name=span.name,
        kind=KINDS.get(span.kind, "unspecified"),
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        attributes={attribute.key: _value(attribute.value) for attribute in span.attributes},
        failed=span.status.code == Status.STATUS_CODE_ERROR,
    )


def _resource_service(attributes: Any) -> str:
    return next((_value(a.value) for a in attributes if a.key == "service.name"), "")


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None
