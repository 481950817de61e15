"""Traces: a call's spans exported over OTLP to a real receiver, the client's trace continued, the
trace context sent upstream (in `params._meta` and in HTTP headers), and no trace without a
`tracing` section.

The receiver decodes what it gets with OpenTelemetry's own protobuf classes (`tests/support/otlp.py`).
A gateway sends the spans still queued when it stops, so each test reads them once its gateways
have stopped.
"""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.errors import ConfigError
from gateway.frontdoors.mcpserver import build_server
from gateway.live.reload import needs_restart
from gateway.runtime.logformat import JsonFormatter
from gateway.runtime.tracing import Tracing, TracingSettings
from gateway.service import Gateway
from tests.support.access import http_client
from tests.support.harness import REPO, approve, gateway_process, http_gateway, in_memory, make_config, until_listed
from tests.support.otlp import ReceivedSpan, Receiver, otlp_receiver
from tests.support.toy import build_server as toy
from tests.support.traced import served_over_http

pytestmark = pytest.mark.anyio

TRACED = {"command": sys.executable, "args": ["-m", "tests.support.traced"], "cwd": str(REPO)}


def client_context() -> tuple[str, str, dict[str, Any]]:
    """A trace id and span id of the client's own, and the `_meta` that carries them."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, {"traceparent": f"00-{trace_id}-{span_id}-01"}


def tracing_section(receiver: Receiver, service: str = "mcp-gateway") -> dict[str, Any]:
    return {"tracing": {"endpoint": receiver.url, "service_name": service}}


def parts(traceparent: str) -> tuple[str, str, bool]:
    """A W3C `traceparent`'s trace id, parent span id and whether it is sampled."""
    version, trace_id, span_id, flags = traceparent.split("-")
    assert version == "00"
    return trace_id, span_id, bool(int(flags, 16) & 1)


def one(spans: list[ReceivedSpan], **fields: str) -> ReceivedSpan:
    """The only span with these fields."""
    found = [span for span in spans if all(getattr(span, key) == value for key, value in fields.items())]
    assert len(found) == 1, (fields, [(span.service, span.name, span.parent_id) for span in spans])
    return found[0]


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[str]:
    return sorted(span.name for span in spans if span.parent_id == parent.span_id)


def answer(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    decoded: dict[str, Any] = json.loads(block.text)
    return decoded


async def test_a_call_through_two_gateways_is_one_trace_that_continues_the_client_s(tmp_path: Path) -> None:
    trace_id, client_span, meta = client_context()
    with otlp_receiver() as receiver:
        inner = tmp_path / "inner.yaml"
        inner_doc = {
            "gateway": {"data_dir": str(tmp_path / "inner")},
            "servers": {"ctx": TRACED},
            **tracing_section(receiver, "inner"),
        }
        inner.write_text(yaml.safe_dump(inner_doc), encoding="utf-8")
        async with gateway_process(inner, tmp_path / "inner.log") as inner_served:
            outer = tmp_path / "outer.yaml"
            outer_doc = {
                "gateway": {"data_dir": str(tmp_path / "outer")},
                "servers": {"inner": {"url": f"{inner_served.url}/mcp"}},
                **tracing_section(receiver, "outer"),
            }
            outer.write_text(yaml.safe_dump(outer_doc), encoding="utf-8")
            log = tmp_path / "outer.log"
            async with (
                gateway_process(outer, log, "--log-format", "json", "--log-level", "DEBUG") as outer_served,
                http_client(outer_served.url) as client,
            ):
                await until_listed(client, "inner__ctx__context")
                seen = answer(await client.call_tool("inner__ctx__context", {}, meta=meta))
        spans = [span for span in receiver.spans if span.trace_id == trace_id]

    outer_spans = [span for span in spans if span.service == "outer"]
    inner_spans = [span for span in spans if span.service == "inner"]
    # The outer gateway continues the client's trace under the client's span.
    outer_call = one(outer_spans, name="tools/call inner__ctx__context")
    assert outer_call.kind == "server" and outer_call.parent_id == client_span
    assert outer_call.attributes["gen_ai.tool.name"] == "inner__ctx__context"
    assert children(outer_spans, outer_call) == ["execute", "validate"]
    outer_execute = one(outer_spans, name="execute")
    outer_upstream = one(outer_spans, name="tools/call ctx__context")
    assert outer_upstream.kind == "client" and outer_upstream.parent_id == outer_execute.span_id
    assert outer_upstream.attributes["gateway.upstream"] == "inner"
    # The inner gateway, another process reached over HTTP, continues it under the outer's client span.
    inner_call = one(inner_spans, name="tools/call ctx__context")
    assert inner_call.kind == "server" and inner_call.parent_id == outer_upstream.span_id
    assert children(inner_spans, inner_call) == ["execute", "validate"]
    inner_upstream = one(inner_spans, name="tools/call context")
    assert inner_upstream.parent_id == one(inner_spans, name="execute").span_id
    assert inner_upstream.attributes["gateway.upstream"] == "ctx"
    # Its stdio server got the trace context in `_meta`, under the inner gateway's client span.
    assert seen["header"] is None and parts(seen["meta"]) == (trace_id, inner_upstream.span_id, True)
    # The request id on the span is the one of the call's audit row and log lines, which name the trace.
    request_id = outer_call.attributes["gateway.request_id"]
    with closing(sqlite3.connect(tmp_path / "outer" / "audit.db")) as db:
        rows = db.execute("SELECT request_id, trace_id FROM audit WHERE tool = 'inner__ctx__context'").fetchall()
    assert rows == [(request_id, trace_id)]
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("request_id") == request_id for line in lines)
    assert all(line["trace_id"] == trace_id for line in lines if line.get("request_id") == request_id)


async def test_an_http_upstream_gets_the_trace_context_in_its_headers_and_in_meta(tmp_path: Path) -> None:
    trace_id, _, meta = client_context()
    with otlp_receiver() as receiver:
        async with served_over_http() as url:
            config = make_config(tmp_path, {"web": {"url": url}}, sections=tracing_section(receiver))
            async with http_gateway(config) as (_, gateway_url), http_client(gateway_url) as client:
                seen = answer(await client.call_tool("web__context", {}, meta=meta))
        upstream = one(receiver.spans, name="tools/call context")
    assert seen["meta"] == seen["header"]
    assert parts(seen["meta"]) == (trace_id, upstream.span_id, True)


async def test_a_call_without_a_client_trace_starts_one_of_the_gateway_s_own(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        async with served_over_http() as url:
            config = make_config(tmp_path, {"web": {"url": url}}, sections=tracing_section(receiver))
            async with http_gateway(config) as (_, gateway_url), http_client(gateway_url) as client:
                seen = answer(await client.call_tool("web__context", {}))
        call = one(receiver.spans, name="tools/call web__context")
        upstream = one(receiver.spans, name="tools/call context")
    assert call.parent_id == "" and upstream.trace_id == call.trace_id
    assert seen["meta"] == seen["header"]
    assert parts(seen["meta"]) == (call.trace_id, upstream.span_id, True)


async def test_a_trace_the_sample_ratio_leaves_out_exports_nothing_and_goes_upstream_unsampled(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        async with served_over_http() as url:
            sections = {"tracing": {"endpoint": receiver.url, "sample_ratio": 0}}
            config = make_config(tmp_path, {"web": {"url": url}}, sections=sections)
            async with http_gateway(config) as (_, gateway_url), http_client(gateway_url) as client:
                seen = answer(await client.call_tool("web__context", {}))
        assert receiver.spans == []
    assert seen["meta"] == seen["header"]
    assert parts(seen["meta"])[2] is False


async def test_a_client_s_traceparent_header_is_continued_when_its_meta_has_none(tmp_path: Path) -> None:
    trace_id, client_span, meta = client_context()
    with otlp_receiver() as receiver:
        config = make_config(tmp_path, {"toy": {"command": "unused"}}, sections=tracing_section(receiver))
        async with (
            http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
            httpx2.AsyncClient(headers=meta, timeout=30) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy") as client,
        ):
            assert not (await client.call_tool("toy__echo", {"text": "hi"})).is_error
        call = one(receiver.spans, name="tools/call toy__echo")
    assert (call.trace_id, call.parent_id) == (trace_id, client_span)


async def test_a_risky_call_s_wait_for_approval_is_a_span_between_validation_and_execution(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = make_config(
            tmp_path, {"toy": {"command": "unused", "risk": "high"}}, sections=tracing_section(receiver)
        )
        async with (
            Gateway(config, transports=in_memory({"toy": toy()})) as gateway,
            Client(build_server(gateway), mode="legacy", elicitation_callback=approve) as client,
        ):
            assert not (await client.call_tool("toy__echo", {"text": "hi"})).is_error
        spans = receiver.spans
    call = one(spans, name="tools/call toy__echo")
    assert children(spans, call) == ["approval", "execute", "validate"]
    approval = one(spans, name="approval")
    assert approval.attributes == {"gateway.tool.risk": "high", "gateway.approval.via": "elicitation"}


async def test_refused_and_failed_calls_mark_their_spans_failed_without_their_messages(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = make_config(tmp_path, {"toy": {"command": "unused"}}, sections=tracing_section(receiver))
        async with (
            Gateway(config, transports=in_memory({"toy": toy()})) as gateway,
            Client(build_server(gateway), mode="legacy") as client,
        ):
            assert (await client.call_tool("toy__echo", {"text": 42})).is_error
            assert (await client.call_tool("toy__fail", {"message": "the secret is 1234"})).is_error
        spans = receiver.spans
    refused = one(spans, name="tools/call toy__echo")
    assert refused.failed and refused.attributes["error.type"] == "tool_error"
    assert children(spans, refused) == ["validate"]
    assert one(spans, name="validate", parent_id=refused.span_id).attributes == {"error.type": "ToolInputError"}
    failed = one(spans, name="tools/call toy__fail")
    upstream = one(spans, name="tools/call fail")
    assert failed.failed and upstream.failed and upstream.attributes["error.type"] == "tool_error"
    assert "1234" not in repr(spans)


async def test_without_a_tracing_section_no_trace_context_goes_upstream(tmp_path: Path) -> None:
    _, _, meta = client_context()
    async with served_over_http() as url:
        config = make_config(tmp_path, {"web": {"url": url}})
        async with http_gateway(config) as (gateway, gateway_url), http_client(gateway_url) as client:
            assert not gateway.tracing.enabled
            seen = answer(await client.call_tool("web__context", {}, meta=meta))
    assert seen == {"meta": None, "header": None}


async def test_a_traced_call_s_json_log_lines_name_its_trace(tmp_path: Path) -> None:
    trace_id, _, meta = client_context()
    records: list[dict[str, Any]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(json.loads(JsonFormatter().format(record)))

    handler = Collect(logging.DEBUG)
    logger = logging.getLogger("gateway")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with otlp_receiver() as receiver:
            config = make_config(tmp_path, {"toy": {"command": "unused"}}, sections=tracing_section(receiver))
            async with (
                Gateway(config, transports=in_memory({"toy": toy()})) as gateway,
                Client(build_server(gateway), mode="legacy") as client,
            ):
                assert not (await client.call_tool("toy__echo", {"text": "hi"}, meta=meta)).is_error
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    during = [record for record in records if "request_id" in record]
    assert during and all(record["trace_id"] == trace_id for record in during)
    # Lines of no request (the upstream connecting) name no trace.
    ready = [record for record in records if record["message"].startswith("upstream toy ready")]
    assert ready and not any("trace_id" in record for record in ready)


def test_a_tracing_section_names_the_collector_and_its_problems_name_no_value() -> None:
    settings = TracingSettings.from_config(
        {"endpoint": "http://collector:4318", "headers": {"Authorization": "Bearer t0ken"}}, source_file="g.yaml"
    )
    assert settings is not None and settings.traces_url == "http://collector:4318/v1/traces"
    assert (settings.service_name, settings.sample_ratio) == ("mcp-gateway", 1.0)
    full = TracingSettings.from_config({"endpoint": "https://c.example/v1/traces/"}, source_file="g.yaml")
    assert full is not None and full.traces_url == "https://c.example/v1/traces"
    with pytest.raises(ConfigError) as raised:
        TracingSettings.from_config(
            {"endpoint": "collector:4318", "sample_ratio": 2, "headers": {"X": 7}, "colour": "t0ken"},
            source_file="g.yaml",
        )
    message = raised.value.message
    for path in ("tracing.endpoint", "tracing.sample_ratio", "tracing.headers.X", "tracing.colour"):
        assert path in message
    assert "t0ken" not in message and "collector:4318" not in message


def test_the_collector_s_headers_are_secrets_kept_out_of_what_the_gateway_writes(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        {},
        sections={"tracing": {"endpoint": "http://127.0.0.1:4318", "headers": {"Authorization": "Bearer c011ect0r"}}},
    )
    gateway = Gateway(config)
    assert gateway.redact("sent Bearer c011ect0r, then c011ect0r") == "sent [redacted], then [redacted]"


def test_a_changed_tracing_section_waits_for_a_restart(tmp_path: Path) -> None:
    before = make_config(tmp_path, {})
    after = make_config(tmp_path, {}, sections={"tracing": {"endpoint": "http://127.0.0.1:4318"}})
    assert needs_restart(before, after) == ["tracing"]
    assert needs_restart(after, after) == []


def test_a_tracing_section_without_the_opentelemetry_sdk_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `None` in sys.modules is how Python marks a module that cannot be imported: the SDK not installed.
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    settings = TracingSettings(endpoint="http://127.0.0.1:4318")
    with pytest.raises(ConfigError, match=r"gateway\.yaml: tracing: .*pip install 'mcp-gateway\[tracing\]'"):
        Tracing(settings, "gateway.yaml")
    assert not Tracing(None, "gateway.yaml").enabled
