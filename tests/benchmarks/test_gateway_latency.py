"""The per-call benchmark's accounting: which processes it finds on a call's path, and what it reports of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from benchmarks.gateway_latency import REPO, Measurement, children_of, report, upstream_pids

# A bound on waiting for a process to start, not a timing assertion.
START_BOUND = 60.0


@pytest.fixture
def serving_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process that runs the echo server over stdio under the gateway's own watcher, as `gateway
    serve` does (the watcher leads a process group of its own)."""
    # The watcher is told its parent's pid, as the gateway tells it its own.
    runner = (
        "import os, subprocess, sys; from gateway.upstreams.children import watched; "
        "program, args = watched(os.getpid(), [sys.executable, '-m', 'servers.echo']); "
        "subprocess.run([program, *args], stdin=subprocess.PIPE)"
    )
    process = subprocess.Popen([sys.executable, "-c", runner], cwd=REPO, start_new_session=True)
    try:
        yield process
    finally:
        groups = [process.pid, *children_of(process.pid)]
        for group in groups:
            with suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        process.wait()


def test_the_echo_server_below_a_serving_process_is_found_and_its_watcher_is_not(
    serving_process: subprocess.Popen[bytes],
) -> None:
    deadline = time.monotonic() + START_BOUND
    found = upstream_pids(serving_process.pid)
    while not found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = upstream_pids(serving_process.pid)

    watchers = children_of(serving_process.pid)
    assert len(found) == 1
    assert found == [child for watcher in watchers for child in children_of(watcher)]
    command = Path(f"/proc/{found[0]}/cmdline").read_bytes().split(b"\0")
    assert command[-2:] == [b"servers.echo", b""]


def test_the_report_adds_up_each_path_s_cpu_and_the_share_of_direct_it_allows() -> None:
    direct = Measurement(1.4, 2.0, 1200.0, server_cpu_ms=0.45, upstream_cpu_ms=None, client_cpu_ms=0.85)
    gateway = Measurement(2.5, 3.5, 800.0, server_cpu_ms=0.55, upstream_cpu_ms=0.50, client_cpu_ms=0.95)

    text = report({"direct": [direct], "gateway": [gateway]}, [0.5], "legacy", 1000, 5.0)

    lines = text.splitlines()
    header = next(index for index, line in enumerate(lines) if line.endswith("CPU-bound share"))
    direct_row, gateway_row = lines[header + 1], lines[header + 2]
    # Direct's path: client 0.85 + server 0.45 = 1.30 ms; the gateway's: 0.95 + 0.55 + 0.50 = 2.00 ms.
    assert direct_row.split()[0] == "direct"
    assert "1.30 [1.30-1.30]" in direct_row
    assert direct_row.split()[-1] == "-"
    assert gateway_row.split()[0] == "gateway"
    assert "0.50 [0.50-0.50]   2.00 [2.00-2.00]" in gateway_row
    assert gateway_row.split()[-2] == "65%"
