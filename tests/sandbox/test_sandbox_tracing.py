"""A sandboxed call's trace: the container taken for it and the request sent into it, inside the call's span."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from docker import DockerClient
from mcp import Client

from gateway.frontdoors.mcpserver import build_server
from gateway.service import Gateway
from tests.sandbox.conftest import IMAGE, WAIT
from tests.support.harness import REPO, make_config
from tests.support.otlp import otlp_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def test_a_sandboxed_call_s_container_start_and_request_are_spans_of_its_execution(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    python = {
        "command": sys.executable,
        "args": ["-m", "servers.python"],
        "cwd": str(REPO),
        "tools": {
            "run_python": {
                "risk": "low",
                "sandbox": {"mode": "per-call", "command": ["python3", "-m", "servers.python"]},
            }
        },
    }
    with otlp_receiver() as receiver:
        sections = {"tracing": {"endpoint": receiver.url}}
        config = make_config(tmp_path, {"python": python}, sections=sections, sandbox_image=IMAGE, sandbox_warm=0)
        async with Gateway(config) as gateway, Client(build_server(gateway), mode="legacy") as client:
            with anyio.fail_after(WAIT):
                result = await client.call_tool("python__run_python", {"code": "print(6 * 7)"})
        spans = receiver.spans
    assert not result.is_error, result
    [call] = [span for span in spans if span.name == "tools/call python__run_python"]
    [execute] = [span for span in spans if span.name == "execute" and span.parent_id == call.span_id]
    inside = sorted((span.name, span.kind) for span in spans if span.parent_id == execute.span_id)
    assert inside == [("sandbox start", "internal"), ("tools/call run_python", "client")]
    assert all(
        span.trace_id == call.trace_id and not span.failed for span in spans if span.parent_id == execute.span_id
    )
