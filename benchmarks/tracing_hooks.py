"""What tracing costs one call, its hooks timed alone: the spans, annotations and trace-context reads
a tool call passes on its way through the gateway to a stdio server, in the order it passes them.

Off: no `tracing` section, so the front door opens no request span and every hook finds no tracer.
On: each call is a traced request continuing a sampled client trace, its spans all recorded and
exported over OTLP/HTTP to a receiver in another process (`tests/support/otlp.py`); the CPU
counted is this process's, the SDK's export thread and the flushes included. On at sample ratio 0:
a request without a client trace, whose trace is not kept. Each figure is the CPU per call less
that of the same loop without hooks, median [min-max] over the rounds.

Run `python -m benchmarks.tracing_hooks [--calls 20000] [--rounds 5]` from the repository root.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

from gateway.runtime import tracing
from gateway.runtime.tracing import Tracing, TracingSettings

# The gateway's target for what tracing may add to a call when it is off.
TARGET_OFF_MS = 0.05
# Calls exported at a time: their five spans each stay within the SDK's queue of 2048.
CHUNK = 400
RECEIVER = (
    "import sys\n"
    "from tests.support.otlp import otlp_receiver\n"
    "with otlp_receiver() as receiver:\n"
    "    print(receiver.url, flush=True)\n"
    "    sys.stdin.read()\n"
)
ATTRIBUTES = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gateway.upstream": "echo"}
REQUEST = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo__echo", "jsonrpc.request.id": "7"}


def hooks() -> None:
    """The hooks of one call that a gateway without tracing did not pass: the request id on the
    span, validation, execution, the upstream span and the `_meta` it sends, the audit row's trace id."""
    tracing.annotate(tracing.REQUEST_ID, "0" * 32)
    with tracing.span("validate"):
        pass
    with tracing.span("execute", {"gateway.source": "echo"}), tracing.span("tools/call echo", ATTRIBUTES, client=True):
        tracing.carrier()
    tracing.trace_id()


def bare() -> None:
    """The same call without its hooks: the loop's own cost."""


def cpu_per_call(
    calls: int, call: Callable[[], None], wrap: Callable[[], AbstractContextManager[None]] | None
) -> float:
    """CPU seconds per call of `calls` calls of `call`, each inside `wrap` when given."""
    started = time.process_time()
    if wrap is None:
        for _ in range(calls):
            call()
    else:
        for _ in range(calls):
            with wrap():
                call()
    return (time.process_time() - started) / calls


@contextmanager
def receiver() -> Iterator[str]:
    """An OTLP/HTTP receiver in a process of its own; its URL."""
    process = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


def traced_round(calls: int, url: str, ratio: float, meta: dict[str, str] | None) -> float:
    """CPU per call of the hooks inside a traced request (continuing `meta`'s trace when given), from
    the exporter's start to its last flush. Calls run in chunks, each flushed before the next, so
    that no span is dropped for want of room in the SDK's queue (2048)."""
    gateway_tracing = Tracing(TracingSettings(endpoint=url, sample_ratio=ratio))

    def request() -> AbstractContextManager[None]:
        return gateway_tracing.request("tools/call echo__echo", REQUEST, (meta,))

    started = time.process_time()
    for chunk in range(0, calls, CHUNK):
        with gateway_tracing.exporting():
            cpu_per_call(min(CHUNK, calls - chunk), hooks, request)
    return (time.process_time() - started) / calls


def spread(values: Sequence[float]) -> str:
    """`median [min-max]` in microseconds."""
    us = [value * 1e6 for value in values]
    return f"{statistics.median(us):.2f} us [{min(us):.2f}-{max(us):.2f}]"


def main(argv: Sequence[str] | None = None) -> None:
    """Time the hooks off and on, round by round, and print the figures beside the target."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tracing_hooks", description=__doc__)
    parser.add_argument("--calls", type=int, default=20000, help="calls timed per round (default 20000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    sampled = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    off: list[float] = []
    on: list[float] = []
    unsampled: list[float] = []
    with receiver() as url:
        for _ in range(args.rounds):
            loop = cpu_per_call(args.calls, bare, None)
            off.append(cpu_per_call(args.calls, hooks, None) - loop)
            on.append(traced_round(args.calls, url, 1.0, sampled) - loop)
            unsampled.append(traced_round(args.calls, url, 0.0, None) - loop)
    off_ms = statistics.median(off) * 1000
    print(
        f"tracing hooks of one call, {args.calls} calls a round, {args.rounds} rounds, Python {sys.version.split()[0]}"
    )
    print(f"off (no tracing section):                    {spread(off)} CPU a call")
    print(f"on, every span recorded and exported:        {spread(on)} CPU a call, the export thread included")
    print(f"on, sample_ratio 0 (no client trace to keep): {spread(unsampled)} CPU a call")
    verdict = "met" if off_ms <= TARGET_OFF_MS else "MISSED"
    print(f"off adds {off_ms:.4f} ms a call (target <= {TARGET_OFF_MS} ms): {verdict}")


if __name__ == "__main__":
    main()
