"""`--log-format json` and request ids: one id links a client's call, the upstream call and the audit row.

The gateway runs as a real process (`python -m gateway --log-format json serve`) so that what the
test reads is its whole log output.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.runtime import requestid
from gateway.runtime.logformat import JsonFormatter
from tests.support.access import http_client
from tests.support.harness import REPO, gateway_process, toy_stdio, until_listed

pytestmark = pytest.mark.anyio


def audited_ids(data_dir: Path, tool: str) -> list[str]:
    """The request ids of `tool`'s audit rows, oldest first."""
    with closing(sqlite3.connect(data_dir / "audit.db")) as db:
        rows = db.execute("SELECT request_id FROM audit WHERE tool = ? ORDER BY id", (tool,)).fetchall()
    return [row[0] for row in rows]


async def test_each_call_s_upstream_log_line_and_audit_row_carry_the_same_request_id(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    data_dir = tmp_path / "data"
    document = {"gateway": {"data_dir": str(data_dir)}, "servers": {"toy": toy_stdio()}}
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    output = tmp_path / "gateway.log"
    options = ("--log-format", "json", "--log-level", "DEBUG")
    async with gateway_process(config, output, *options) as served, http_client(served.url) as client:
        await until_listed(client, "toy__echo")
        for word in ("one", "two"):
            assert not (await client.call_tool("toy__echo", {"text": word})).is_error

    written = [line for line in output.read_text().splitlines() if line.strip()]
    # Besides its log (stderr, JSON), serve tells the person at the terminal where it serves (stdout, text).
    told = [line for line in written if not line.startswith("{")]
    assert all(
        re.match(r"Serving MCP at |Admin sign-in |Calls waiting for approval|\d+/\d+ servers ready", line)
        for line in told
    ), told
    lines: list[dict[str, Any]] = [json.loads(line) for line in written if line.startswith("{")]
    assert lines and all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    ids = audited_ids(data_dir, "toy__echo")
    assert len(ids) == 2 and len(set(ids)) == 2 and all(ids)
    for request_id in ids:
        linked = {line["logger"]: line["message"] for line in lines if line.get("request_id") == request_id}
        assert "tools/call toy__echo" in linked["gateway.frontdoors.handlers"]
        assert "calling echo" in linked["gateway.upstreams.connection"]


def test_a_json_line_carries_the_request_id_only_inside_a_call() -> None:
    record = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, "hello %s", ("there",), None)
    outside = json.loads(JsonFormatter().format(record))
    with requestid.bound() as request_id:
        inside = json.loads(JsonFormatter().format(record))
    assert outside.keys() == {"time", "level", "logger", "message"}
    assert outside["message"] == "hello there" and outside["logger"] == "gateway.test" and outside["level"] == "INFO"
    assert inside["request_id"] == request_id and requestid.current() is None


def test_request_ids_are_unique_and_a_process_s_ids_sort_in_the_order_its_calls_began() -> None:
    ids = []
    for _ in range(1000):
        with requestid.bound() as request_id:
            ids.append(request_id)
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert all(len(request_id) == 32 and int(request_id, 16) >= 0 for request_id in ids)


def test_two_processes_never_hand_out_the_same_request_id() -> None:
    program = "from gateway.runtime import requestid\nfor _ in range(100):\n    print(requestid.fresh())"
    runs = [
        subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, text=True, cwd=REPO)
        for _ in range(2)
    ]
    first, second = (set(run.stdout.split()) for run in runs)
    assert len(first) == len(second) == 100 and not first & second
    assert not first & {requestid.fresh() for _ in range(100)}
